"""A Debian kernel's debug symbols, fetched on demand for gdb.

Debian ships them apart from the image, in linux-image-<release>-dbg (~300 MB for a cloud
kernel, more for generic): only its vmlinux (/usr/lib/debug/boot/vmlinux-<release>) is kept,
once per release, in the cache's debug/ folder. The package is looked up in the image's own
suite, at the image's version, so the symbols are those of the kernel that runs.
"""
from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from harness import cache, progress
from harness.config import DebianKernel
from harness.debian import archive
from harness.debian.mirror import Mirror
from harness.errors import KernelError
from harness.kernels.kernel import BootableKernel


def vmlinux(k: BootableKernel, source: DebianKernel, cache_root: Path,
            mirror_for: Callable[[], Mirror]) -> Path:
    """The vmlinux with debug info of Debian kernel `k` (downloaded and unpacked once)."""
    entry = cache.Layout(cache_root).debug_symbols(k.release)
    found = entry / "vmlinux"
    cache.mark_used(cache_root, entry)  # for ./lab gc --keep
    if found.exists():
        return found
    package = f"linux-image-{k.release}-dbg"
    m = mirror_for()
    arc = archive.Archive(m, source.suite)
    with progress.step(f"looking up {package} in {source.suite}"):
        records = [r for r in arc.packages("main", source.arch, package) if r.name == package]
    if k.package_version:
        records = [r for r in records if r.version == k.package_version]
    if not records:
        raise KernelError(f"no {package}" + (f" {k.package_version}" if k.package_version else "")
                          + f" in {source.suite} on {m.url}: no debug symbols for {k.name}")
    rec = records[0]
    deb = cache.Layout(cache_root).deb(rec.filename)
    if not deb.exists():
        archive.download(arc.url(rec.filename), deb, rec.sha256, rec.size, m.origin)
    inside = f"./usr/lib/debug/boot/vmlinux-{k.release}"
    with progress.step(f"unpacking vmlinux from {deb.name}"), cache.building(entry) as scratch:
        tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
        p = subprocess.run(["tar", "-x", "-C", str(scratch), inside], stdin=tar.stdout,
                           capture_output=True, text=True)
        tar.wait()
        if p.returncode != 0 or tar.returncode != 0:
            raise KernelError(f"{deb.name} has no {inside.lstrip('.')}: {p.stderr.strip()[-300:]}")
        (scratch / inside).rename(scratch / "vmlinux")
        shutil.rmtree(scratch / "usr")
    deb.unlink()  # 300 MB and more: only the vmlinux is worth keeping
    return found
