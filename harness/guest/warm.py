"""Machine profiles without a snapshot, booted at once rather than one after the other.

A run on a new kernel needs a cold boot per machine profile (1 vCPU, 2 vCPUs, 256 MB, a
persistent buffer's command line), each the length of a boot under TCG, paid in series as the first test of
each profile asks. `Warmer` boots every profile a run needs and has no snapshot of, in the
background while the first tests run, each saved as its snapshot (harness/guest/snapshot.py)
and stopped; the test that asks then restores it. A cold boot of a profile holds a lock file beside the snapshots, so the
workers of a `-j` run (separate processes) boot each profile once and the others wait for it.
"""
from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

from harness import cache
from harness.guest import guest as guests
from harness.guest import snapshot

log = logging.getLogger(__name__)


@contextlib.contextmanager
def cold_boot_lock(plan: guests.BootPlan) -> Iterator[bool]:
    """Held while this process may cold boot `plan`'s profile: yields whether the profile
    still has no snapshot once the lock is ours (False: another process saved it meanwhile,
    restore it). A plan without snapshots yields True and locks nothing."""
    if plan.snapshots is None:
        yield True
        return
    key = guests.snapshot_key(plan)
    with cache.exclusive(plan.snapshots / f".boot-{key.digest()}.lock"):
        yield snapshot.find(plan.snapshots, key) is None


def has_snapshot(plan: guests.BootPlan) -> bool:
    return plan.snapshots is not None and \
        snapshot.find(plan.snapshots, guests.snapshot_key(plan)) is not None


class Warmer:
    """Cold boots in the background, one at a time in one thread (two QEMUs booting at once on
    a 2-core host only slow each other and the tests). `wait(plan)` before a profile's own
    boot: a boot under way is waited for and then restored; one not begun is taken off the
    queue, and the test boots it itself."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[guests.BootPlan] = []
        self._doing: tuple[str, threading.Event] | None = None
        self._thread: threading.Thread | None = None

    def start(self, plans: list[guests.BootPlan]) -> list[guests.BootPlan]:
        """Queue each plan without a snapshot for a boot ahead; the plans queued."""
        queued = []
        with self._lock:
            names = {self._name(p) for p in self._queue}
            for plan in plans:
                if plan.snapshots is None or self._name(plan) in names or has_snapshot(plan):
                    continue
                names.add(self._name(plan))
                self._queue.append(plan)
                queued.append(plan)
            if queued and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._run, name="boot-ahead",
                                                daemon=True)
                self._thread.start()
        return queued

    def wait(self, plan: guests.BootPlan) -> None:
        name = self._name(plan)
        with self._lock:
            self._queue = [p for p in self._queue if self._name(p) != name]
            doing = self._doing
        if doing is not None and doing[0] == name:
            doing[1].wait()

    def wait_all(self) -> None:
        """Let the boot under way finish (none is left half-saved) and drop the rest."""
        with self._lock:
            self._queue.clear()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._doing = None
                    return
                plan = self._queue.pop(0)
                self._doing = (self._name(plan), threading.Event())
                done = self._doing[1]
            try:
                self._boot(plan)
            finally:
                done.set()

    @staticmethod
    def _name(plan: guests.BootPlan) -> str:
        return guests.snapshot_key(plan).digest()

    @staticmethod
    def _boot(plan: guests.BootPlan) -> None:
        """One profile's cold boot, saved and stopped. A failure is only logged: the test that
        asks for the profile boots it itself and reports what goes wrong there."""
        try:
            with cold_boot_lock(plan) as cold:
                if cold:
                    with guests.boot(plan):
                        pass
        except Exception as e:  # noqa: BLE001 - the test's own boot reports it
            log.warning("booting the %d cpu / %d MB%s profile ahead failed (%s); its first "
                        "test boots it", plan.cpus, plan.memory_mb,
                        f" ({plan.cmdline})" if plan.cmdline else "", e)


def console_log_for(base: Path, plan: guests.BootPlan) -> Path:
    """A profile's own console log for its boot ahead: boots at once must not interleave their
    lines in one file."""
    return base.with_name(f"{base.stem}-warm-{plan.cpus}cpu-{plan.memory_mb}mb-"
                          f"{guests.snapshot_key(plan).digest()[:8]}{base.suffix}")
