"""harness/debian/archive.py against a small mirror served here over HTTP: the Packages index
by hash (as apt fetches it) with the plain name as the fallback, and a Release for the wrong
suite refused. The signature check is replaced by identity: test_host_and_archive.py covers it."""
from __future__ import annotations

import functools
import hashlib
import http.server
import lzma
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.debian import archive
from harness.debian.mirror import Mirror
from harness.errors import MirrorError

STANZA = ("Package: linux-image-{v}\nVersion: {v}\nFilename: pool/l/{v}.deb\nSize: 1\n"
          "SHA256: " + "0" * 64 + "\n\n")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """(folder, URL) of an HTTP server on loopback serving the folder."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield tmp_path, f"http://127.0.0.1:{server.server_address[1]}/debian"
    finally:
        server.shutdown()
        server.server_close()


def publish(root: Path, suite: str, version: str, *, by_hash: bool, plain_version: str | None,
            hashed: bool = True, release_suite: str | None = None,
            codename: str | None = None) -> None:
    """A suite whose Release names the index of `version`; the plain-name Packages.xz holds
    `plain_version` (another one: a mirror in the middle of an update) or is absent."""
    dists = root / "debian" / "dists" / suite
    index = lzma.compress(STANZA.format(v=version).encode())
    sha = hashlib.sha256(index).hexdigest()
    folder = dists / "main" / "binary-amd64"
    folder.mkdir(parents=True)
    if hashed:
        (folder / "by-hash" / "SHA256").mkdir(parents=True)
        (folder / "by-hash" / "SHA256" / sha).write_bytes(index)
    if plain_version is not None:
        (folder / "Packages.xz").write_bytes(lzma.compress(STANZA.format(v=plain_version).encode()))
    release = (f"Suite: {release_suite or suite}\nCodename: {codename or suite}\n"
               + ("Acquire-By-Hash: yes\n" if by_hash else "")
               + f"SHA256:\n {sha} {len(index)} main/binary-amd64/Packages.xz\n")
    (dists / "InRelease").write_text(release)


@pytest.fixture(autouse=True)
def unsigned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive, "verify_release", lambda signed, keyring, url: signed)


def versions(url: str, suite: str) -> list[str]:
    arc = archive.Archive(Mirror(url, Path("/unused.gpg"), "test"), suite)
    return [r.version for r in arc.packages("main", "amd64", "linux-image-")]


def test_the_index_is_fetched_by_hash_while_the_plain_name_is_already_newer(served) -> None:
    root, url = served
    publish(root, "trixie", "1.0", by_hash=True, plain_version="2.0")
    assert versions(url, "trixie") == ["1.0"]


def test_a_missing_by_hash_file_falls_back_to_the_plain_name(served) -> None:
    root, url = served
    publish(root, "trixie", "1.0", by_hash=True, plain_version="1.0", hashed=False)
    assert versions(url, "trixie") == ["1.0"]


def test_without_acquire_by_hash_the_plain_name_is_used_and_checked(served) -> None:
    root, url = served
    publish(root, "trixie", "1.0", by_hash=False, plain_version="2.0")
    with pytest.raises(MirrorError, match="SHA256 mismatch"):
        versions(url, "trixie")


def test_a_release_of_another_suite_is_an_error_naming_both(served) -> None:
    root, url = served
    publish(root, "trixie", "1.0", by_hash=True, plain_version=None, release_suite="oldstable",
            codename="bookworm")
    with pytest.raises(MirrorError) as e:
        versions(url, "trixie")
    assert str(e.value) == (f"mirror {url}: dists/trixie/InRelease is for suite 'oldstable' "
                            "(codename 'bookworm'), not 'trixie'")


def test_the_suite_may_be_named_by_its_codename_or_its_suite(served) -> None:
    root, url = served
    publish(root, "trixie", "1.0", by_hash=True, plain_version=None, release_suite="stable",
            codename="trixie")
    assert versions(url, "trixie") == ["1.0"]
