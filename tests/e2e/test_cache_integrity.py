"""A cache fault is not a kernel fault: a cached vmlinuz with 4 KiB flipped is found before it is
booted (its size and mtime against the entry's manifest, then its SHA256), said once, made again
from its Debian packages, and the guest boots. Runs on a private copy of the cache's entries, so
the real cache is only read."""
from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from harness import cache, config
from harness.resources import Lab

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def link_tree(src: Path, dest: Path) -> None:
    """`src`'s files in `dest` by hard link (a symlink across filesystems): read, never written."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and not f.name.startswith("."):
            try:
                os.link(f, dest / f.name)
            except OSError:
                (dest / f.name).symlink_to(f)


def flip_4k(path: Path, offset: int = 1 << 20) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        data = f.read(4096)
        f.seek(offset)
        f.write(bytes(b ^ 0xFF for b in data))


def test_a_flipped_cached_vmlinuz_is_remade_and_the_guest_boots(
        lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, no_stray_qemu: None) -> None:
    k = lab.kernel()
    image = lab.rootfs(k.arch)
    real, private = lab.cache_root, tmp_path / "cache"
    entry = private / k.vmlinuz.parent.relative_to(real)
    shutil.copytree(k.vmlinuz.parent, entry)  # a copy: this one is flipped
    link_tree(image.image.parent, private / image.image.parent.relative_to(real))
    link_tree(real / "debs", private / "debs")  # the packages it is made again from
    for folder in ("ssh", "hosts"):  # the client key names the rootfs; the KVM verdict
        if (real / folder).is_dir():
            shutil.copytree(real / folder, private / folder)
    flip_4k(entry / "vmlinuz")

    monkeypatch.setenv("RINGLAB_CACHE", str(private))
    monkeypatch.setenv("RINGLAB_NO_SNAPSHOT", "1")  # a cold boot, and no snapshot saved
    mine = Lab(config.load(REPO / "lab.yaml"))
    assert mine.cache_root == private
    with caplog.at_level(logging.INFO), mine.boot(None, tmp_path / "console.log") as g:
        assert g.run("uname -r").stdout.strip() == mine.kernel().release
        assert not g.record.restored

    said = [r.getMessage() for r in caplog.records if "changed: remade" in r.getMessage()]
    assert said == [f"cached {entry}/vmlinuz changed: remade (its SHA256 is not the one "
                    "recorded when it was made)"]
    assert all(r.levelno == logging.WARNING for r in caplog.records
               if "changed: remade" in r.getMessage())
    assert not any("stalled" in r.getMessage() for r in caplog.records)
    assert cache.verify(entry, deep=True) == []
    made = json.loads((entry / "kernel.json").read_text())
    was = json.loads((k.vmlinuz.parent / "kernel.json").read_text())
    if made.get("package") == was.get("package"):  # the mirror still has the same kernel
        assert (entry / "vmlinuz").read_bytes() == k.vmlinuz.read_bytes()
