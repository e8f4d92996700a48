"""A running QEMU process and its serial console.

QEMU runs under pexpect with the serial console on its stdio; a watcher thread reads the
console line by line (saving every byte to the console log) and sets events for the ready
marker, the accelerator-check marker, a panic, and QEMU's exit. QEMU never outlives the
harness: it is stopped on every exit path, and PR_SET_PDEATHSIG kills it should the harness
itself be killed.
"""
from __future__ import annotations

import ctypes
import logging
import signal
import threading
import time
from pathlib import Path

import pexpect

from harness import console

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: QEMU gets SIGKILL if the harness dies.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class VM:
    """One QEMU process; `start()` it, watch its events, and always `stop()` it."""

    def __init__(self, argv: list[str], console_log: Path) -> None:
        self.argv = argv
        self.console_log = console_log
        self.ready = threading.Event()
        self.check_ok = threading.Event()
        self.exited = threading.Event()
        self.panicked = threading.Event()
        self.panic: console.Panic | None = None
        self.tcg_artefact: str | None = None  # the first known TCG artefact line seen
        self.stages: dict[str, float] = {}
        self.exit_status: int | None = None
        self.started_at = 0.0
        self.last_output_at = 0.0  # time.monotonic() of the last console line
        self._child: pexpect.spawn | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._recent: list[str] = []
        self._log_file = None

    def start(self) -> None:
        log.debug("qemu: %s", " ".join(self.argv))
        self.console_log.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = self.console_log.open("ab")
        self.started_at = self.last_output_at = time.monotonic()
        self._child = pexpect.spawn(self.argv[0], self.argv[1:], logfile=None, echo=False,
                                    timeout=None, preexec_fn=_die_with_parent,
                                    dimensions=(24, 200))
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
        if not self.panicked.is_set():
            if (p := console.panic_in(line, "\n".join(self._recent))):
                self.panic = p
                self.panicked.set()
                log.debug("console: panic: %s", p.title)
        self._recent = (self._recent + [line])[-80:]

    def _reap(self) -> None:
        child = self._child
        if child is not None and not child.isalive():
            self.exit_status = child.exitstatus if child.exitstatus is not None else (
                -(child.signalstatus or 0))
            self.exited.set()

    def alive(self) -> bool:
        return self._child is not None and self._child.isalive()

    def console_text(self) -> str:
        try:
            return self.console_log.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop QEMU (SIGTERM, then SIGKILL) and the watcher; safe to call more than once."""
        self._stop.set()
        child = self._child
        if child is not None and child.isalive():
            log.debug("qemu: stopping pid %d", child.pid)
            child.terminate(force=True)
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
