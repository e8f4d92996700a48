"""What the host must have: commands, the Debian packages that provide them, and one-line
errors that say how to install what is missing. (./lab installs these on first use as root;
this check catches the rest, e.g. RINGLAB_NO_INSTALL=1 or a changed PATH.)"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness import arch as arches
from harness.errors import HostError


@dataclass(frozen=True)
class Tool:
    command: str
    package: str
    why: str


OVERLAY_TOOL = Tool("qemu-img", "qemu-utils", "makes each boot's throw-away overlay")


def boot_tools(a: arches.Arch) -> tuple[Tool, ...]:
    """What booting a guest of `a` needs: its qemu-system (from its Arch record) and qemu-img."""
    return (Tool(a.qemu, a.qemu_package, f"runs the {a.name} guests"), OVERLAY_TOOL)


def rootfs_emulator(a: arches.Arch) -> Tool:
    """The qemu-user through which mmdebstrap runs `a`'s maintainer scripts on a host of another
    arch (registered with binfmt_misc: ensure_binfmt())."""
    return Tool(a.qemu_user, a.qemu_user_package,
                f"runs {a.name} programs while the {a.name} rootfs is built")


BOOT_TOOLS = boot_tools(arches.get(arches.DEFAULT))
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
# What ./lab doctor lists: the boot tools of every arch, and the qemu-user of every arch but the
# default one (the lab's hosts are of the default arch: the others' rootfs are built foreign).
ALL_TOOLS = tuple({t.command: t for t in (
    *(t for a in arches.ARCHES.values() for t in boot_tools(a)), *KERNEL_TOOLS, *ROOTFS_TOOLS,
    *(rootfs_emulator(a) for a in arches.ARCHES.values() if a.name != arches.DEFAULT),
)}.values()) + (Tool("ssh", "openssh-client", "./lab ssh opens a shell in a guest"),)
BINFMT_MISC = Path("/proc/sys/fs/binfmt_misc")
# The binfmt_misc registrations qemu-user-static ships (systemd-binfmt's format), per binary.
BINFMT_D = Path("/usr/lib/binfmt.d")


def foreign_rootfs_tools(a: arches.Arch) -> tuple[Tool, ...]:
    """What building a rootfs of `a` needs beyond ROOTFS_TOOLS: qemu-user when `a` is not
    the host's arch."""
    return () if arches.is_native(a) else (rootfs_emulator(a),)


def cross_build_tools(a: arches.Arch) -> tuple[Tool, ...]:
    """What building a kernel of `a` needs beyond BUILD_TOOLS: Debian's cross toolchain when
    `a` is not the host's arch (gcc-aarch64-linux-gnu brings its binutils)."""
    if arches.is_native(a):
        return ()
    triplet = a.cross_compile.removesuffix("-")
    return (Tool(arches.compiler(a), f"gcc-{triplet}", f"cross-compiles {a.name} kernels and "
                 "test modules"),)


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


def binfmt_name(a: arches.Arch) -> str:
    """The binfmt_misc entry qemu-user-static registers for `a` (qemu-aarch64)."""
    return a.qemu_user.removesuffix("-static")


def ensure_binfmt(a: arches.Arch, root: Path = BINFMT_MISC, conf_dir: Path = BINFMT_D) -> str:
    """Make the kernel run `a`'s programs through qemu-user (for mmdebstrap's second stage):
    mount binfmt_misc if it is not (containers often lack it; it mounts here), and register
    qemu-user-static's entry if nothing did (no systemd-binfmt in a container). Returns what
    it did, for the log; HostError saying why when it cannot."""
    name = binfmt_name(a)
    if (root / name).exists():
        return f"binfmt_misc: {name} already registered"
    done = []
    if not (root / "register").exists():
        proc = subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(root)],
                              capture_output=True, text=True)
        if proc.returncode != 0 or not (root / "register").exists():
            raise HostError(f"cannot mount binfmt_misc at {root} ({proc.stderr.strip()}): "
                            f"building an {a.name} rootfs runs {a.name} programs through "
                            f"{a.qemu_user}",
                            hint=f"as root: mount -t binfmt_misc binfmt_misc {root}")
        done.append(f"mounted binfmt_misc at {root}")
    if not (root / name).exists():
        conf = conf_dir / f"{name}.conf"
        try:
            line = next(ln for ln in conf.read_text().splitlines()
                        if ln.startswith(f":{name}:"))
            (root / "register").write_text(line + "\n")
        except (OSError, StopIteration) as e:
            raise HostError(f"cannot register {name} with binfmt_misc from {conf}: {e}",
                            hint="apt-get install qemu-user-static") from None
        done.append(f"registered {name} from {conf}")
    return "binfmt_misc: " + "; ".join(done)
