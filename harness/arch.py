"""Guest architectures: what differs between an x86_64 and an arm64 guest, in one record each.

A kernel has an arch (lab.yaml `kernels.NAME.arch`, x86_64 by default); everything that depends
on it (the Debian architecture of its package and of the rootfs, the QEMU binary and machine,
the console device, the kernel build's ARCH and image, the host packages that run and build it)
is read from its Arch here, so no other module carries an `if arm64` of its own.
"""
from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Arch:
    name: str           # the lab's name, as in lab.yaml: x86_64, arm64
    debian: str         # Debian's architecture: the Packages index, mmdebstrap --architectures
    uname: str          # `uname -m` on such a machine: KVM only when the host's is the same
    qemu: str           # the qemu-system binary
    qemu_package: str   # the Debian package that has it
    console: str        # the serial console device the kernel writes to
    kbuild: str         # make ARCH=
    image: str          # the boot image of a kernel build, relative to its make O= folder
    cross_compile: str  # make CROSS_COMPILE= when the host is not this arch
    qemu_user: str      # the qemu-user binary that runs this arch's programs (rootfs build)
    qemu_user_package: str  # the Debian package that has it


X86_64 = Arch(name="x86_64", debian="amd64", uname="x86_64", qemu="qemu-system-x86_64",
              qemu_package="qemu-system-x86", console="ttyS0", kbuild="x86",
              image="arch/x86/boot/bzImage", cross_compile="x86_64-linux-gnu-",
              qemu_user="qemu-x86_64-static", qemu_user_package="qemu-user-static")
ARM64 = Arch(name="arm64", debian="arm64", uname="aarch64", qemu="qemu-system-aarch64",
             qemu_package="qemu-system-arm", console="ttyAMA0", kbuild="arm64",
             image="arch/arm64/boot/Image", cross_compile="aarch64-linux-gnu-",
             qemu_user="qemu-aarch64-static", qemu_user_package="qemu-user-static")
ARCHES: dict[str, Arch] = {a.name: a for a in (X86_64, ARM64)}
DEFAULT = X86_64.name


def get(name: str) -> Arch:
    """The Arch called `name` (a lab.yaml value, already validated against ARCHES)."""
    return ARCHES[name]


def from_debian(debian_arch: str) -> Arch | None:
    """The Arch whose Debian architecture is `debian_arch` (amd64, arm64), None if the lab has
    none (a package for i386, armhf, ...)."""
    return next((a for a in ARCHES.values() if a.debian == debian_arch), None)


def host() -> Arch | None:
    """This host's Arch, None if the lab has none for it."""
    machine = platform.machine()
    return next((a for a in ARCHES.values() if a.uname == machine), None)


def is_native(a: Arch) -> bool:
    """True if guests of `a` can run here under KVM at all (same architecture as the host)."""
    h = host()
    return h is not None and h.name == a.name


def make_vars(a: Arch) -> list[str]:
    """The make variables of a kernel build (and of a module built against it) for `a` on this
    host: none natively, so a native build's command lines stay what they always were; else
    ARCH= and CROSS_COMPILE= of the cross toolchain (Debian's gcc-aarch64-linux-gnu)."""
    return [] if is_native(a) else [f"ARCH={a.kbuild}", f"CROSS_COMPILE={a.cross_compile}"]


def compiler(a: Arch) -> str:
    """The gcc that builds `a`'s kernels here: `gcc` natively, else the cross compiler."""
    return "gcc" if is_native(a) else f"{a.cross_compile}gcc"


def of_image(path: Path) -> Arch | None:
    """The arch a kernel image file boots on, from its header: x86's boot protocol signature
    'HdrS' at 0x202 (a bzImage), arm64's Image magic 'ARM\\x64' at 0x38; None for anything else
    (a compressed or EFI-wrapped arm64 image has neither)."""
    try:
        with path.open("rb") as f:
            head = f.read(0x210)
    except OSError:
        return None
    if head[0x202:0x206] == b"HdrS":
        return X86_64
    if head[0x38:0x3C] == b"ARM\x64":
        return ARM64
    return None

