"""What the host must have: commands, the Debian packages that provide them, and one-line
errors that say how to install what is missing. (./lab installs these on first use as root;
this check catches the rest, e.g. RINGLAB_NO_INSTALL=1 or a changed PATH.)"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from harness.errors import HostError


@dataclass(frozen=True)
class Tool:
    command: str
    package: str
    why: str


BOOT_TOOLS = (
    Tool("qemu-system-x86_64", "qemu-system-x86", "runs the guests"),
    Tool("qemu-img", "qemu-utils", "makes each boot's throw-away overlay"),
)
KERNEL_TOOLS = (
    Tool("dpkg-deb", "dpkg", "unpacks Debian kernel packages"),
    Tool("depmod", "kmod", "indexes the kernel's modules"),
    Tool("mkfs.ext4", "e2fsprogs", "makes the modules image"),
    Tool("cpio", "cpio", "packs the initramfs"),
    Tool("busybox", "busybox-static", "runs the initramfs"),
    Tool("gpgv", "gpgv", "verifies the mirror's signed Release"),
)
ROOTFS_TOOLS = (
    Tool("mmdebstrap", "mmdebstrap", "builds the guest root filesystem"),
    Tool("mkfs.ext4", "e2fsprogs", "makes the root filesystem image"),
)
BUILD_TOOLS = (
    Tool("make", "make", "builds kernels"),
    Tool("gcc", "gcc", "compiles kernels"),
    Tool("flex", "flex", "generates the Kconfig parser"),
    Tool("bison", "bison", "generates the Kconfig parser"),
    Tool("bc", "bc", "computes kernel constants at build time"),
    Tool("git", "git", "applies patch series and bisects"),
    Tool("pkg-config", "pkgconf", "finds libelf for objtool"),
)
# Headers a kernel build needs (objtool links libelf; certificate tools link OpenSSL).
BUILD_HEADERS = (("/usr/include/gelf.h", "libelf-dev"), ("/usr/include/openssl/ssl.h", "libssl-dev"))
ALL_TOOLS = tuple({t.command: t for t in BOOT_TOOLS + KERNEL_TOOLS + ROOTFS_TOOLS}.values()) + (
    Tool("ssh", "openssh-client", "./lab ssh opens a shell in a guest"),)


def _path() -> str:
    # depmod and mkfs.ext4 live in sbin, which a non-root PATH may lack.
    return os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


def missing(tools: tuple[Tool, ...]) -> list[Tool]:
    return [t for t in tools if shutil.which(t.command, path=_path()) is None]


def require(tools: tuple[Tool, ...]) -> None:
    """Raise a one-line HostError naming every missing command and the apt-get line for it."""
    gone = missing(tools)
    if gone:
        names = ", ".join(f"{t.command} ({t.why})" for t in gone)
        packages = " ".join(sorted({t.package for t in gone}))
        raise HostError(f"missing on this host: {names}; install with: apt-get install {packages}")


def require_headers(headers: tuple[tuple[str, str], ...]) -> None:
    """Raise a HostError naming the -dev packages whose headers are missing."""
    gone = sorted({package for path, package in headers if not os.path.exists(path)})
    if gone:
        raise HostError(f"missing development headers for kernel builds; install with: "
                        f"apt-get install {' '.join(gone)}")
