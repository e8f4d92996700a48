"""Out-of-tree test modules (kernels/modules/NAME) built against a guest kernel.

A kernel the lab built (harness/kernels/kbuild.py) has its build folder: the module is built against
it on the host, with the compiler that built the kernel (the cross compiler for another arch).

A Debian kernel's modules are built in a Debian root of the kernel's own suite that holds the
compiler that built the kernel (its CONFIG_CC_VERSION_TEXT) and the kernel's headers package
at the image's exact version: made once with mmdebstrap and cached, then `make -C
/usr/src/linux-headers-RELEASE M=...` runs in it by chroot. The .ko is cached by the module's
sources, the kernel release and that build root, so an unchanged module is never rebuilt,
and a .ko changed since its build always is (its digest is recorded: harness/cache.py).
For a kernel of another arch than the host's (arm64 on x86_64) the build root is of the
kernel's arch: its compiler and the headers package's own tools (fixdep, modpost) are that
arch's binaries, run through qemu-user (binfmt_misc): slow, but the very toolchain Debian
built the kernel with, with no cross compiler to match.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from harness import arch as arches, cache, host, paths, progress
from harness.config import DebianKernel, KernelSpec
from harness.errors import HostError, ModuleError, ModuleUnavailable
from harness.kernels.kernel import BootableKernel
from harness.debian import archive
from harness.debian.mirror import Mirror

log = logging.getLogger(__name__)

MODULES = paths.TEST_MODULES
BUILD_ROOT_VERSION = 1
_GCC = re.compile(r'(?:^|\s|")(?:\S+-)?gcc-(\d+)\b')


def sources(name: str) -> Path:
    src = MODULES / name
    if not (src / "Kbuild").exists() and not (src / "Makefile").exists():
        raise ModuleError(f"{src}: no such test module (expected a Kbuild file there)")
    return src


def source_hash(src: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(src.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(src).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def compiler_package(k: BootableKernel) -> str:
    """The Debian compiler package that built the kernel: 'gcc-14' for CONFIG_CC_VERSION_TEXT
    "x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0"."""
    text = k.config_option("CC_VERSION_TEXT")
    m = _GCC.search(text or "")
    if not m:
        raise ModuleUnavailable(f"kernel {k.name} ({k.release}): cannot tell its compiler "
                                f"(CONFIG_CC_VERSION_TEXT: {text or 'absent'})")
    return f"gcc-{m.group(1)}"


# What a module build never reads. The headers package depends on the image package, whose
# modules, initramfs hook and udev's hardware database would otherwise be unpacked and run:
# under qemu-user (an arm64 build root) mkinitramfs and systemd-hwdb alone take minutes.
UNUSED_IN_BUILD_ROOT = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*",
                        "/usr/lib/modules/*/kernel/*", "/boot/*", "/etc/kernel/postinst.d/*",
                        "/usr/lib/udev/hwdb.d/*")


def build_root_recipe(spec: KernelSpec, k: BootableKernel) -> dict:
    if not isinstance(spec.source, DebianKernel):
        raise ModuleUnavailable(f"kernel {k.name} is neither a Debian package kernel nor "
                                "built by the lab: there are no headers to build test modules "
                                "against")
    if k.config_option("MODULES") != "y":
        raise ModuleUnavailable(f"kernel {k.name} ({k.release}) has no module support "
                                "(CONFIG_MODULES is not set)")
    if not k.package_version:
        raise ModuleUnavailable(f"kernel {k.name}: the image package's version is unknown "
                                "(prepare it again with --refresh)")
    r = {"version": BUILD_ROOT_VERSION, "suite": spec.source.suite, "release": k.release,
         "packages": sorted(["make", compiler_package(k),
                             f"linux-headers-{k.release}={k.package_version}"])}
    if (a := arches.get(k.arch)).named_in_keys:  # else: the x86 build roots keep their names
        r["architecture"] = a.debian
    return r


def build_root(spec: KernelSpec, k: BootableKernel, cache_root: Path,
               mirror_for: Callable[[], Mirror]) -> Path:
    """The cached build root for kernel k, made first if needed."""
    r = build_root_recipe(spec, k)
    digest = hashlib.sha256(json.dumps(r, sort_keys=True).encode()).hexdigest()[:16]
    entry = cache.Layout(cache_root).buildroot(digest)
    cache.mark_used(cache_root, entry)  # for ./lab gc --keep
    if (entry / "recipe.json").exists():
        return entry / "root"
    if shutil.which("mmdebstrap") is None:
        raise HostError("mmdebstrap is missing", hint="apt-get install mmdebstrap")
    if os.geteuid() != 0:
        raise ModuleUnavailable("building test modules needs root (mmdebstrap and chroot)")
    mirror = mirror_for()
    log_path = entry.parent / f"{digest}.mmdebstrap.log"
    foreign = []
    if "architecture" in r and not arches.is_native(arch := arches.get(k.arch)):
        host.require(host.foreign_rootfs_tools(arch))
        log.info("%s", host.ensure_binfmt(arch))
        foreign = [f"--architectures={r['architecture']}"]
    with progress.step(f"making the {r['suite']} build root for {k.release} ({digest})"), \
            cache.building(entry) as scratch:
        # trixie-backports' headers need trixie below them, as `apt -t trixie-backports`.
        suite, sources, aptopts = archive.apt_sources(mirror.url, r["suite"])
        cmd = ["mmdebstrap", "--variant=apt", *foreign, f"--include={','.join(r['packages'])}",
               f"--keyring={mirror.keyring}", *[f"--aptopt={o}" for o in aptopts],
               *[f"--dpkgopt=path-exclude={p}" for p in UNUSED_IN_BUILD_ROOT],
               suite, str(scratch / "root"), *sources]
        log.debug("run: %s", " ".join(cmd))
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("w") as out:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            text = log_path.read_text()
            if "Unable to locate package linux-headers" in text or \
                    "has no installation candidate" in text or "not found" in text:
                raise ModuleUnavailable(f"no headers package for {k.release} "
                                        f"{k.package_version} in {r['suite']} on {mirror.url}",
                                        hint=f"log: {log_path}")
            raise ModuleError(f"making the build root failed (mmdebstrap exit "
                              f"{proc.returncode}); last lines:\n    "
                              + "\n    ".join(text.strip().splitlines()[-5:]),
                              hint=f"full log: {log_path}")
        (scratch / "recipe.json").write_text(json.dumps(r, indent=2))
    return entry / "root"


def build(name: str, spec: KernelSpec, k: BootableKernel, cache_root: Path,
          mirror_for: Callable[[], Mirror]) -> Path:
    """kernels/modules/NAME built for kernel k: the path of the cached NAME.ko."""
    src = sources(name)
    if k.build_dir is not None:
        # A kernel the lab built: on the host, against its own build folder.
        if k.config_option("MODULES") != "y":
            raise ModuleUnavailable(f"kernel {k.name} ({k.release}) has no module support "
                                    "(CONFIG_MODULES is not set)")
        symvers = k.build_dir / "Module.symvers"
        if not symvers.exists():
            raise ModuleUnavailable(f"kernel {k.name}: its build folder {k.build_dir} is gone "
                                    "or incomplete (no Module.symvers); build it again")
        key = _key(src, k, f"{k.build_dir} {symvers.stat().st_mtime_ns}")
        work = cache.Layout(cache_root).module_work(name, key)
        return _make_ko(name, src, k, cache_root, key, work,
                        ["make", "-C", str(k.build_dir), *arches.make_vars(arches.get(k.arch)),
                         f"M={work}", "modules"],
                        {**os.environ, "LANG": "C"})
    # A Debian kernel: in its build root, against its headers package.
    root = build_root(spec, k, cache_root, mirror_for)
    key = _key(src, k, str(root))
    work = root / "build" / f"{name}-{key}"
    return _make_ko(name, src, k, cache_root, key, work,
                    # 7.x's objtool reads /proc (its stack limit): a /proc of a private mount
                    # namespace, gone with the build however it ends.
                    ["unshare", "--mount", "--pid", "--fork", f"--mount-proc={root}/proc",
                     "chroot", str(root), "make", "-C", f"/usr/src/linux-headers-{k.release}",
                     f"M=/build/{work.name}", "modules"],
                    {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"})


def _key(src: Path, k: BootableKernel, against: str) -> str:
    """A .ko's cache key: the module's sources, the kernel release, what it built against."""
    return hashlib.sha256(f"{source_hash(src)} {k.release} {against}".encode()).hexdigest()[:16]


def _make_ko(name: str, src: Path, k: BootableKernel, cache_root: Path, key: str, work: Path,
             cmd: list[str], env: dict[str, str]) -> Path:
    """Run `cmd` (make M=work) on a fresh copy of the module's sources in `work`, and keep
    the .ko in the cache (with its digest); the cached one if it is there already and still
    the one built (a changed one is removed and built again: cache.intact). One process
    builds a key at a time: `./lab run -j 2` workers both asking for a new kernel's module
    removed each other's `work` mid-make."""
    entry = cache.Layout(cache_root).module(name, key)
    ko = entry / f"{name}.ko"
    if ko.exists() and cache.intact(entry, [ko.name]):
        return ko
    with cache.exclusive(cache.Layout(cache_root).module_lock(name, key)):
        if ko.exists() and cache.intact(entry, [ko.name]):
            return ko  # the process that held the lock built it
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src, work)
        log_path = cache.Layout(cache_root).module_log(name, key)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log.debug("run: %s", " ".join(cmd))
        try:
            with progress.step(f"building test module {name} for {k.name} ({k.release})"), \
                    log_path.open("w") as out:
                proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
            if proc.returncode != 0:
                raise ModuleError(f"test module {name} does not build for {k.name} "
                                  f"({k.release}): {first_error(log_path.read_text())}",
                                  hint=f"log: {log_path}")
            with cache.building(entry) as scratch:
                shutil.copy2(work / f"{name}.ko", scratch / f"{name}.ko")
                cache.record(scratch, [f"{name}.ko"])
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return ko


def first_error(log_text: str) -> str:
    """The compiler's (or modpost's "ERROR: modpost: ... undefined!") first error line of a
    failed build, else the last line."""
    lines = log_text.strip().splitlines()
    for line in lines:
        if re.search(r"\berror\b", line, re.I) and not line.startswith("make"):
            return line.strip()
    return lines[-1].strip() if lines else "(empty build log)"
