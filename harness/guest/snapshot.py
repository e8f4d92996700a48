"""Guest snapshots: a guest saved once per machine profile, restored instead of booted.

A boot under TCG takes several times as long as loading a saved guest (the figures:
docs/results/2026-11-2x-benchmarks.md, bench boot). So the first guest of a profile (kernel, rootfs, cpus, memory, accel,
command line, QEMU version: `SnapshotKey`) is saved right after SSH first answers, before the
probe runner starts, and every later guest of that profile is restored from it:

- saved: QEMU's migration stream of the stopped guest (RAM and devices), written over QMP to
  a file, and the disk as it was at that instant: blockdev-snapshot-sync freezes the guest's
  overlay (the running guest goes on in a new overlay on top of it) and the frozen overlay is
  copied as the snapshot's read-only base. Both are written in a temporary folder renamed into
  place when complete, so a partial snapshot is never found.
- restored: QEMU started with `-incoming defer` on a new throw-away overlay over that base and
  its own SSH port (user networking keeps no TCP state across a migration; the hostfwd rule is
  the new command line's), the stream loaded with `migrate-incoming`, then `cont`.

A snapshot that fails to restore is discarded and the guest booted (and saved again) instead,
with a warning (harness/guest/guest.py). The migration is driven with the `qemu.qmp` package
(QEMU's own QMP client library, asyncio), one `asyncio.run` per operation.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import shlex
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from qemu.qmp import QMPClient, QMPError

from harness import cache
from harness.errors import BootError
from harness.guest import monitor
from harness.guest.qemu import ROOT_DRIVE

log = logging.getLogger(__name__)

# Bump when what a snapshot holds, or how its guest is started, changes: old ones are ignored.
FORMAT = 1
# Snapshots kept in the cache (about 120 MB each for a 1 GB guest); the least recently used
# ones go first. Bisect and mutate steps each make one per kernel they boot.
KEEP = 8
# Migration's default bandwidth cap (32 MiB/s) is for live migration over a network; a stopped
# guest written to a local file should go as fast as the disk takes it.
MAX_BANDWIDTH = 1 << 40
# A snapshot's files whose digests are recorded at the save (not meta.json: every use touches it).
FILES = ("state", "base.qcow2")


class SnapshotError(BootError):
    """A snapshot could not be saved or restored; the lab boots instead."""


@dataclass(frozen=True)
class SnapshotKey:
    """Everything a saved guest depends on: change any of it and the snapshot is remade."""
    qemu: str  # `qemu-system-x86_64 --version`: a stream loads only into the QEMU that wrote it
    kernel: tuple[str, ...]  # identity (path, size, mtime) of vmlinuz, initramfs, modules image
    rootfs: str  # identity of the rootfs image (the base's own backing file)
    host_key: str  # the guest's pinned SSH host key (in the rootfs; a check, not a cause)
    cpus: int
    memory_mb: int
    accel: str
    tcg_threads: str
    cmdline: str
    probes: str = ""  # the probes pushed before the save: the runner daemon is in the snapshot
    format: int = FORMAT

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:20]


def file_id(path: Path | None) -> str:
    """A file's identity for a key: path, size and mtime (hashing a 100 MB modules image on
    every boot would cost more than the key saves)."""
    if path is None:
        return ""
    st = path.stat()
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


@dataclass(frozen=True)
class Snapshot:
    """A complete snapshot folder: state (migration stream), base.qcow2, meta.json."""
    path: Path

    @property
    def state(self) -> Path:
        return self.path / "state"

    @property
    def base(self) -> Path:
        return self.path / "base.qcow2"

    @property
    def meta(self) -> Path:
        return self.path / "meta.json"

    @property
    def name(self) -> str:
        return self.path.name


def find(root: Path, key: SnapshotKey) -> Snapshot | None:
    """The complete snapshot for `key`, or None. A folder whose files do not match its own
    record (a state file cut short, a base missing) is not one: unusable() says why. One whose
    files changed since the save (their digests: harness/cache.py) is dropped, with a
    warning, and the next boot of its profile saves it again."""
    snap = Snapshot(root / key.digest())
    if unusable(snap, key) is not None or not cache.intact(snap.path, FILES):
        return None
    with contextlib.suppress(OSError):
        os.utime(snap.meta)  # recently used: pruned last
    return snap


def unusable(snap: Snapshot, key: SnapshotKey) -> str | None:
    """Why the snapshot folder of `key` cannot be restored; None if it can. "absent" when
    there is no snapshot at all (nothing to say to the user)."""
    try:
        meta = json.loads(snap.meta.read_text())
    except FileNotFoundError:
        return "absent"
    except (OSError, ValueError) as e:
        return f"its record {snap.meta.name} is unreadable ({e})"
    if meta.get("key") != json.loads(json.dumps(asdict(key))):
        return "its record is for another guest"
    for part, path in (("state", snap.state), ("base", snap.base)):
        try:
            size = path.stat().st_size
        except OSError:
            return f"its {part} file {path.name} is missing"
        if size != meta.get(f"{part}_bytes"):
            return (f"its {part} file {path.name} is {size} bytes, its record says "
                    f"{meta.get(f'{part}_bytes')} (cut short or changed)")
    return None


def overlay(snap: Snapshot, workdir: Path) -> Path:
    """A new throw-away overlay over the snapshot's frozen disk, for one restored guest."""
    path = workdir / "root.qcow2"
    path.unlink(missing_ok=True)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b",
                    str(snap.base), str(path)], check=True, capture_output=True)
    return path


