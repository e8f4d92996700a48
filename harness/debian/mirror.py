"""Which Debian mirror to use: lab.yaml's `mirror`, else the one the host's apt configuration names.

The lab never carries a mirror host name of its own: users behind a local mirror get theirs,
and so does CI. Where apt-get is installed, apt itself says what its sources are (`apt-get
indextargets`), so every syntax and option apt accepts is read as apt reads it; without apt-get
the lab parses both formats by hand: deb822 `*.sources` files and one-line `*.list` files.
"""
from __future__ import annotations

import logging
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from debian.deb822 import Deb822

from harness.config import MirrorSpec
from harness.errors import MirrorError

log = logging.getLogger(__name__)

DEFAULT_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
APT_ROOT = Path("/etc/apt")


@dataclass(frozen=True)
class AptSource:
    """One `deb` entry of the host's apt configuration."""
    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]
    signed_by: Path | None
    origin: str  # "file:line" or "file (stanza N)", for error messages


@dataclass(frozen=True)
class Mirror:
    """A Debian archive to fetch from, and the keyring its Release files are checked against."""
    url: str
    keyring: Path
    origin: str


def _signed_by(value: str | None) -> Path | None:
    # Signed-By may also hold an inline armored key; only a path is usable with gpgv --keyring.
    if value and value.strip().startswith("/") and "\n" not in value.strip():
        return Path(value.strip())
    return None


def parse_deb822(text: str, origin: str) -> list[AptSource]:
    """The `deb` entries of a deb822 .sources file (Enabled: no entries are left out)."""
    out = []
    for n, para in enumerate(Deb822.iter_paragraphs(text.splitlines(keepends=True)), 1):
        if "deb" not in para.get("Types", "").split():
            continue
        if para.get("Enabled", "yes").strip().lower() == "no":
            continue
        for uri in para.get("URIs", "").split():
            out.append(AptSource(uri=uri.rstrip("/"), suites=tuple(para.get("Suites", "").split()),
                                 components=tuple(para.get("Components", "").split()),
                                 signed_by=_signed_by(para.get("Signed-By")),
                                 origin=f"{origin} (stanza {n})"))
    return out


def parse_one_line(text: str, origin: str) -> list[AptSource]:
    """The `deb` lines of a one-line sources.list file."""
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if not words or words[0] != "deb":
            continue
        words = words[1:]
        options: dict[str, str] = {}
        if words and words[0].startswith("["):
            opts = []
            while words:
                w = words.pop(0)
                opts.append(w.strip("[]"))
                if w.endswith("]"):
                    break
            for o in " ".join(opts).split():
                if "=" in o:
                    k, v = o.split("=", 1)
                    options[k] = v
        if len(words) < 2:
            continue
        out.append(AptSource(uri=words[0].rstrip("/"), suites=(words[1],),
                             components=tuple(words[2:]),
                             signed_by=_signed_by(options.get("signed-by")),
                             origin=f"{origin}:{lineno}"))
    return out


def _hand_origin(entry: str) -> str:
    """apt's Sourcesentry ("file:N": a line of a .list, a stanza of a .sources) in the hand
    parser's words, so both name a source the same way."""
    path, _, n = entry.rpartition(":")
    return f"{path} (stanza {n})" if path.endswith(".sources") else entry


def parse_indextargets(text: str, by_hand: list[AptSource]) -> list[AptSource]:
    """The `deb` sources in `apt-get indextargets` output (deb822 records, one per index
    target), one per (file entry, URI, suite). Signed-By is not among apt's fields: it is
    taken from the hand parser's reading of the same entry (`by_hand`)."""
    signed = {s.origin: s.signed_by for s in by_hand}
    found: dict[tuple[str, str, str], list[str]] = {}
    for para in Deb822.iter_paragraphs(text.splitlines(keepends=True)):
        if para.get("Target-Of") != "deb" or para.get("Identifier") != "Packages":
            continue
        key = (_hand_origin(para.get("Sourcesentry", "apt-get indextargets")),
               para.get("Repo-URI", "").rstrip("/"), para.get("Release", ""))
        components = found.setdefault(key, [])
        if para.get("Component", "") not in components:
            components.append(para.get("Component", ""))
    return [AptSource(uri=uri, suites=(suite,), components=tuple(comps),
                      signed_by=signed.get(origin), origin=origin)
            for (origin, uri, suite), comps in found.items() if uri and suite]


