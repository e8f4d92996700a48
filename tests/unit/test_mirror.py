"""Mirror discovery from the host's apt configuration (both file formats)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.debian import mirror
from harness.config import MirrorSpec
from harness.errors import MirrorError

# Placeholder host names: the lab never carries a real mirror's name.
DEB822 = """\
Types: deb
URIs: http://mirror.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.invalid/debian-security
Suites: bookworm-security
Components: main
"""


def apt_root(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_deb822_sources(tmp_path: Path) -> None:
    root = apt_root(tmp_path, {"sources.list.d/debian.sources": DEB822})
    m = mirror.resolve(None, root)
    assert m.url == "http://mirror.invalid/debian"
    assert m.keyring == Path("/usr/share/keyrings/debian-archive-keyring.gpg")
    assert "debian.sources (stanza 1)" in m.origin


def test_one_line_sources_with_options(tmp_path: Path) -> None:
    root = apt_root(tmp_path, {"sources.list": (
        "# comment\n"
        "deb [arch=amd64 signed-by=/nonexistent.gpg] http://local.invalid/debian/ trixie main contrib\n")})
    m = mirror.resolve(None, root)
    assert m.url == "http://local.invalid/debian"
    # A Signed-By keyring that does not exist falls back to Debian's archive keyring.
    assert m.keyring == mirror.DEFAULT_KEYRING
    assert m.origin.endswith("sources.list:2")


def test_security_and_third_party_sources_are_not_the_archive(tmp_path: Path) -> None:
    root = apt_root(tmp_path, {
        "sources.list.d/nodesource.sources": "Types: deb\nURIs: https://node.invalid/node_20.x\n"
                                             "Suites: nodistro\nComponents: main\n",
        "sources.list.d/security.list": "deb http://mirror.invalid/debian-security "
                                        "bookworm-security main\n",
        "sources.list.d/z.sources": DEB822})
    assert mirror.resolve(None, root).url == "http://mirror.invalid/debian"


def test_disabled_stanza_is_ignored(tmp_path: Path) -> None:
    root = apt_root(tmp_path, {"sources.list.d/a.sources": "Enabled: no\n" + DEB822})
    # Only the first stanza carries Enabled: no; the security one is not an archive.
    with pytest.raises(MirrorError):
        mirror.resolve(None, root)


def test_no_archive_names_the_files_read(tmp_path: Path) -> None:
    root = apt_root(tmp_path, {"sources.list": "deb-src http://x.invalid/debian trixie main\n"})
    with pytest.raises(MirrorError) as e:
        mirror.resolve(None, root)
    assert "sources.list" in str(e.value) and "mirror.url" in str(e.value)


def test_lab_yaml_mirror_wins(tmp_path: Path) -> None:
    m = mirror.resolve(MirrorSpec(url="http://127.0.0.1:9/debian"), tmp_path)
    assert m.url == "http://127.0.0.1:9/debian" and m.origin == "lab.yaml mirror.url"


def test_this_hosts_configuration_has_an_archive() -> None:
    # The machines the lab runs on (ours, CI's, the users') configure a Debian mirror.
    m = mirror.resolve(None)
    assert m.url.startswith(("http://", "https://", "file://"))
