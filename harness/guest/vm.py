"""A running QEMU process and its serial console.

QEMU runs under pexpect with the serial console on its stdio; a watcher thread reads the
console line by line (saving every byte to the console log) and sets events for the ready
marker, the accelerator-check marker, a panic, and QEMU's exit. QEMU never outlives the
harness: it is stopped on every exit path, and PR_SET_PDEATHSIG kills it should the harness
itself be killed.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from pathlib import Path

import pexpect

from harness import lifetime
from harness.kernellog import console, splats

log = logging.getLogger(__name__)


class ConsoleLog:
    """One boot's share of the console log file, capped: the first three quarters of `limit`
    bytes are written as they come, then only the last quarter is kept (in memory) and written
    at close() after a note of how much was dropped. A guest flooding its console neither fills
    the disk nor loses its last words (a panic after the flood). pexpect writes to it."""

    def __init__(self, path: Path, limit: int) -> None:
        self.path = path
        self._file = path.open("ab")
        self.start = self._file.tell()  # where this boot's share begins (boots append)
        self._head_room = limit - limit // 4
        self._tail_limit = limit // 4
        self._tail = bytearray()
        self.dropped = 0

    def write(self, data: bytes) -> None:
        if self._head_room > 0:
            head = data[:self._head_room]
            self._file.write(head)
            self._head_room -= len(head)
            data = data[len(head):]
        if data:
            self._tail += data
            if (excess := len(self._tail) - self._tail_limit) > 0:
                del self._tail[:excess]
                self.dropped += excess

    def flush(self) -> None:
        self._file.flush()

    def _flood_note(self) -> bytes:
        return (f"\n==== ringlab: console flood: {self.dropped} bytes not kept here "
                f"(machine.console_log_mb); the last {len(self._tail)} bytes follow ====\n"
                ).encode()

    def unwritten(self) -> bytes:
        """What close() will still write: the flood note and the kept tail."""
        return self._flood_note() + bytes(self._tail) if self._tail else b""

    def close(self) -> None:
        if not self._file.closed:
            self._file.write(self.unwritten())
            self._file.close()


class VM:
    """One QEMU process; `start()` it, watch its events, and always `stop()` it."""

    def __init__(self, argv: list[str], console_log: Path,
                 console_log_bytes: int = 16 * 2**20) -> None:
        self.argv = argv
        self.console_log = console_log
        self.console_log_bytes = console_log_bytes
        self.ready = threading.Event()
        self.check_ok = threading.Event()
        self.exited = threading.Event()
        self.panicked = threading.Event()
        self.panic: console.Panic | None = None
        self.tcg_artefact: str | None = None  # the first known TCG artefact line seen
        # The first lockup / stall / hung-task report line (harness/kernellog/splats.py), and when.
        self.lockup: str | None = None
        self.lockup_at = 0.0
        # The first Oops banner (splats.die_in), and when: a command the Oops killed does not
        # come back, and Guest says so within OOPS_GRACE_S instead of at the command's deadline.
        self.oops: str | None = None
        self.oops_at = 0.0
        self.stages: dict[str, float] = {}
        self.kernel_starts = 0  # kernel banners seen ("Linux version"): one per boot, warm too
        self.exit_status: int | None = None
        self.started_at = 0.0
        self.last_output_at = 0.0  # time.monotonic() of the last console line
        self._child: pexpect.spawn | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        # isalive() reaps QEMU with waitpid(): the watcher thread and the test's thread asking at
        # once made the loser's waitpid() fail (ECHILD, ptyprocess raises) when a guest died.
        self._reaping = threading.Lock()
        self._recent: deque[str] = deque(maxlen=80)
        self._log_file: ConsoleLog | None = None
        self._console_start = 0

    def start(self) -> None:
        log.debug("qemu: %s", " ".join(self.argv))
        self.console_log.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = ConsoleLog(self.console_log, self.console_log_bytes)
        self._console_start = self._log_file.start
        self.started_at = self.last_output_at = time.monotonic()
        self._child = pexpect.spawn(self.argv[0], self.argv[1:], logfile=None, echo=False,
                                    timeout=None, preexec_fn=lifetime.kill_with_parent,
                                    dimensions=(24, 200))
        # A guest is stopped with SIGHUP, which QEMU obeys at once: pexpect's default 0.1 s
        # waits after each signal and after close are what a teardown cost.
        self._child.delayafterterminate = 0.02
        self._child.delayafterclose = 0.02
        self._child.logfile_read = self._log_file
        self._thread = threading.Thread(target=self._watch, name="console-watcher", daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child else None

    def _watch(self) -> None:
        child = self._child
        assert child is not None
        while not self._stop.is_set():
            try:
                i = child.expect([b"\n", pexpect.EOF, pexpect.TIMEOUT], timeout=0.5)
            except (OSError, ValueError):  # the pty went away under us during stop()
                break
            if i == 0:
                self._line(child.before.decode("utf-8", "replace"))
            elif i == 1:
                if child.before:
                    self._line(child.before.decode("utf-8", "replace"))
                break
        self._reap()

    def _line(self, raw: str) -> None:
        self.last_output_at = time.monotonic()
        line = console.clean(raw)
        stage = console.stage_of(line)
        if stage == "kernel":
            self.kernel_starts += 1
        if stage and stage not in self.stages:
            self.stages[stage] = time.monotonic() - self.started_at
            log.debug("boot: %s at %.2f s", stage, self.stages[stage])
        if self.tcg_artefact is None and (artefact := console.tcg_artefact_in(line)):
            self.tcg_artefact = artefact
            log.debug("console: TCG artefact: %s", artefact)
        if console.READY in line:
            self.ready.set()
        if console.CHECK_OK in line:
            self.check_ok.set()
        if self.lockup is None and (lockup := splats.lockup_in(line)):
            self.lockup, self.lockup_at = lockup, time.monotonic()
            log.debug("console: lockup: %s", lockup)
        if self.oops is None and (oops := splats.die_in(line)):
            self.oops, self.oops_at = oops, time.monotonic()
            log.debug("console: oops: %s", oops)
        if not self.panicked.is_set():
            if (p := console.panic_in(line, "\n".join(self._recent))):
                self.panic = p
                self.panicked.set()
                log.debug("console: panic: %s", p.title)
        self._recent.append(line)

    def _child_alive(self) -> bool:
        child = self._child
        if child is None:
            return False
        with self._reaping:
            try:
                return bool(child.isalive())
            except pexpect.ExceptionPexpect:  # reaped already: it is not alive
                return False

    def _reap(self) -> None:
        child = self._child
        if child is not None and not self._child_alive():
            self.exit_status = child.exitstatus if child.exitstatus is not None else (
                -(child.signalstatus or 0))
            self.exited.set()

    def alive(self) -> bool:
        return self._child_alive()

    def console_text(self) -> str:
        """This boot's console log as written so far, with the kept tail of a flood after it
        (the guests of a run share one file: an earlier boot's splat is not this one's)."""
        start = self._console_start
        try:
            with self.console_log.open("rb") as f:
                f.seek(start)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        pending = self._log_file.unwritten() if self._log_file is not None else b""
        return text + pending.decode("utf-8", "replace")

    def stop(self) -> None:
        """Stop QEMU (SIGTERM, then SIGKILL) and the watcher; safe to call more than once."""
        self._stop.set()
        child = self._child
        if child is not None and self._child_alive():
            log.debug("qemu: stopping pid %d", child.pid)
            with self._reaping:
                try:
                    child.terminate(force=True)
                except pexpect.ExceptionPexpect:  # it died meanwhile and was reaped
                    pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if child is not None:
            try:
                child.close(force=True)
            except (OSError, pexpect.ExceptionPexpect):
                pass
            self.exit_status = child.exitstatus
            self.exited.set()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def silent_for(self) -> float:
        """Seconds since the console last printed a line."""
        return time.monotonic() - self.last_output_at

    def wait_for(self, event: threading.Event, deadline: float, stall_s: float | None = None
                 ) -> bool:
        """Wait until `event`, a panic, QEMU's exit, the deadline, or (with `stall_s`) a console
        silent that long; True only for `event`."""
        while time.monotonic() < deadline:
            if event.is_set():
                return True
            if stall_s is not None and self.silent_for() > stall_s:
                return False
            if self.panicked.is_set() or self.exited.is_set():
                # Give the watcher a moment to read the panic's last lines into the log.
                time.sleep(0.3)
                return event.is_set()
            event.wait(0.05)
        return event.is_set()
