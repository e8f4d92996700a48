"""Fetching from a Debian archive: signed Release, Packages index, checksum-verified .debs.

Trust chain, as apt's: InRelease is verified with gpgv against the mirror's keyring; the
Packages index is checked against the SHA256 in the verified Release; each .deb against the
SHA256 in the index. Nothing unverified is ever unpacked.

Also as apt does: the Release must be the suite asked for (its Suite or Codename), and when it
says `Acquire-By-Hash: yes` the index is fetched by its hash (`by-hash/SHA256/<sha256>`), which a
mirror in the middle of an update still serves for the Release it has, so a new Packages file
beside an old Release gives no false checksum mismatch. Only a missing by-hash file falls back
to the plain name.
"""
from __future__ import annotations

import hashlib
import logging
import lzma
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from debian.deb822 import Deb822, Release

from harness import progress
from harness.errors import MirrorError, MirrorFileMissing
from harness.debian.mirror import Mirror

log = logging.getLogger(__name__)
TIMEOUT_S = 30
CHUNK = 1 << 16


@dataclass(frozen=True)
class PackageRecord:
    """One stanza of a Packages index, with the fields the lab uses."""
    name: str
    version: str
    filename: str
    size: int
    sha256: str
    depends: str
    architecture: str = ""  # Debian's: amd64, arm64, all
    pre_depends: str = ""


