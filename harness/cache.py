"""The lab's on-disk cache: where it is, what is where (Layout), and how entries are written so
none is half-written.

Layout under the cache root (default $XDG_CACHE_HOME/ringlab, else ~/.cache/ringlab); every
path below is built by one method of Layout, and nowhere else:
  debs/         downloaded .deb files, by file name; busybox-static_VERSION_ARCH/busybox, the
                static busybox of a foreign arch's initramfs
  kernels/KEY/  an unpacked kernel ready to boot (vmlinuz, initramfs, modules image)
  rootfs/HASH/  a root filesystem image and its pinned SSH host key
  modules/NAME-KEY/  a test module built for one kernel (NAME.ko; NAME-KEY.build.log beside it,
                .work-NAME-KEY/ while it builds against a kernel the lab built)
  snapshots/KEY/  guests saved once per machine profile, restored instead of booted
  guests/booted.json  the guest `./lab boot` keeps up, for `./lab ssh`
  ssh/          the lab's client key (0600) and the known_hosts `./lab ssh` pins
  hosts/        per-host verdicts (does KVM work here?)
  builds/ buildroots/ trees/ bisect/ mutate/ nightly/   kernel build folders, module build
                roots, unpacked source trees, bisect worktrees, mutate trees, the worktrees of
                the branches a nightly fetched (see KINDS)
  bench/linux/  `./lab bench`'s hard-link copy of a source tree
  selftests/KEY/  the kernel's selftests built from a tree (bundle/, manifest.json)
  debug/RELEASE/vmlinux  a Debian kernel's debug symbols, from linux-image-RELEASE-dbg
  rescued-reports/TIME-RUN/  a run's reports, when its report folder could not take them
  usage/KIND/NAME.{used,lock}   per entry of KINDS: the last run that used it, and the lock a
                running lab holds shared on it (./lab gc takes it exclusively)
  runs.log      one line per run that used an entry: "RUN-ID START-TIME"

The stamps and locks sit beside the entries, not in them: a bisect worktree is a git checkout
(a file in it would be an untracked change), and a tree's files are what make builds.

An entry the lab boots or loads (a kernel, the rootfs, a test module, a snapshot, a build's
outputs) holds MANIFEST, the size, mtime and SHA256 of its files when it was made: a file
changed since (a flipped block, a truncated copy) is found before it is used, and the entry
made again, rather than booted and blamed on the kernel (record(), verify(), intact()).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.errors import ConfigError, LabError

log = logging.getLogger(__name__)
# The kinds of entries ./lab gc may remove, in the order their sizes are counted (a file
# hard-linked into several entries counts once, for the first: trees before their link copies).
KINDS = {"trees": "unpacked trees", "kernels": "kernels", "buildroots": "module build roots",
         "builds": "build folders", "bisect": "bisect worktrees", "mutate": "mutate trees",
         "nightly": "nightly branch worktrees", "selftests": "built selftests",
         "debug": "debug symbols"}
RUN_ENV = "RINGLAB_RUN"


def cache_root(configured: Path | None = None) -> Path:
    """The cache root: RINGLAB_CACHE, then lab.yaml's cache_dir, then the XDG cache directory."""
    if os.environ.get("RINGLAB_CACHE"):
        return Path(os.environ["RINGLAB_CACHE"])
    if configured:
        return configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "ringlab"