def apt_indextargets(apt_get: str, apt_root: Path) -> str | None:
    """`apt-get indextargets` for the Packages indexes of the sources under `apt_root`; None
    if apt-get fails (then the hand parser answers)."""
    cmd = [apt_get, "-o", f"Dir::Etc={apt_root}", "indextargets", "--no-release-info",
           "Identifier: Packages"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        log.debug("%s: %s; reading the apt sources by hand", " ".join(cmd), e)
        return None
    if proc.returncode != 0:
        log.debug("%s: exit %d: %s; reading the apt sources by hand", " ".join(cmd),
                  proc.returncode, proc.stderr.strip())
        return None
    return proc.stdout


def host_sources(apt_root: Path = APT_ROOT, use_apt: bool = True
                 ) -> tuple[list[AptSource], list[Path]]:
    """All `deb` entries of the host's apt configuration, and the files that were read: as
    apt-get reads them where it is installed, else by the lab's own parser."""
    by_hand, files = hand_sources(apt_root)
    apt_get = shutil.which("apt-get") if use_apt else None
    text = apt_indextargets(apt_get, apt_root) if apt_get else None
    if text is None:
        return by_hand, files
    return parse_indextargets(text, by_hand), files


def hand_sources(apt_root: Path = APT_ROOT) -> tuple[list[AptSource], list[Path]]:
    """All `deb` entries of the apt configuration under `apt_root` by the lab's own parser
    (hosts without apt-get), and the files that were read."""
    files: list[Path] = []
    main = apt_root / "sources.list"
    if main.is_file():
        files.append(main)
    d = apt_root / "sources.list.d"
    if d.is_dir():
        files += sorted(p for p in d.iterdir() if p.suffix in (".list", ".sources") and p.is_file())
    sources: list[AptSource] = []
    for f in files:
        try:
            text = f.read_text()
        except OSError as e:
            log.debug("cannot read %s: %s", f, e)
            continue
        sources += parse_deb822(text, str(f)) if f.suffix == ".sources" else parse_one_line(
            text, str(f))
    return sources, files


# Debian's suite names; a plain suite not listed here still counts, after these.
DEBIAN_SUITES = {"stable", "testing", "unstable", "sid", "experimental", "oldstable", "buster",
                 "bullseye", "bookworm", "trixie", "forky", "duke"}


def _score(s: AptSource) -> int:
    """How surely `s` is Debian's main archive: 2 a Debian suite name, 1 another plain suite
    (a local mirror's own name), 0 not an archive we can use (security, third-party layouts
    such as nodistro, suites with a slash, schemes we cannot fetch)."""
    if s.uri.split(":", 1)[0] not in ("http", "https", "file") or "main" not in s.components:
        return 0
    if s.uri.endswith("-security"):
        return 0
    plain = [x for x in s.suites if "-" not in x and "/" not in x and x != "nodistro"]
    if any(x in DEBIAN_SUITES for x in plain):
        return 2
    return 1 if plain else 0


def choose(sources: list[AptSource], files: list[Path]) -> AptSource:
    """The host's Debian main archive among its apt sources."""
    best = max(sources, key=_score, default=None)
    if best is not None and _score(best) > 0:
        return best
    read = ", ".join(map(str, files)) or f"nothing under {APT_ROOT}"
    raise MirrorError(f"no Debian archive found in the host's apt configuration (read: {read})",
                      hint="set mirror.url in lab.yaml to your Debian mirror")


def resolve(spec: MirrorSpec | None, apt_root: Path = APT_ROOT, use_apt: bool = True
            ) -> Mirror:
    """The mirror to use: the configured one, else the host's Debian archive."""
    if spec is not None:
        return Mirror(url=spec.url, keyring=spec.keyring or DEFAULT_KEYRING,
                      origin="lab.yaml mirror.url")
    sources, files = host_sources(apt_root, use_apt)
    s = choose(sources, files)
    keyring = s.signed_by if s.signed_by and s.signed_by.exists() else DEFAULT_KEYRING
    log.debug("mirror %s from %s, keyring %s", s.uri, s.origin, keyring)
    return Mirror(url=s.uri, keyring=keyring, origin=s.origin)
