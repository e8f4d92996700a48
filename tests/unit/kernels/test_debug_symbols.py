"""harness/kernels/debug_symbols.py: a Debian kernel's vmlinux for gdb, from its -dbg package.
A release already in the cache costs no mirror look-up; the package is taken at the image's
own version; a missing package or a package without the vmlinux is an error naming it, and a
failed unpack leaves no cache entry. The archive, the download and dpkg-deb/tar are faked."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness import cache
from harness.config import DebianKernel
from harness.errors import KernelError
from harness.kernels import debug_symbols
from harness.kernels.kernel import BootableKernel

RELEASE = "6.12.1+deb13-cloud-amd64"
PACKAGE = f"linux-image-{RELEASE}-dbg"
SOURCE = DebianKernel("trixie", "cloud-amd64")


def _kernel(version: str | None = "6.12.1-1") -> BootableKernel:
    return BootableKernel(name="trixie-cloud", release=RELEASE, vmlinuz=Path("/v"),
                          initramfs=Path("/i"), modules_image=None, config=None,
                          description="d", package_version=version)


def _rec(version: str, name: str = PACKAGE) -> SimpleNamespace:
    return SimpleNamespace(name=name, version=version, filename=f"pool/{name}_{version}.deb",
                           sha256="0" * 64, size=3)


class _World:
    """The mirror, the archive and the tools, as the module calls them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, records: list[SimpleNamespace],
                 tar_status: int = 0) -> None:
        self.records = records
        self.tar_status = tar_status
        self.mirrors = 0
        self.downloads: list[str] = []
        world = self

        class Archive:
            def __init__(self, m: Any, suite: str) -> None:
                assert suite == SOURCE.suite

            def packages(self, section: str, arch: str, package: str) -> list[SimpleNamespace]:
                assert (section, arch) == ("main", SOURCE.arch)
                return list(world.records)

            def url(self, filename: str) -> str:
                return "http://mirror/" + filename

        def download(url: str, dest: Path, sha256: str, size: int, origin: str) -> None:
            world.downloads.append(url)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(b"deb")

        def popen(argv: list[str], **kw: Any) -> SimpleNamespace:
            assert argv[:2] == ["dpkg-deb", "--fsys-tarfile"]
            return SimpleNamespace(stdout=None, returncode=0, wait=lambda: 0)

        def run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
            scratch, inside = Path(argv[argv.index("-C") + 1]), argv[-1]
            if world.tar_status == 0:
                (scratch / inside).parent.mkdir(parents=True)
                (scratch / inside).write_text("ELF with DWARF")
            return subprocess.CompletedProcess(argv, world.tar_status, "",
                                               "tar: Not found in archive")
        monkeypatch.setattr(debug_symbols.archive, "Archive", Archive)
        monkeypatch.setattr(debug_symbols.archive, "download", download)
        monkeypatch.setattr(debug_symbols.subprocess, "Popen", popen)
        monkeypatch.setattr(debug_symbols.subprocess, "run", run)

    def mirror(self) -> SimpleNamespace:
        self.mirrors += 1
        return SimpleNamespace(url="http://mirror", origin="Debian")


def test_the_image_versions_package_is_fetched_unpacked_and_the_deb_dropped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = _World(monkeypatch, [_rec("6.12.0-9"), _rec("6.12.1-1"), _rec("6.12.1-1", "other")])
    got = debug_symbols.vmlinux(_kernel(), SOURCE, tmp_path, w.mirror)
    assert got == cache.Layout(tmp_path).debug_symbols(RELEASE) / "vmlinux"
    assert got.read_text() == "ELF with DWARF"
    assert w.downloads == [f"http://mirror/pool/{PACKAGE}_6.12.1-1.deb"]
    assert not cache.Layout(tmp_path).deb(f"{PACKAGE}_6.12.1-1.deb").exists()
    assert not (got.parent / "usr").exists()  # only the vmlinux is kept


def test_a_release_in_the_cache_asks_no_mirror(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    w = _World(monkeypatch, [_rec("6.12.1-1")])
    first = debug_symbols.vmlinux(_kernel(), SOURCE, tmp_path, w.mirror)
    assert debug_symbols.vmlinux(_kernel(), SOURCE, tmp_path, w.mirror) == first
    assert w.mirrors == 1 and len(w.downloads) == 1


def test_no_package_at_the_images_version_is_an_error_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = _World(monkeypatch, [_rec("6.12.0-9")])
    with pytest.raises(KernelError) as e:
        debug_symbols.vmlinux(_kernel("6.12.1-1"), SOURCE, tmp_path, w.mirror)
    assert e.value.message == (f"no {PACKAGE} 6.12.1-1 in trixie on http://mirror: "
                               "no debug symbols for trixie-cloud")


def test_an_image_of_no_known_version_takes_the_package_there_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = _World(monkeypatch, [_rec("6.12.0-9")])
    debug_symbols.vmlinux(_kernel(None), SOURCE, tmp_path, w.mirror)
    assert w.downloads == [f"http://mirror/pool/{PACKAGE}_6.12.0-9.deb"]


def test_no_package_at_all_says_so_without_a_version(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    w = _World(monkeypatch, [])
    with pytest.raises(KernelError, match="^" + re.escape(f"no {PACKAGE} in trixie on ")):
        debug_symbols.vmlinux(_kernel(None), SOURCE, tmp_path, w.mirror)


def test_a_package_without_the_vmlinux_is_an_error_and_leaves_no_entry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = _World(monkeypatch, [_rec("6.12.1-1")], tar_status=2)
    with pytest.raises(KernelError) as e:
        debug_symbols.vmlinux(_kernel(), SOURCE, tmp_path, w.mirror)
    assert e.value.message == (f"{PACKAGE}_6.12.1-1.deb has no /usr/lib/debug/boot/vmlinux-"
                               f"{RELEASE}: tar: Not found in archive")
    assert not cache.Layout(tmp_path).debug_symbols(RELEASE).exists()
