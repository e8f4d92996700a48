"""The lab's on-disk cache: where it is, and how entries are written so none is half-written.

Layout under the cache root (default $XDG_CACHE_HOME/ringlab, else ~/.cache/ringlab):
  debs/         downloaded .deb files, by file name
  kernels/KEY/  an unpacked kernel ready to boot (vmlinuz, initramfs, modules image)
  rootfs/HASH/  a root filesystem image and its pinned SSH host key
  ssh/          the lab's client key (0600)
  hosts/        per-host verdicts (does KVM work here?)
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def cache_root(configured: Path | None = None) -> Path:
    """The cache root: RINGLAB_CACHE, then lab.yaml's cache_dir, then the XDG cache directory."""
    if os.environ.get("RINGLAB_CACHE"):
        return Path(os.environ["RINGLAB_CACHE"])
    if configured:
        return configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "ringlab"


@contextlib.contextmanager
def building(final: Path) -> Iterator[Path]:
    """Yield a scratch directory that becomes `final` only if the block completes.

    The scratch directory sits beside `final` (same filesystem, so the rename is atomic) and is
    removed on any failure, Ctrl-C included: a cache entry either exists whole or not at all.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        yield scratch
        if final.exists():
            shutil.rmtree(final)
        scratch.rename(final)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write a file through a temporary name and rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
