"""Mirror discovery from the host's apt configuration (both file formats)."""
from __future__ import annotations

import shutil
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


@pytest.fixture(params=[True, False], ids=["apt-get", "by-hand"])
def use_apt(request: pytest.FixtureRequest) -> bool:
    """Each discovery test twice: through apt-get indextargets, and through the hand parser
    (hosts without apt-get)."""
    if request.param and shutil.which("apt-get") is None:
        pytest.skip("apt-get is not installed here")
    return request.param


def apt_root(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_deb822_sources(tmp_path: Path, use_apt: bool) -> None:
    root = apt_root(tmp_path, {"sources.list.d/debian.sources": DEB822})
    m = mirror.resolve(None, root, use_apt)
    assert m.url == "http://mirror.invalid/debian"
    assert m.keyring == Path("/usr/share/keyrings/debian-archive-keyring.gpg")
    assert "debian.sources (stanza 1)" in m.origin


def test_one_line_sources_with_options(tmp_path: Path, use_apt: bool) -> None:
    root = apt_root(tmp_path, {"sources.list": (
        "# comment\n"
        "deb [arch=amd64 signed-by=/nonexistent.gpg] http://local.invalid/debian/ trixie main contrib\n")})
    m = mirror.resolve(None, root, use_apt)
    assert m.url == "http://local.invalid/debian"
    # A Signed-By keyring that does not exist falls back to Debian's archive keyring.
    assert m.keyring == mirror.DEFAULT_KEYRING
    assert m.origin.endswith("sources.list:2")


def test_security_and_third_party_sources_are_not_the_archive(tmp_path: Path, use_apt: bool) -> None:
    root = apt_root(tmp_path, {
        "sources.list.d/nodesource.sources": "Types: deb\nURIs: https://node.invalid/node_20.x\n"
                                             "Suites: nodistro\nComponents: main\n",
        "sources.list.d/security.list": "deb http://mirror.invalid/debian-security "
                                        "bookworm-security main\n",
        "sources.list.d/z.sources": DEB822})
    assert mirror.resolve(None, root, use_apt).url == "http://mirror.invalid/debian"


def test_disabled_stanza_is_ignored(tmp_path: Path, use_apt: bool) -> None:
    root = apt_root(tmp_path, {"sources.list.d/a.sources": "Enabled: no\n" + DEB822})
    # Only the first stanza carries Enabled: no; the security one is not an archive.
    with pytest.raises(MirrorError):
        mirror.resolve(None, root, use_apt)


def test_no_archive_names_the_files_read(tmp_path: Path, use_apt: bool) -> None:
    root = apt_root(tmp_path, {"sources.list": "deb-src http://x.invalid/debian trixie main\n"})
    with pytest.raises(MirrorError) as e:
        mirror.resolve(None, root, use_apt)
    assert "sources.list" in str(e.value) and "mirror.url" in str(e.value)


def test_lab_yaml_mirror_wins(tmp_path: Path) -> None:
    m = mirror.resolve(MirrorSpec(url="http://127.0.0.1:9/debian"), tmp_path)
    assert m.url == "http://127.0.0.1:9/debian" and m.origin == "lab.yaml mirror.url"


def test_this_hosts_configuration_has_an_archive() -> None:
    # The machines the lab runs on (ours, CI's, the users') configure a Debian mirror.
    m = mirror.resolve(None)
    assert m.url.startswith(("http://", "https://", "file://"))


INDEXTARGETS = """\
MetaKey: main/binary-amd64/Packages
Identifier: Packages
Target-Of: deb
Repo-URI: http://example.invalid/debian/
Release: trixie
Component: main
Architecture: amd64
Sourcesentry: /etc/apt/sources.list.d/debian.sources:2

MetaKey: main/binary-i386/Packages
Identifier: Packages
Target-Of: deb
Repo-URI: http://example.invalid/debian/
Release: trixie
Component: main
Architecture: i386
Sourcesentry: /etc/apt/sources.list.d/debian.sources:2

MetaKey: contrib/binary-amd64/Packages
Identifier: Packages
Target-Of: deb
Repo-URI: http://example.invalid/debian/
Release: trixie
Component: contrib
Sourcesentry: /etc/apt/sources.list.d/debian.sources:2

MetaKey: main/source/Sources
Identifier: Sources
Target-Of: deb-src
Repo-URI: http://example.invalid/debian/
Release: trixie
Component: main
Sourcesentry: /etc/apt/sources.list:3
"""


def test_indextargets_records_become_one_source_per_entry_with_the_hand_parsers_keyring() -> None:
    hand = [mirror.AptSource("http://example.invalid/debian", ("trixie",), ("main",),
                             Path("/k.gpg"), "/etc/apt/sources.list.d/debian.sources (stanza 2)")]
    [s] = mirror.parse_indextargets(INDEXTARGETS, hand)
    assert s == mirror.AptSource("http://example.invalid/debian", ("trixie",), ("main", "contrib"),
                                 Path("/k.gpg"), "/etc/apt/sources.list.d/debian.sources (stanza 2)")


def test_a_failing_apt_get_leaves_the_answer_to_the_hand_parser(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "apt-get"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'E: broken' >&2\nexit 100\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    root = apt_root(tmp_path / "etc", {"sources.list.d/debian.sources": DEB822})
    assert mirror.resolve(None, root).url == "http://mirror.invalid/debian"
