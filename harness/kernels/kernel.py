"""Kernels: from a lab.yaml kernel source to files QEMU can boot.

A prepared kernel is a cache directory holding vmlinuz, the lab's initramfs, an ext4 image of
its modules (mounted read-only at /lib/modules in the guest), kernel.json describing it and
the digests of those files (cache.MANIFEST): an entry whose files changed since is made again,
not booted.
A Debian kernel is resolved once; later runs read kernel.json and touch no network until
`--refresh`.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import struct
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import arch as arches, cache, progress
from harness.debian import archive, kernel_packages, mirror
from harness.kernels import initramfs
from harness.config import DebianKernel, KernelSpec, MirrorSpec, PathKernel
from harness.errors import KernelError

log = logging.getLogger(__name__)
LAYOUT = 1  # bump when the prepared layout changes, so stale entries are rebuilt


@dataclass(frozen=True)
class BootableKernel:
    """Everything needed to boot a kernel in the lab, and what to say about it in reports."""
    name: str
    release: str
    vmlinuz: Path
    initramfs: Path
    modules_image: Path | None
    config: Path | None
    description: str
    cmdline: str = ""
    package_version: str | None = None  # the Debian image package's version, if any
    # For a kernel the lab built (harness/kernels/kbuild.py): the make O= folder (test modules build
    # against it), the tree's git commit, and the series applied.
    build_dir: Path | None = None
    commit: str | None = None
    series: tuple[str, ...] = ()
    source_dir: Path | None = None  # the tree make built: decode_stacktrace.sh and file paths
    arch: str = arches.DEFAULT  # a harness.arch name: which QEMU, console and rootfs it boots with

    def config_option(self, option: str) -> str | None:
        """The value of CONFIG_<option> in the kernel's .config ('y', 'm', ...), None if unset."""
        if self.config is None or not self.config.exists():
            return None
        m = re.search(rf"^CONFIG_{option}=(.*)$", self.config.read_text(), re.M)
        return m.group(1) if m else None


_RELEASE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")


def release_version(release: str) -> tuple[int, int, int] | None:
    """(6, 12, 107) for '6.12.107+deb13-cloud-amd64'; for a test whose rule only exists from
    a release on (an ABI merged in v6.10), never to excuse a failure."""
    m = _RELEASE.match(release)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


def bzimage_release(image: Path) -> str:
    """The kernel release string from a bzImage's setup header (boot protocol >= 2.00)."""
    with image.open("rb") as f:
        head = f.read(0x400)
        if len(head) < 0x210 or head[0x202:0x206] != b"HdrS":
            raise KernelError(f"{image}: not a bzImage (no 'HdrS' boot header)")
        ptr, = struct.unpack_from("<H", head, 0x20E)
        f.seek(ptr + 0x200)
        text = f.read(256).split(b"\0", 1)[0].decode("ascii", "replace")
    if not text:
        raise KernelError(f"{image}: the boot header has no kernel version string")
    return text.split()[0]


