"""Kernel source trees: find one (a directory, or a Debian linux-source package fetched through
the host's mirror and unpacked into the cache), tell whether it changed, and make throw-away
copies to patch.

A copy is a hard-link farm of the tree (cheap: no file data is copied). Patching replaces a
file rather than writing into it (git apply writes a new file), so the user's tree is never
touched. A copy lives at a stable path per tree and series, so make's dependency files stay
valid and a rebuild is incremental.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from debian.debian_support import Version

from harness import arch as arches, cache, progress
from harness.debian import archive
from harness.config import DebianSource
from harness.errors import BuildError
from harness.debian.mirror import Mirror

log = logging.getLogger(__name__)


def check(tree: Path, key: str) -> None:
    """Raise a BuildError naming `key` unless `tree` is an x86 kernel source tree."""
    if not tree.is_dir():
        raise BuildError(f"{key}: {tree} does not exist or is not a directory")
    makefile = tree / "Makefile"
    if not (makefile.is_file() and (tree / "Kconfig").is_file() and (tree / "arch/x86").is_dir()
            and re.search(r"^VERSION = \d+", makefile.read_text(errors="replace"), re.M)):
        raise BuildError(f"{key}: {tree} is not a kernel source tree (no top-level Makefile "
                         "with VERSION, Kconfig and arch/x86)")


def version(tree: Path) -> str:
    """'6.12.107' from the tree's Makefile."""
    text = (tree / "Makefile").read_text(errors="replace")
    parts = [re.search(rf"^{v} = (\d*)", text, re.M) for v in ("VERSION", "PATCHLEVEL",
                                                                "SUBLEVEL")]
    return ".".join(m.group(1) for m in parts if m and m.group(1))


def is_git(tree: Path) -> bool:
    return (tree / ".git").exists()


def git(tree: Path, *args: str, check: bool = True) -> str:
    p = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise BuildError(f"git {' '.join(args)} in {tree} failed: "
                         f"{(p.stderr or p.stdout).strip()[:400]}")
    return p.stdout.strip()


def fingerprint(tree: Path) -> str:
    """What the tree's files are now: for git, HEAD plus any uncommitted change to tracked
    files; otherwise every file's path, size and mtime."""
    h = hashlib.sha256()
    if is_git(tree):
        h.update(git(tree, "rev-parse", "HEAD").encode())
        h.update(git(tree, "diff", "HEAD", "--no-ext-diff", "--binary").encode())
        return "git-" + h.hexdigest()[:16]
    for dirpath, dirnames, files in os.walk(tree):
        dirnames.sort()
        for f in sorted(files):
            st = os.lstat(os.path.join(dirpath, f))
            h.update(f"{dirpath}/{f} {st.st_size} {st.st_mtime_ns}\n".encode())
    return "files-" + h.hexdigest()[:16]


def debian_tree(src: DebianSource, cache_root: Path, mirror_for: Callable[[], Mirror]) -> Path:
    """The unpacked tarball of a Debian linux-source package (fetched once, then cached)."""
    root = cache.Layout(cache_root).trees()
    if src.version:
        found = sorted(root.glob(f"{src.package}_{src.version}/linux-source-*"))
        if found:
            cache.mark_used(cache_root, found[0])  # for ./lab gc --keep
            return found[0]
    m = mirror_for()
    arc = archive.Archive(m, src.suite)
    with progress.step(f"looking up {src.package} in {src.suite}"):
        records = [r for r in arc.packages("main", arches.get(arches.DEFAULT).debian, src.package) if r.name == src.package]
    if src.version and records and not any(r.version == src.version for r in records):
        there = ", ".join(sorted({r.version for r in records}, key=Version))
        raise BuildError(f"no {src.package} {src.version} in {src.suite} on {m.url} (it has "
                         f"{there}): change or drop debian_source.version in lab.yaml")
    records = [r for r in records if not src.version or r.version == src.version]
    if not records:
        raise BuildError(f"no {src.package}" + (f" {src.version}" if src.version else "")
                         + f" in {src.suite} on {m.url}")
    rec = max(records, key=lambda r: Version(r.version))
    entry = cache.Layout(cache_root).tree(src.package, rec.version)
    cache.mark_used(cache_root, entry)  # for ./lab gc --keep
    if (found := sorted(entry.glob("linux-source-*"))):
        return found[0]
    deb = cache.Layout(cache_root).deb(rec.filename)
    if not deb.exists():
        archive.download(arc.url(rec.filename), deb, rec.sha256, rec.size, m.origin)
    with progress.step(f"unpacking {src.package} {rec.version}"), cache.building(entry) as scratch:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(scratch / "deb")], check=True)
        tarball = next((scratch / "deb/usr/src").glob(f"{src.package}.tar.*"), None)
        if tarball is None:
            raise BuildError(f"{deb.name} has no usr/src/{src.package}.tar.*")
        # tar(1) unpacks the 150 MB .tar.xz in half the time Python's tarfile takes.
        p = subprocess.run(["tar", "-xf", str(tarball), "-C", str(scratch), "--no-same-owner"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise BuildError(f"unpacking {tarball.name} failed: {p.stderr.strip()[-300:]}")
        shutil.rmtree(scratch / "deb")
    found = sorted(entry.glob("linux-source-*"))
    if not found:
        raise BuildError(f"{deb.name}: the tarball holds no linux-source-* folder")
    return found[0]


def link_farm(tree: Path, dest: Path, previous: Path | None = None) -> None:
    """Make `dest` a hard-link copy of `tree` (without .git). Files that the caller then
    patches become new files; see keep_mtimes() for keeping rebuilds incremental."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    entries = [str(p) for p in tree.iterdir() if p.name != ".git"]
    if not entries:
        return
    p = subprocess.run(["cp", "-al", "--", *entries, str(dest)], capture_output=True, text=True)
    if p.returncode == 0:
        return
    # Hard links cannot cross filesystems (a tree on another disk than the cache): copy.
    log.warning("cannot hard-link %s into %s (%s); copying it instead (slower, more disk)",
                tree, dest, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "?")
    shutil.rmtree(dest)
    dest.mkdir(parents=True)
    p = subprocess.run(["cp", "-a", "--reflink=auto", "--", *entries, str(dest)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise BuildError(f"cannot copy {tree} to {dest}: {p.stderr.strip()[-300:]}")


def keep_mtimes(paths: list[str], new: Path, old: Path) -> int:
    """For each patched path whose content is the same as in the `old` copy, give the new
    file the old one's mtime: re-applying an unchanged series then rebuilds nothing. Returns
    how many were kept."""
    kept = 0
    for rel in paths:
        a, b = new / rel, old / rel
        try:
            if a.is_file() and b.is_file() and a.stat().st_ino != b.stat().st_ino and \
                    a.read_bytes() == b.read_bytes():
                st = b.stat()
                os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
                kept += 1
        except OSError:
            continue
    return kept