def _open(url: str, origin: str):  # -> http.client.HTTPResponse or file-like
    log.debug("GET %s", url)
    try:
        return urllib.request.urlopen(url, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as e:
        kind = MirrorFileMissing if e.code == 404 else MirrorError
        raise kind(f"{url}: HTTP {e.code} {e.reason} (mirror from {origin})") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise MirrorError(f"mirror unreachable: {url}: {reason} (mirror from {origin})",
                          hint="check the mirror in lab.yaml or /etc/apt/sources.list*") from None


def fetch_bytes(url: str, origin: str) -> bytes:
    with _open(url, origin) as r:
        return r.read()


def download(url: str, dest: Path, sha256: str, size: int | None, origin: str) -> Path:
    """Download `url` to `dest` with a progress bar; keep it only if its SHA256 matches."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with tempfile.NamedTemporaryFile(dir=dest.parent, prefix=f".{dest.name}.", delete=False) as tmp:
        tmp_path = Path(tmp.name)
        try:
            with _open(url, origin) as r, progress.transfer(f"downloading {dest.name}",
                                                             size) as advance:
                while chunk := r.read(CHUNK):
                    tmp.write(chunk)
                    digest.update(chunk)
                    advance(len(chunk))
        except BaseException:
            tmp_path.unlink(missing_ok=True)
            raise
    if digest.hexdigest() != sha256:
        tmp_path.unlink(missing_ok=True)
        raise MirrorError(f"{url}: SHA256 mismatch: got {digest.hexdigest()}, the index says "
                          f"{sha256}; the file was discarded")
    tmp_path.rename(dest)
    return dest


def verify_release(signed: bytes, keyring: Path, url: str) -> bytes:
    """The content of a clearsigned InRelease, if gpgv accepts its signature with `keyring`."""
    if not keyring.exists():
        raise MirrorError(f"keyring {keyring} does not exist; cannot verify {url}",
                          hint="apt-get install debian-archive-keyring, or set mirror.keyring")
    proc = subprocess.run(["gpgv", "--quiet", "--keyring", str(keyring), "--output", "-", "-"],
                          input=signed, capture_output=True)
    if proc.returncode != 0:
        why = proc.stderr.decode(errors="replace").strip().splitlines()
        raise MirrorError(f"{url}: signature not valid with keyring {keyring}: "
                          f"{why[-1] if why else 'gpgv failed'}")
    return proc.stdout


class Archive:
    """One suite of a Debian mirror."""

    def __init__(self, mirror: Mirror, suite: str) -> None:
        self.mirror = mirror
        self.suite = suite
        self._release: Release | None = None

    def url(self, path: str) -> str:
        return f"{self.mirror.url}/{path}"

    def release(self) -> Release:
        """The suite's verified Release."""
        if self._release is None:
            url = self.url(f"dists/{self.suite}/InRelease")
            try:
                signed = fetch_bytes(url, self.mirror.origin)
            except MirrorFileMissing:
                raise MirrorError(f"the mirror {self.mirror.url} has no suite {self.suite!r} "
                                  f"(mirror from {self.mirror.origin})") from None
            release = Release(verify_release(signed, self.mirror.keyring, url))
            check_suite(release, self.suite, self.mirror.url)
            self._release = release
        return self._release

    def by_hash(self) -> bool:
        return self.release().get("Acquire-By-Hash", "no").strip().lower() == "yes"

    def _index_entry(self, path: str) -> tuple[str, int]:
        for entry in self.release().get("SHA256", []):
            if entry["name"] == path:
                return entry["sha256"], int(entry["size"])
        raise MirrorError(f"{self.url(f'dists/{self.suite}/Release')}: no SHA256 entry for {path}")

    def packages(self, component: str, arch: str, names_prefix: str) -> Iterator[PackageRecord]:
        """Stanzas of main/binary-ARCH/Packages whose name starts with `names_prefix`.

        The index is ~60 MB unpacked; it is streamed, and only matching stanzas are parsed.
        """
        path = f"{component}/binary-{arch}/Packages.xz"
        sha, size = self._index_entry(path)
        with tempfile.TemporaryDirectory(prefix="ringlab-index-") as tmp:
            local = self._fetch_index(path, sha, size, Path(tmp) / "Packages.xz")
            with lzma.open(local, "rt", encoding="utf-8", errors="replace") as f:
                stanza: list[str] = []
                keep = False
                for line in f:
                    if line == "\n":
                        if keep:
                            yield _record(Deb822(stanza))
                        stanza, keep = [], False
                        continue
                    if not stanza:
                        keep = line.startswith(f"Package: {names_prefix}")
                    if keep:
                        stanza.append(line)
                if keep and stanza:
                    yield _record(Deb822(stanza))


    def _fetch_index(self, path: str, sha: str, size: int, dest: Path) -> Path:
        """An index file of the Release, by hash where the Release offers it."""
        plain = self.url(f"dists/{self.suite}/{path}")
        if self.by_hash():
            folder = path.rpartition("/")[0]
            hashed = self.url(f"dists/{self.suite}/{folder}/by-hash/SHA256/{sha}")
            try:
                return download(hashed, dest, sha, size, self.mirror.origin)
            except MirrorFileMissing:
                log.debug("%s: not on the mirror; fetching %s", hashed, plain)
        return download(plain, dest, sha, size, self.mirror.origin)


# Suites that are installed on top of another, and which apt takes packages from only when
# asked (their Release says NotAutomatic): backports over their stable, experimental over sid.
def overlay_base(suite: str) -> str | None:
    """The suite `suite` is an overlay of (trixie for trixie-backports), None for a full one."""
    if suite.endswith("-backports"):
        return suite.removesuffix("-backports")
    if suite.endswith("-backports-sloppy"):
        return suite.removesuffix("-backports-sloppy")
    return "sid" if suite in ("experimental", "rc-buggy") else None


def apt_sources(url: str, suite: str) -> tuple[str, list[str], list[str]]:
    """What mmdebstrap needs to install `suite`'s packages as `apt -t SUITE` would: the suite
    to bootstrap, its sources lines, and apt options (an overlay is the default release)."""
    # sid's and experimental's Release carry a Valid-Until of days; a mirror that is a frozen
    # snapshot serves one that has expired. The signature is still checked; the lab's own
    # index reader (above) does not judge freshness either.
    fresh = ['Acquire::Check-Valid-Until "false"']
    base = overlay_base(suite)
    if base is None:
        return suite, [url], fresh
    return base, [f"deb {url} {base} main", f"deb {url} {suite} main"], \
        [f'APT::Default-Release "{suite}"', *fresh]


def check_suite(release: Release, suite: str, mirror_url: str) -> None:
    """A Release for another suite than the one asked for (a mirror serving bookworm under
    trixie's name) is an error: its packages are not the ones the lab.yaml names."""
    got_suite, codename = release.get("Suite", ""), release.get("Codename", "")
    if suite not in (got_suite, codename):
        raise MirrorError(f"mirror {mirror_url}: dists/{suite}/InRelease is for suite "
                          f"{got_suite!r} (codename {codename!r}), not {suite!r}")


def parse_packages(text: str) -> list[PackageRecord]:
    """The stanzas of a Packages text (test data, a local index)."""
    return [_record(d) for d in Deb822.iter_paragraphs(text) if "Package" in d]


def _record(d: Deb822) -> PackageRecord:
    return PackageRecord(name=d["Package"], version=d["Version"], filename=d["Filename"],
                         size=int(d["Size"]), sha256=d["SHA256"], depends=d.get("Depends", ""),
                         architecture=d.get("Architecture", ""),
                         pre_depends=d.get("Pre-Depends", ""))
