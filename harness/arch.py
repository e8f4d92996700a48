"""Guest architectures: what differs between an x86_64 and an arm64 guest, in one record each.

A kernel has an arch (lab.yaml `kernels.NAME.arch`, x86_64 by default); everything that depends
on it (the Debian architecture of its package and of the rootfs, the QEMU binary, machine and
TCG CPU, the console device, the kernel build's ARCH and image, the host packages that run and
build it, whether its cache keys name it) is read from its Arch here, so no other module
carries an `if arm64` of its own (tests/unit/test_arch.py checks).
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
    machine: str        # QEMU -machine: a board whose virtio disks and NIC sit on PCI, so the
    #                     initramfs loads the same drivers on every arch
    tcg_cpu: str        # QEMU -cpu under TCG (KVM takes `host`): the fastest model measured that
    #                     boots every kernel of the arch cleanly; why each, in
    #                     docs/results/2026-11-2x-kernels-and-arches.md (TCG CPU model sections)
    tcg_cpu_models: tuple[str, ...]  # the models `./lab bench cpu-models` compares by default
    console: str        # the serial console device the kernel writes to
    kbuild: str         # make ARCH=
    kconfig: str        # the Kconfig symbol every .config of the arch sets (CONFIG_<it>=y)
    image: str          # the boot image of a kernel build, relative to its make O= folder
    image_magic: tuple[int, bytes]  # (offset, bytes) that mark such a boot image: of_image()
    release_in_header: bool  # True if the image's boot header names its release (a bzImage's
    #                          setup header); else it is read from the "Linux version" banner
    cross_compile: str  # make CROSS_COMPILE= when the host is not this arch
    qemu_user: str      # the qemu-user binary that runs this arch's programs (rootfs build)
    qemu_user_package: str  # the Debian package that has it
    named_in_keys: bool  # False for the lab's first arch only: the cache keys of its rootfs, module
    #                      build roots and kernel builds (and a snapshot's accel) name no arch, so
    #                      what was cached before there were arches keeps its name
    fixed_ram: str      # memmap= of a range of a 1 GiB guest's RAM the kernel leaves alone, for a
    #                     trace buffer at a fixed address (SIZE$ADDR, below the initramfs QEMU
    #                     loads at the top of RAM); "" where the arch has no memmap=
    ssh_ready_target_s: float  # `./lab bench boot`'s target, QEMU start to SSH ready under TCG
    #                            on a 2-core host (issue 16: arm64 is emulated whole on x86)


X86_64 = Arch(name="x86_64", debian="amd64", uname="x86_64", qemu="qemu-system-x86_64",
              qemu_package="qemu-system-x86", machine="pc",
              # QEMU's conservative default without CMPXCHG16B: QEMU 7.2's TCG raises spurious
              # #DB right after SLUB's cmpxchg16b (2026-11-21, see docs/results/)
              tcg_cpu="qemu64,-cx16", tcg_cpu_models=("qemu64,-cx16", "max"),
              console="ttyS0", kbuild="x86", kconfig="X86",
              image="arch/x86/boot/bzImage", image_magic=(0x202, b"HdrS"),
              release_in_header=True, cross_compile="x86_64-linux-gnu-",
              qemu_user="qemu-x86_64-static", qemu_user_package="qemu-user-static",
              named_in_keys=False, fixed_ram="4M$0x30000000", ssh_ready_target_s=10.0)
ARM64 = Arch(name="arm64", debian="arm64", uname="aarch64", qemu="qemu-system-aarch64",
             qemu_package="qemu-system-arm",
             machine="virt",  # a PL011 UART, PSCI and a generic PCI host
             # v8.2 with no pauth, MTE or SVE to emulate, and 4, 16 and 64 KiB granules
             # (cortex-a72, as fast, cannot boot arm64-16k; 2026-11-23, see docs/results/)
             tcg_cpu="neoverse-n1",
             tcg_cpu_models=("max", "max,pauth-impdef=on", "cortex-a72", "neoverse-n1"),
             console="ttyAMA0", kbuild="arm64", kconfig="ARM64",
             image="arch/arm64/boot/Image", image_magic=(0x38, b"ARM\x64"),
             release_in_header=False, cross_compile="aarch64-linux-gnu-",
             qemu_user="qemu-aarch64-static", qemu_user_package="qemu-user-static",
             named_in_keys=True, fixed_ram="", ssh_ready_target_s=30.0)
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
    """The arch a kernel image file boots on, from its header (Arch.image_magic: x86's boot
    protocol signature 'HdrS' at 0x202, arm64's Image magic 'ARM\\x64' at 0x38); None for
    anything else (a compressed or EFI-wrapped arm64 image has neither)."""
    marks = {a.name: a.image_magic for a in ARCHES.values()}
    try:
        with path.open("rb") as f:
            head = f.read(max(off + len(magic) for off, magic in marks.values()))
    except OSError:
        return None
    return next((ARCHES[name] for name, (off, magic) in marks.items()
                 if head[off:off + len(magic)] == magic), None)