@dataclass(frozen=True)
class Layout:
    """Every path under one cache root, a method per kind of entry: a folder's name is spelled
    here once, so the module docstring's layout is the whole of it. Callers keep their keys
    (digests, names); the layout only says where an entry with that key lives."""
    root: Path

    def folder(self, kind: str) -> Path:
        """The folder of one kind of entry (a key of KINDS, or debs/kernels for sizes)."""
        return self.root / kind

    def deb(self, filename: str) -> Path:
        """A downloaded .deb, by the file name of its archive path."""
        return self.root / "debs" / Path(filename).name

    def foreign_busybox(self, version: str, debian_arch: str) -> Path:
        """The static busybox of `debian_arch`, unpacked from busybox-static `version`."""
        return self.root / "debs" / f"busybox-static_{version}_{debian_arch}" / "busybox"

    def kernels(self) -> Path:
        """The prepared kernels' folder (debian-*, build-*, path-*)."""
        return self.root / "kernels"

    def kernel(self, key: str) -> Path:
        return self.kernels() / key

    def debug_symbols(self, release: str) -> Path:
        """A Debian kernel's vmlinux with debug info, from its -dbg package (gdb)."""
        return self.root / "debug" / release

    def rootfs(self, digest: str) -> Path:
        return self.root / "rootfs" / digest

    def module(self, name: str, key: str) -> Path:
        """A test module's entry (NAME.ko inside)."""
        return self.root / "modules" / f"{name}-{key}"

    def module_log(self, name: str, key: str) -> Path:
        return self.root / "modules" / f"{name}-{key}.build.log"

    def module_lock(self, name: str, key: str) -> Path:
        """Held by the one process building a module for `key` (harness/kernels/modules.py)."""
        return self.root / "modules" / f".{name}-{key}.lock"

    def module_work(self, name: str, key: str) -> Path:
        """Where a module is built against a kernel the lab built (its M= folder)."""
        return self.root / "modules" / f".work-{name}-{key}"

    def snapshots(self) -> Path:
        return self.root / "snapshots"

    def booted_guest(self) -> Path:
        """The state file of the guest `./lab boot` keeps up."""
        return self.root / "guests" / "booted.json"

    def client_key(self) -> Path:
        return self.root / "ssh" / "id_ecdsa"

    def known_hosts(self) -> Path:
        return self.root / "ssh" / "known_hosts"

    def kvm_verdict(self, host: str) -> Path:
        return self.root / "hosts" / f"{host}-kvm.json"

    def build(self, digest: str) -> Path:
        return self.root / "builds" / digest

    def buildroot(self, digest: str) -> Path:
        return self.root / "buildroots" / digest

    def trees(self) -> Path:
        """The unpacked source trees' folder (PACKAGE_VERSION/linux-source-*)."""
        return self.root / "trees"

    def tree(self, package: str, version: str) -> Path:
        return self.trees() / f"{package}_{version}"

    def selftests(self, digest: str) -> Path:
        """A kernel tree's selftests built for the guest (harness/selftests/build.py)."""
        return self.root / "selftests" / digest

    def bisect(self, digest: str) -> Path:
        return self.root / "bisect" / digest

    def mutate(self, digest: str) -> Path:
        return self.root / "mutate" / digest

    def nightly(self, digest: str) -> Path:
        return self.root / "nightly" / digest

    def bench_tree(self) -> Path:
        return self.root / "bench" / "linux"

    def rescued_reports(self, name: str) -> Path:
        return self.root / "rescued-reports" / name

    def usage(self, kind: str, name: str, suffix: str) -> Path:
        """The `used` stamp or `lock` of the entry `kind`/`name`."""
        return self.root / "usage" / kind / f"{name}.{suffix}"

    def runs_log(self) -> Path:
        return self.root / "runs.log"