def _run(cmd: list[str], what: str) -> None:
    log.debug("run: %s", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise KernelError(f"{what} failed ({' '.join(cmd[:2])}...): "
                          f"{(proc.stderr or proc.stdout).strip()[-400:]}")


def _modules_image(modules_root: Path, out: Path) -> None:
    """An ext4 image whose top level is modules_root's content (<release>/...)."""
    total = sum(p.stat().st_size for p in modules_root.rglob("*") if p.is_file())
    size_mb = int(total * 1.3 / 2**20) + 16
    _run(["mkfs.ext4", "-q", "-F", "-L", "ringlab-mods", "-d", str(modules_root), str(out),
          f"{size_mb}M"], "making the modules image")


def finish(scratch: Path, name: str, release: str, vmlinuz: Path, modules_base: Path | None,
           config: Path | None, description: str, cmdline: str, arch: str = arches.DEFAULT,
           busybox: Path | None = None, system_map: Path | None = None) -> dict:
    """Build initramfs and modules image in `scratch` and return kernel.json's content.

    `modules_base` is a directory holding lib/modules/<release> (depmod's -b base); `busybox`
    a static busybox of `arch` for the initramfs (default: the host's).
    """
    shutil.copy2(vmlinuz, scratch / "vmlinuz")
    if config:
        shutil.copy2(config, scratch / "config")
    if system_map:
        shutil.copy2(system_map, scratch / "System.map")
    mods = modules_base / "lib" / "modules" / release if modules_base else None
    if mods is not None and mods.is_dir():
        _run(["depmod", "-b", str(modules_base), release], "depmod")
        initramfs.build(mods, scratch / "initramfs.gz", busybox)
        _modules_image(mods.parent, scratch / "modules.ext4")
    else:
        initramfs.build(None, scratch / "initramfs.gz", busybox)
    return {"layout": LAYOUT, "initramfs_recipe": initramfs.recipe_hash(), "name": name, "release": release, "description": description,
            "has_modules": mods is not None and mods.is_dir(), "has_config": config is not None,
            "cmdline": cmdline, "arch": arch}


def entry_files(entry: Path, meta: dict) -> list[str]:
    """The files of a prepared kernel the lab boots or reads, recorded in its manifest."""
    files = ["kernel.json", "vmlinuz", "initramfs.gz"]
    files += ["modules.ext4"] if meta.get("has_modules") else []
    files += ["config"] if meta.get("has_config") else []
    return files + (["System.map"] if (entry / "System.map").is_file() else [])


def write_entry(scratch: Path, meta: dict) -> None:
    """Write kernel.json into a kernel entry being made, and record its files' digests: a
    later use finds a changed file before booting it (harness/cache.py)."""
    (scratch / "kernel.json").write_text(json.dumps(meta, indent=2))
    cache.record(scratch, entry_files(scratch, meta))


def load_prepared(entry: Path) -> BootableKernel | None:
    """The prepared kernel in `entry`; None if there is none, it was made by another version
    of the lab, or a file of it changed since it was made (then it is removed: the caller
    prepares it again)."""
    try:
        meta = json.loads((entry / "kernel.json").read_text())
    except (OSError, ValueError):
        return None
    config = entry / "config"
    ext4_builtin = meta.get("has_config") and config.is_file() and \
        re.search(r"^CONFIG_EXT4_FS=y$", config.read_text(), re.M) is not None
    if meta.get("layout") != LAYOUT or not initramfs.is_current(meta.get("initramfs_recipe"),
                                                                 bool(ext4_builtin)):
        return None  # made by another version of the lab: prepare again
    if not cache.intact(entry, entry_files(entry, meta)):
        return None
    return BootableKernel(
        name=meta["name"], release=meta["release"], vmlinuz=entry / "vmlinuz",
        initramfs=entry / "initramfs.gz",
        modules_image=entry / "modules.ext4" if meta["has_modules"] else None,
        config=entry / "config" if meta["has_config"] else None,
        description=meta["description"], cmdline=meta.get("cmdline", ""),
        package_version=(meta.get("package") or {}).get("version"),
        build_dir=Path(meta["build"]["out"]) if meta.get("build") else None,
        commit=(meta.get("build") or {}).get("commit"),
        series=tuple((meta.get("build") or {}).get("series", ())),
        source_dir=Path(meta["build"]["source"]) if meta.get("build") else None,
        arch=meta.get("arch", arches.DEFAULT))


def _prepare_debian(spec: KernelSpec, src: DebianKernel, root: Path,
                    mirror_spec: MirrorSpec | None, refresh: bool) -> BootableKernel:
    entry = cache.Layout(root).kernel("-".join(filter(None, ("debian", src.suite, src.flavour,
                                                             src.arch, src.version))))
    if not refresh and (k := load_prepared(entry)):
        log.debug("kernel %s: cached in %s", spec.name, entry)
        return with_name(k, spec)
    m = mirror.resolve(mirror_spec)
    arc = archive.Archive(m, src.suite)
    what = f"linux-image-{src.flavour}" + (f" {src.version}" if src.version else "")
    with progress.step(f"resolving {what} in {src.suite}"):
        packages = kernel_packages.index(arc.packages("main", src.arch, "linux-"))
    try:
        resolved = kernel_packages.resolve(packages, src.flavour, src.version,
                                           where=f"{src.suite} ({src.arch})")
    except KernelError as e:
        raise KernelError(f"kernels.{spec.name}: {e.message}") from None
    rec = resolved.image
    got = arches.from_debian(rec.architecture)
    if got is None or got.name != spec.arch:
        raise KernelError(f"kernels.{spec.name}: {rec.name} is for Debian architecture "
                          f"{rec.architecture!r}, not {src.arch} (arch {spec.arch})")
    debs = [_fetch(arc, r, root) for r in resolved.closure]
    # The initramfs runs before the guest has a libc: a foreign arch's needs its own busybox.
    busybox = None if arches.is_native(got) else _foreign_busybox(arc, src.arch, root)
    with progress.step(f"preparing {rec.name} {rec.version} ({len(debs)} packages)"), \
            cache.building(entry) as scratch:
        unpacked = scratch / "unpacked"
        for deb in debs:  # unpacked together, as dpkg would install them
            _run(["dpkg-deb", "-x", str(deb), str(unpacked)], f"unpacking {deb.name}")
        files = debian_layout(unpacked, f"{rec.name} {rec.version}")
        meta = finish(scratch, spec.name, files.release, files.image, files.modules_base,
                      files.config, f"Debian {src.suite} {rec.name} {rec.version}", spec.cmdline,
                      arch=got.name, busybox=busybox, system_map=files.system_map)
        meta["package"] = asdict(rec)
        meta["packages"] = [f"{r.name}={r.version}" for r in resolved.closure]
        shutil.rmtree(unpacked)
        write_entry(scratch, meta)
    k = load_prepared(entry)
    assert k is not None
    return with_name(k, spec)


@dataclass(frozen=True)
class KernelFiles:
    """Where an unpacked Debian kernel keeps its files."""
    release: str
    image: Path
    config: Path | None
    system_map: Path | None
    modules_base: Path | None  # holds lib/modules/<release> (depmod's -b)


def debian_layout(unpacked: Path, what: str) -> KernelFiles:
    """The image, config, System.map and modules of unpacked Debian kernel packages, in either
    layout: boot/vmlinuz-<release> beside boot/config-<release> (up to 6.12), or
    usr/lib/modules/<release>/{vmlinuz,config,System.map} (7.x, since the packages split).
    The 7.x files are moved out of the modules folder, which becomes the guest's /lib/modules."""
    boot = sorted((unpacked / "boot").glob("vmlinuz-*"))
    moddirs = [d for d in (unpacked / "usr/lib/modules", unpacked / "lib/modules") if d.is_dir()]
    inside = sorted(p for d in moddirs for p in d.glob("*/vmlinuz"))
    if boot:
        release = boot[0].name.removeprefix("vmlinuz-")
        image = boot[0]
        config: Path | None = unpacked / "boot" / f"config-{release}"
        system_map: Path | None = unpacked / "boot" / f"System.map-{release}"
    elif inside:
        release = inside[0].parent.name
        kept = unpacked / "kernel-files"
        kept.mkdir()
        for name in ("vmlinuz", "config", "System.map"):
            if (inside[0].parent / name).exists():
                shutil.move(inside[0].parent / name, kept / name)
        image, config, system_map = kept / "vmlinuz", kept / "config", kept / "System.map"
    else:
        raise KernelError(f"{what}: no kernel image in its packages (neither "
                          "boot/vmlinuz-* nor usr/lib/modules/*/vmlinuz)")
    base = next((d.parent.parent for d in moddirs if (d / release).is_dir()), None)
    return KernelFiles(release=release, image=image,
                       config=config if config and config.is_file() else None,
                       system_map=system_map if system_map and system_map.is_file() else None,
                       modules_base=base)


def _fetch(arc: archive.Archive, rec: archive.PackageRecord, root: Path) -> Path:
    """The .deb of `rec` in the cache, downloaded and checked against the index if needed."""
    deb = cache.Layout(root).deb(rec.filename)
    if not (deb.exists() and hashlib.sha256(deb.read_bytes()).hexdigest() == rec.sha256):
        archive.download(arc.url(rec.filename), deb, rec.sha256, rec.size, arc.mirror.origin)
    return deb


def foreign_busybox(m: mirror.Mirror, suite: str, debian_arch: str, root: Path) -> Path:
    """A static busybox of `debian_arch` from `suite` (the initramfs of a kernel the lab
    cross-built runs before there is a libc of its arch)."""
    return _foreign_busybox(archive.Archive(m, suite), debian_arch, root)


def _foreign_busybox(arc: archive.Archive, debian_arch: str, root: Path) -> Path:
    """A static busybox of Debian architecture `debian_arch`, from that suite's busybox-static
    (verified like the kernel), unpacked once into the cache."""
    with progress.step(f"resolving busybox-static for {debian_arch} in {arc.suite}"):
        rec = next((r for r in arc.packages("main", debian_arch, "busybox-static")
                    if r.name == "busybox-static"), None)
    if rec is None:
        raise KernelError(f"no busybox-static for {debian_arch} in {arc.suite}: the initramfs "
                          "of a kernel of that arch needs one")
    out = cache.Layout(root).foreign_busybox(rec.version, debian_arch)
    if not out.exists():
        deb = _fetch(arc, rec, root)
        with cache.building(out.parent) as scratch:
            _run(["dpkg-deb", "-x", str(deb), str(scratch / "x")], f"unpacking {deb.name}")
            found = [p for p in (scratch / "x/bin/busybox", scratch / "x/usr/bin/busybox")
                     if p.is_file()]
            if not found:
                raise KernelError(f"{deb.name} has no bin/busybox")
            shutil.move(found[0], scratch / "busybox")
            shutil.rmtree(scratch / "x")
    return out


def image_release(image: Path, a: arches.Arch) -> str:
    """The release of a kernel image: from a bzImage's setup header, or from the banner
    ("Linux version 7.2.13 ...") an uncompressed arm64 Image carries in its rodata."""
    if a.release_in_header:
        return bzimage_release(image)
    data = image.read_bytes()
    m = re.search(rb"Linux version (\S+) \(", data)
    if not m:
        raise KernelError(f"{image}: no 'Linux version' banner in the image")
    return m.group(1).decode("ascii", "replace")


def modules_of(name: str, src: PathKernel, release: str) -> Path | None:
    """The lib/modules/<release> folder of an image kernel: the one place a modules folder is
    interpreted. Given (lab.yaml `path.modules`, `--modules`): that folder or its <release>.
    Not given, for an image (not a make O= folder): the image's own folder when it holds
    modules.order (Debian 7.x keeps vmlinuz in lib/modules/<release>), else
    lib/modules/<release> beside the image (what `make modules_install
    INSTALL_MOD_PATH=` beside it leaves), else none."""
    if src.modules is not None:
        mods = src.modules if src.modules.name == release else src.modules / release
        if not mods.is_dir():
            raise KernelError(f"kernels.{name}.path.modules: no directory for release "
                              f"{release} at {src.modules}")
        return mods
    if src.build_dir is not None:
        return None
    here = src.image.parent
    if (here / "modules.order").is_file() or (here / "modules.dep").is_file():
        return here
    beside = here / "lib" / "modules" / release
    return beside if beside.is_dir() else None


def _prepare_path(spec: KernelSpec, src: PathKernel, root: Path,
                  busybox_for: Callable[[arches.Arch], Path]) -> BootableKernel:
    """A kernel image on disk (with modules), or a make O= folder used as it is built."""
    if not src.image.is_file():
        raise KernelError(f"kernels.{spec.name}.path.image: {src.image} does not exist")
    a = arches.get(spec.arch)
    release = (src.build_dir / "include/config/kernel.release").read_text().strip() \
        if src.build_dir and (src.build_dir / "include/config/kernel.release").is_file() \
        else image_release(src.image, a)
    mods = modules_of(spec.name, src, release)
    stamp: list[str | int] = [str(src.image), src.image.stat().st_mtime_ns,
                              src.image.stat().st_size]
    if mods is not None:
        stamp += [str(mods), (mods / "modules.order").stat().st_mtime_ns
                  if (mods / "modules.order").exists() else mods.stat().st_mtime_ns]
    if src.build_dir is not None and (src.build_dir / "modules.order").exists():
        stamp += [(src.build_dir / "modules.order").stat().st_mtime_ns]
    key = hashlib.sha256(json.dumps(stamp).encode()).hexdigest()[:16]
    entry = cache.Layout(root).kernel(f"path-{key}")
    if (k := load_prepared(entry)):
        return with_name(k, spec)
    busybox = None if arches.is_native(a) else busybox_for(a)
    config = src.build_dir / ".config" if src.build_dir else _build_config(src.image)
    with progress.step(f"preparing {src.build_dir or src.image}"), \
            cache.building(entry) as scratch:
        base = None
        if mods is not None:
            base = scratch / "staging"
            shutil.copytree(mods, base / "lib" / "modules" / release, symlinks=False,
                            ignore=shutil.ignore_patterns("build", "source", "vmlinuz",
                                                          "System.map", "config"))
        elif src.build_dir is not None and config is not None and \
                re.search(r"^CONFIG_MODULES=y$", config.read_text(), re.M):
            base = scratch / "staging"
            _run(["make", "-s", "-C", str(src.build_dir), *arches.make_vars(a),
                  "modules_install", f"INSTALL_MOD_PATH={base}", "INSTALL_MOD_STRIP=1",
                  "DEPMOD=true"], f"make modules_install in {src.build_dir}")
        meta = finish(scratch, spec.name, release, src.image, base, config,
                      f"{src.build_dir or src.image} ({release})", spec.cmdline, arch=a.name,
                      busybox=busybox)
        if src.build_dir is not None:
            # Test modules build against it and splats decode with its vmlinux and tree.
            source = (src.build_dir / "source").resolve() \
                if (src.build_dir / "source").exists() else src.build_dir
            meta["build"] = {"tree": str(source), "source": str(source),
                             "out": str(src.build_dir), "series": []}
        if base is not None:
            shutil.rmtree(base)
        write_entry(scratch, meta)
    k = load_prepared(entry)
    assert k is not None
    return with_name(k, spec)


def _build_config(image: Path) -> Path | None:
    """The .config beside a kernel image, at the top of its build tree (O/arch/x86/boot/), or
    Debian 7.x's lib/modules/<release>/config beside its vmlinuz."""
    candidates = [image.parent / ".config", image.parent / "config"]
    if len(image.parents) > 3:
        candidates.append(image.parents[3] / ".config")
    return next((c for c in candidates if c.is_file()), None)


def recheck(k: BootableKernel) -> bool:
    """After a failed boot: whether the kernel's cache entry changed in a way its files' sizes
    and mtimes hide (every SHA256 computed). A changed entry is removed, to be prepared again:
    the failure was the cache's, not the kernel's."""
    entry = k.vmlinuz.parent
    try:
        meta = json.loads((entry / "kernel.json").read_text())
    except (OSError, ValueError):
        meta = {}  # the manifest still names every file (kernel.json among them)
    return not cache.intact(entry, entry_files(entry, meta), deep=True)


def with_name(k: BootableKernel, spec: KernelSpec) -> BootableKernel:
    # One cache entry can serve several lab.yaml names; the name and cmdline are the caller's.
    return BootableKernel(**{**asdict(k), "name": spec.name, "cmdline": spec.cmdline})


def prepare(spec: KernelSpec, cache_root: Path, mirror_spec: MirrorSpec | None,
            refresh: bool = False, busybox_suite: str = "trixie") -> BootableKernel:
    """Fetch (if needed) and prepare the kernel `spec` for booting (not `build` kernels:
    harness/kernels/kbuild.py builds those)."""
    if isinstance(spec.source, DebianKernel):
        return _prepare_debian(spec, spec.source, cache_root, mirror_spec, refresh)
    if isinstance(spec.source, PathKernel):
        return _prepare_path(spec, spec.source, cache_root, lambda a: foreign_busybox(
            mirror.resolve(mirror_spec), busybox_suite, a.debian, cache_root))
    raise KernelError(f"kernel {spec.name} is built by the lab, not prepared (harness/kernels/kbuild.py)")


def cache_usage(cache_root: Path, subs: tuple[str, ...] = ("kernels", "debs")) -> int:
    """Bytes used by the kernel and .deb caches (for `lab doctor`)."""
    total = 0
    for sub in subs:
        for dirpath, _, files in os.walk(cache.Layout(cache_root).folder(sub)):
            total += sum((Path(dirpath) / f).stat().st_size for f in files)
    return total
