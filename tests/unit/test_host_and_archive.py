"""Host checks and archive downloads: the error a user sees names the fix."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from harness import host
from harness.debian import archive
from harness.kernels import kernel
from harness.config import DebianKernel, KernelSpec, MirrorSpec
from harness.errors import HostError, MirrorError


def test_missing_qemu_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(host, "_path", lambda: str(tmp_path))
    with pytest.raises(HostError) as e:
        host.require(host.BOOT_TOOLS)
    msg = str(e.value)
    assert "\n" not in msg
    assert "qemu-system-x86_64" in msg and "apt-get install qemu-system-x86 qemu-utils" in msg


def test_missing_mmdebstrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(host, "_path", lambda: str(tmp_path))
    with pytest.raises(HostError, match="apt-get install e2fsprogs mmdebstrap"):
        host.require(host.ROOTFS_TOOLS)


def test_download_verifies_sha256(tmp_path: Path) -> None:
    src = tmp_path / "pkg.deb"
    src.write_bytes(b"payload" * 1000)
    good = hashlib.sha256(src.read_bytes()).hexdigest()
    dest = archive.download(src.as_uri(), tmp_path / "out" / "pkg.deb", good, None, "test")
    assert dest.read_bytes() == src.read_bytes()
    with pytest.raises(MirrorError, match="SHA256 mismatch"):
        archive.download(src.as_uri(), tmp_path / "out2" / "pkg.deb", "0" * 64, None, "test")
    # Nothing half-written is left behind.
    assert list((tmp_path / "out2").iterdir()) == []


def test_unsigned_release_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MirrorError, match="signature not valid"):
        archive.verify_release(b"Origin: Debian\n", Path("/usr/share/keyrings/"
                               "debian-archive-keyring.gpg"), "http://x.invalid/InRelease")


def test_unreachable_mirror(tmp_path: Path) -> None:
    spec = KernelSpec("k", DebianKernel("trixie", "cloud-amd64"))
    with pytest.raises(MirrorError) as e:
        kernel.prepare(spec, tmp_path, MirrorSpec(url="http://127.0.0.1:9/debian"))
    assert "mirror unreachable: http://127.0.0.1:9/debian/dists/trixie/InRelease" in str(e.value)
    assert "lab.yaml mirror.url" in str(e.value)
    assert not (tmp_path / "kernels").exists() or not any((tmp_path / "kernels").iterdir())