def incoming_uri(snap: Snapshot) -> str:
    """The migration URI that reads the saved stream (QEMU 7.2 has no `file:` URI yet)."""
    return "exec:cat " + shlex.quote(str(snap.state))


def discard(snap: Snapshot) -> None:
    """Remove a snapshot that failed to restore (renamed away first: another process looking
    for it finds nothing rather than half of it)."""
    gone = snap.path.with_name(f".gone-{snap.name}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        snap.path.rename(gone)
    except OSError:
        return
    shutil.rmtree(gone, ignore_errors=True)


def prune(root: Path, keep: int = KEEP) -> None:
    """Keep the `keep` most recently used snapshots; drop leftovers of interrupted saves."""
    snaps = []
    for p in root.iterdir() if root.is_dir() else ():
        if p.name.startswith(".") and time.time() - p.stat().st_mtime > 3600:
            shutil.rmtree(p, ignore_errors=True)
        elif not p.name.startswith("."):
            with contextlib.suppress(OSError):
                snaps.append(((p / "meta.json").stat().st_mtime, p))
    for _, p in sorted(snaps, reverse=True)[keep:]:
        discard(Snapshot(p))


def _qmp(sock: Path, deadline: float) -> contextlib.AbstractAsyncContextManager[QMPClient]:
    return monitor.connect(sock, deadline, SnapshotError)


async def _migration_done(client: QMPClient, deadline: float) -> dict:
    """Poll query-migrate until the migration completes; SnapshotError if it fails."""
    while True:
        answer = await client.execute("query-migrate")
        status: dict = answer if isinstance(answer, dict) else {}
        state = status.get("status")
        if state == "completed":
            return status
        if state in ("failed", "cancelled"):
            raise SnapshotError(f"migration {state}: {status.get('error-desc', 'no reason')}")
        if time.monotonic() > deadline:
            raise SnapshotError(f"migration not done in time (status {state})")
        await asyncio.sleep(0.02)


async def _save(sock: Path, live_overlay: Path, state: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    async with _qmp(sock, deadline) as qmp:
        await qmp.execute("stop")
        try:
            # Freeze the disk first: the guest goes on in `live_overlay`; the overlay it had
            # becomes that one's read-only backing file, unchanged from now on.
            await qmp.execute("blockdev-snapshot-sync", {
                "device": ROOT_DRIVE, "snapshot-file": str(live_overlay), "format": "qcow2"})
            await qmp.execute("migrate-set-parameters", {"max-bandwidth": MAX_BANDWIDTH})
            await qmp.execute("migrate", {"uri": "exec:cat > " + shlex.quote(str(state))})
            await _migration_done(qmp, deadline)
        finally:
            await qmp.execute("cont")


def save(root: Path, key: SnapshotKey, sock: Path, frozen_overlay: Path, live_overlay: Path,
         timeout_s: float = 60.0) -> Snapshot:
    """Save the running guest behind QMP socket `sock` as the snapshot for `key`. The guest
    is stopped for the save (a fraction of a second) and goes on afterwards in `live_overlay`;
    `frozen_overlay` (its disk until now) is copied as the snapshot's base."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{key.digest()}-{os.getpid()}-{time.monotonic_ns()}"
    tmp.mkdir()
    try:
        snap = Snapshot(tmp)
        try:
            asyncio.run(_save(sock, live_overlay, snap.state, timeout_s))
        except QMPError as e:
            raise SnapshotError(f"QMP: {e}") from None
        shutil.copyfile(frozen_overlay, snap.base)
        cache.record(tmp, FILES)  # ~0.1 s for a 1 GB guest's stream
        snap.meta.write_text(json.dumps({
            "key": asdict(key), "state_bytes": snap.state.stat().st_size,
            "base_bytes": snap.base.stat().st_size,
            "saved": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=2))
        final = root / key.digest()
        if final.exists() and find(root, key) is None:
            discard(Snapshot(final))  # a broken one under our name (an older format)
        try:
            tmp.rename(final)  # atomic: a snapshot is found whole or not at all
        except OSError:  # another process saved the same profile first: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
        prune(root)
        return Snapshot(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


async def _restore(sock: Path, uri: str, deadline: float) -> None:
    async with _qmp(sock, deadline) as qmp:
        await qmp.execute("migrate-incoming", {"uri": uri})
        await _migration_done(qmp, deadline)
        await qmp.execute("cont")


def restore(sock: Path, snap: Snapshot, deadline: float) -> None:
    """Load `snap` into the QEMU (started with -incoming defer) behind `sock` and run it."""
    try:
        asyncio.run(_restore(sock, incoming_uri(snap), deadline))
    except QMPError as e:
        raise SnapshotError(f"QMP: {e}") from None


def fallback_reason(error: BaseException) -> str | None:
    """Why a failed restore falls back to a boot, or None when it must not (Ctrl-C, SIGTERM,
    interpreter exit): a snapshot problem never fails a test."""
    if not isinstance(error, Exception):
        return None
    if isinstance(error, BootError):
        return error.message
    return f"{type(error).__name__}: {error}"


# Run once in a guest before it is saved (its probe runner daemon, probes/runner.py, already
# up and holding python3 and the probes in memory): it reads boot_id, which the kernel makes on
# its first read, so every restore of the snapshot shows the same one (what tells a restored
# guest from a booted one). A restored guest's clock and random pool are then set by the
# runner (refresh()).
WARM_COMMAND = "cat /proc/sys/kernel/random/boot_id >/dev/null"