@contextlib.contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Held by one process of this host at a time (others wait): a flock on `lock`, made
    with its folder if missing, released however the block ends (a killed holder's too)."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


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


# --- what an entry holds: its files' digests, recorded when it is made -----------------------

MANIFEST = "ringlab-files.json"  # in the entry's folder, beside the files it describes
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class FileRecord:
    """One file of an entry as it was made: size and mtime make the check of every use a
    stat; the SHA256 settles it when those differ (a touch, a copy) or a failed boot asks."""
    size: int
    mtime_ns: int
    sha256: str


@dataclass(frozen=True)
class Changed:
    """A file of an entry that is not the one its manifest recorded, and how it differs."""
    path: str  # relative to the entry
    why: str


def _describe(path: Path) -> FileRecord:
    with path.open("rb") as f:
        st = os.fstat(f.fileno())
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    return FileRecord(st.st_size, st.st_mtime_ns, digest)


def _write_manifest(entry: Path, files: dict[str, FileRecord]) -> None:
    data = {"version": MANIFEST_VERSION,
            "files": {name: asdict(r) for name, r in sorted(files.items())}}
    write_atomic(entry / MANIFEST, json.dumps(data, indent=1).encode())


def record(entry: Path, files: Iterable[str]) -> dict[str, FileRecord]:
    """Write `entry`/MANIFEST: the digests of `files` (paths relative to the entry) as they
    are now. Called where the entry is made, before it is renamed into place."""
    found = {name: _describe(entry / name) for name in sorted(set(files))}
    _write_manifest(entry, found)
    return found


def recorded(entry: Path) -> dict[str, FileRecord] | None:
    """The manifest of `entry`; None if it has none (made before manifests). A manifest that
    cannot be read is a LabError: the entry cannot be vouched for (intact() says changed)."""
    try:
        data = json.loads((entry / MANIFEST).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise LabError(f"{entry / MANIFEST}: unreadable ({e})") from None
    try:
        if data["version"] != MANIFEST_VERSION:
            raise LabError(f"{entry / MANIFEST}: version {data['version']}, "
                           f"not {MANIFEST_VERSION}")
        return {name: FileRecord(**r) for name, r in data["files"].items()}
    except (KeyError, TypeError, AttributeError) as e:
        raise LabError(f"{entry / MANIFEST}: not a manifest ({e!r})") from None


def verify(entry: Path, deep: bool = False) -> list[Changed]:
    """The files of `entry` that differ from its manifest ([] without one): missing, of
    another size, or of another SHA256. A file's digest is computed only when its size or
    mtime differ from the record, or when `deep` (after a failed boot: a change that kept
    the mtime). A file whose content matches under a new mtime has its record follow."""
    files = recorded(entry)
    if files is None:
        return []
    changed: list[Changed] = []
    moved: dict[str, FileRecord] = {}
    for name, rec in files.items():
        try:
            st = (entry / name).stat()
        except FileNotFoundError:
            changed.append(Changed(name, "missing"))
            continue
        if st.st_size == rec.size and st.st_mtime_ns == rec.mtime_ns and not deep:
            continue
        if st.st_size != rec.size:
            changed.append(Changed(name, f"{st.st_size} bytes, recorded {rec.size}"))
            continue
        now = _describe(entry / name)
        if now.sha256 != rec.sha256:
            changed.append(Changed(name, "its SHA256 is not the one recorded when it was made"))
        elif now.mtime_ns != rec.mtime_ns:
            moved[name] = now
    if moved and not changed:
        try:
            _write_manifest(entry, {**files, **moved})
        except OSError as e:  # a read-only cache: the digest is computed again next time
            log.debug("%s: cannot update its manifest: %s", entry, e)
    return changed


def changes(entry: Path, files: Iterable[str], deep: bool = False) -> list[Changed]:
    """verify() for one use of `entry`, said to the user: what changed is logged once, at
    WARNING ("cached ENTRY/FILE changed: remade"; the caller makes it again). An entry made
    before manifests is trusted, and those of `files` it has recorded now (DEBUG)."""
    try:
        found = verify(entry, deep)
    except LabError as e:
        found = [Changed(MANIFEST, e.message)]
    if not found and entry.is_dir() and not (entry / MANIFEST).exists():
        names = [n for n in sorted(set(files)) if (entry / n).is_file()]
        if not names:
            return []
        log.debug("cache entry %s has no manifest (made before manifests): trusted, its "
                  "files recorded now: %s", entry, ", ".join(names))
        try:
            record(entry, names)
        except OSError as e:
            log.debug("%s: cannot record its manifest: %s", entry, e)
    if found:
        why = found[0].why if len(found) == 1 else \
            "; ".join(f"{c.path}: {c.why}" for c in found)
        log.warning("cached %s/%s changed: remade (%s)", entry,
                    ", ".join(c.path for c in found), why)
    return found


def intact(entry: Path, files: Iterable[str], deep: bool = False) -> bool:
    """Whether `entry` may be used as it is (changes() finds nothing); one that may not is
    removed, so the caller's lookup misses and the entry is made again from its source."""
    if not changes(entry, files, deep):
        return True
    discard(entry)
    return False


def discard(entry: Path) -> None:
    """Remove an entry, renamed away first (a .NAME, which no lookup and no gc sees): a
    process looking for it meanwhile finds nothing rather than half of it."""
    gone = entry.with_name(f".gone-{entry.name}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        entry.rename(gone)
    except OSError:
        return
    shutil.rmtree(gone, ignore_errors=True)


# --- what the lab uses, and ./lab gc ---------------------------------------------------------

def new_run_id() -> str:
    """An id for one ./lab command (its subprocesses inherit it through RINGLAB_RUN)."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def entry_of(root: Path, path: Path) -> tuple[str, str] | None:
    """(kind, name) of the cache entry holding `path`, None if it is in none."""
    try:
        parts = path.resolve().relative_to(root.resolve()).parts
    except ValueError:
        return None
    if len(parts) < 2 or parts[0] not in KINDS or parts[1].startswith("."):
        return None
    return parts[0], parts[1]


def _sidecar(root: Path, kind: str, name: str, suffix: str) -> Path:
    return Layout(root).usage(kind, name, suffix)


class Usage:
    """The entries one lab session uses: each is stamped with the run's id (what ./lab gc
    --keep counts) and held under a shared lock until close() or the process ends, so a gc
    running meanwhile skips it. Never fails the lab: a stamp it cannot write is logged."""

    def __init__(self, root: Path, run: str | None = None) -> None:
        self.root = root
        self.run = run or os.environ.get(RUN_ENV) or new_run_id()
        self._held: dict[tuple[str, str], int] = {}
        self._logged = False

    def use(self, path: Path | None) -> None:
        where = entry_of(self.root, path) if path is not None else None
        if where is None:
            return
        try:
            if where not in self._held:
                lock = _sidecar(self.root, *where, "lock")
                lock.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
                fcntl.flock(fd, fcntl.LOCK_SH)  # waits while a gc removes it
                self._held[where] = fd
            write_atomic(_sidecar(self.root, *where, "used"), f"{self.run}\n".encode())
            if not self._logged:
                with Layout(self.root).runs_log().open("a") as f:
                    f.write(f"{self.run} {time.time():.0f}\n")
                self._logged = True
        except OSError as e:
            log.warning("cannot record the use of cache entry %s/%s: %s", *where, e)

    def close(self) -> None:
        for fd in self._held.values():
            os.close(fd)
        self._held.clear()


@dataclass(frozen=True)
class Entry:
    """A removable cache entry: its kind, folder, size on disk and last use (a time)."""
    kind: str
    path: Path
    size: int
    last_used: float


def _disk_size(path: Path, seen: set[tuple[int, int]]) -> int:
    """Bytes on disk under `path`, each inode counted once across calls sharing `seen`."""
    total = 0
    for dirpath, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def entries(root: Path) -> list[Entry]:
    """Every entry of KINDS in the cache (a scratch folder being built, .NAME, is none)."""
    out: list[Entry] = []
    seen: set[tuple[int, int]] = set()
    for kind in KINDS:
        folder = Layout(root).folder(kind)
        if not folder.is_dir():
            continue
        for p in sorted(folder.iterdir()):
            if p.name.startswith(".") or not p.is_dir() or p.is_symlink():
                continue
            used = _sidecar(root, kind, p.name, "used")
            last = used.stat().st_mtime if used.exists() else p.stat().st_mtime
            out.append(Entry(kind, p, _disk_size(p, seen), last))
    return out


def runs(root: Path) -> list[tuple[str, float]]:
    """The runs that used the cache, oldest first: (id, start time), each id once."""
    starts: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Layout(root).runs_log().read_text().splitlines():
            run, _, when = line.partition(" ")
            with contextlib.suppress(ValueError):
                starts.setdefault(run, float(when))
    return sorted(starts.items(), key=lambda r: r[1])


def to_remove(found: list[Entry], run_starts: list[float], keep: int | None,
              max_size: int | None) -> list[Entry]:
    """Which entries gc removes, in order: those no run of the last `keep` used (last use
    before the oldest of those runs started; with fewer runs on record, none), then the
    least recently used until the rest fits in `max_size` bytes."""
    doomed: list[Entry] = []
    if keep is not None:
        starts = sorted(run_starts)
        if keep == 0:
            doomed = list(found)
        elif len(starts) >= keep:
            since = starts[-keep]
            doomed = [e for e in found if e.last_used < since]
    if max_size is not None:
        rest = sorted((e for e in found if e not in doomed), key=lambda e: e.last_used)
        total = sum(e.size for e in rest)
        for e in rest:
            if total <= max_size:
                break
            doomed.append(e)
            total -= e.size
    return doomed


@dataclass
class Collected:
    """What a gc did (or, dry, would do): per entry removed or skipped (and why)."""
    dry_run: bool
    removed: list[Entry] = field(default_factory=list)
    skipped: list[tuple[Entry, str]] = field(default_factory=list)
    kept: list[Entry] = field(default_factory=list)

    def lines(self) -> list[str]:
        verb = "would free" if self.dry_run else "freed"
        out = [f"{'would remove' if self.dry_run else 'removed'} {e.kind}/{e.path.name} "
               f"({human(e.size)})" for e in self.removed]
        out += [f"skipped {e.kind}/{e.path.name}: {why}" for e, why in self.skipped]
        by_kind = sizes_by_kind(self.removed)
        out += [f"{verb} {human(size)} of {KINDS[kind]}" for kind, size in by_kind.items()]
        out.append(f"{verb} {human(sum(e.size for e in self.removed))} in total; "
                   f"{len(self.kept)} entries kept ({human(sum(e.size for e in self.kept))})")
        return out


def sizes_by_kind(found: list[Entry]) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in found:
        out[e.kind] = out.get(e.kind, 0) + e.size
    return out


def collect(root: Path, keep: int | None, max_size: int | None, dry_run: bool = False
            ) -> Collected:
    """./lab gc: remove what to_remove() picks, except entries a running lab holds."""
    found = entries(root)
    doomed = to_remove(found, [start for _, start in runs(root)], keep, max_size)
    result = Collected(dry_run, kept=[e for e in found if e not in doomed])
    for e in doomed:
        with _exclusive(root, e) as locked:
            if not locked:
                result.skipped.append((e, "in use by a running lab (its lock is held)"))
                result.kept.append(e)
                continue
            if not dry_run:
                shutil.rmtree(e.path, ignore_errors=True)
                _sidecar(root, e.kind, e.path.name, "used").unlink(missing_ok=True)
            result.removed.append(e)
    return result


@contextlib.contextmanager
def _exclusive(root: Path, e: Entry) -> Iterator[bool]:
    """Whether gc got the entry's lock exclusively (held for the block)."""
    lock = _sidecar(root, e.kind, e.path.name, "lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.I)


def parse_size(text: str) -> int:
    """'20G', '512M', '1.5T', '4096' (bytes; K/M/G/T are powers of 1024)."""
    m = _SIZE.match(text)
    if m is None:
        raise ConfigError(f"--max-size: expected a size like 20G, 512M or 4096, got {text!r}")
    return int(float(m.group(1)) * 1024 ** " KMGT".index((m.group(2) or " ").upper()))


def human(n: int) -> str:
    """1536 -> '1.5 KiB'."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def mark_used(root: Path, path: Path) -> None:
    """Stamp the entry holding `path` as used by this run, without holding it (for entries
    used only briefly: a module build root, a source tree being looked up)."""
    usage = Usage(root)
    usage.use(path)
    usage.close()
