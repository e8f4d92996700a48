"""Probe a trace remote: a ring buffer written outside the kernel's tracing core (firmware,
a hypervisor; in a guest, the test remote of CONFIG_TRACE_REMOTE_TEST), read by the kernel
through the meta page and reader-swap protocol of trace_mmap.h, shown under tracefs
remotes/NAME (7.x: kernel/trace/trace_remote.c, simple_ring_buffer.c, remote_test.c,
Documentation/trace/remotes.rst, tools/testing/selftests/ftrace/test.d/remotes/).

Run by hand in a guest (as root, after `modprobe remote_test`):
    python3 probe_trace_remote.py rules
"""
from __future__ import annotations

import fcntl
import mmap
import os
import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import fault_inject
import probelib
import trace_abi as abi
import tracefs

REMOTE = "remotes/test"
# One line of the remote's trace/trace_pipe (trace_remote.c, define_remote_events.h):
# "[CPU]\t  SEC.USEC: selftest id=N", and "CPU:N [LOST K EVENTS]" before a gap.
EVENT = re.compile(r"^\[(\d+)\]\s+(\d+)\.(\d+): selftest id=(\d+)$")
LOST = re.compile(r"^CPU:(\d+) \[LOST (\d+) EVENTS\]$")
# Writes are made in batches of about a data page (4080 bytes over ~24-byte events) until the
# oldest events are overwritten, then one batch more (remotes/trace.tc writes 2 "pages" into
# the 7 KB default); at most MAX_BATCHES.
BATCH, MAX_BATCHES = 170, 40


class Remote:
    """remotes/test: its files, each write's outcome as 'ok' or the errno's name."""

    def __init__(self, root: str) -> None:
        self.path = f"{root}/{REMOTE}"

    def get(self, name: str) -> str:
        return tracefs.read_file(f"{self.path}/{name}").strip()

    def set(self, name: str, value: object) -> str:
        return probelib.outcome(lambda: _write(f"{self.path}/{name}", f"{value}\n"))

    def event(self, value: int, cpu: int = 0) -> str:
        """One selftest event id=value, written on `cpu` (the event lands on the writer's)."""
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {cpu})
        try:
            return self.set("write_event", value)
        finally:
            os.sched_setaffinity(0, before)

    def lines(self, name: str = "trace") -> list[str]:
        return [ln for ln in tracefs.read_file(f"{self.path}/{name}").splitlines()
                if ln and not ln.startswith("#")]

    def pipe(self, name: str = "trace_pipe", idle_s: float = 0.5) -> list[str]:
        """What a consuming read of `name` returns until it has had nothing for idle_s (the
        file blocks when empty and ignores O_NONBLOCK, R11: an alarm ends the read)."""
        fd = os.open(f"{self.path}/{name}", os.O_RDONLY)
        data = b""
        try:
            while True:
                with _alarm(idle_s):
                    try:
                        chunk = os.read(fd, 65536)
                    except TimeoutError:
                        break
                if not chunk:
                    break
                data += chunk
        finally:
            os.close(fd)
        return [ln for ln in data.decode(errors="replace").splitlines() if ln]

    def reset(self) -> None:
        self.set("tracing_on", 0)
        self.set("trace", "")
        self.set("events/enable", 0)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


@contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    def fire(signum: int, frame: object) -> None:
        raise TimeoutError
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def ids(lines: list[str]) -> list[int]:
    return [int(m.group(4)) for ln in lines if (m := EVENT.match(ln))]


def timestamps_rise(lines: list[str]) -> bool:
    ts = [(int(m.group(2)), int(m.group(3))) for ln in lines if (m := EVENT.match(ln))]
    return all(a <= b for a, b in zip(ts, ts[1:]))


def _gate(check: str) -> None:
    root = tracefs.root()
    if not os.path.isdir(f"{root}/{REMOTE}"):
        raise probelib.Skip(f"no {REMOTE} in tracefs: the kernel has no trace remotes, or "
                            "remote_test (CONFIG_TRACE_REMOTE_TEST) is not loaded")


def check_rules(args: list[str]) -> dict:
    """The test remote through its life: load, events, consumption, overflow (the reader
    swap's lost-event count), reset, unload, and what user space may not do (mmap, ioctl).
    Each step's outcome as observed; the tests judge them (tests/kernel/test_trace_remote.py)."""
    r = Remote(tracefs.root())
    r.reset()
    r.set("buffer_size_kb", 7)
    out: dict[str, Any] = {"cpus": os.cpu_count()}
    out["at_start"] = {"tracing_on": r.get("tracing_on"), "size": r.get("buffer_size_kb")}
    out["size_zero"] = r.set("buffer_size_kb", 0)
    out["size_junk"] = r.set("buffer_size_kb", "x")
    out["size_16"] = r.set("buffer_size_kb", 16)
    out["size_16_reads"] = r.get("buffer_size_kb")
    r.set("buffer_size_kb", 7)
    out["write_disabled_event"] = r.event(1)           # event off, buffer unloaded
    _must(r.set("events/test/selftest/enable", 1))
    _must(r.set("tracing_on", 1))
    out["loaded"] = r.get("buffer_size_kb")
    out["size_while_loaded"] = r.set("buffer_size_kb", 16)
    out["writes"] = [r.event(i) for i in range(1, 9)]
    trace = r.lines()
    out["trace_ids"], out["trace_rising"] = ids(trace), timestamps_rise(trace)
    out["cpu0_trace_ids"] = ids(r.lines("per_cpu/cpu0/trace"))
    piped = r.pipe()
    out["pipe_ids"] = ids(piped)
    out["trace_after_pipe"] = ids(r.lines())
    # Overflow on one CPU: the oldest pages go; a consuming read says how many were lost
    # (simple_ring_buffer swap: reader.lost_events = overrun - last_overrun) and goes on at
    # the first kept id. On a freshly loaded buffer, as remotes/trace.tc does (reload_remote):
    # after the consuming read above, the reader page may be the page the writer was on, and
    # what the writer put there stays out of the ring, unread and never overwritten (as in
    # the kernel's own ring buffer), ahead of a gap in `trace`.
    _must(r.set("tracing_on", 0))
    _must(r.set("trace", ""))
    out["reloaded"] = r.get("buffer_size_kb")
    _must(r.set("tracing_on", 1))
    written, extra = 0, 1
    for _ in range(MAX_BATCHES):
        for _ in range(BATCH):
            written += 1
            r.event(written)
        if (first := ids(r.lines()[:1])) and first[0] > 1:
            if extra == 0:
                break
            extra -= 1
    out["overflow_writes"] = written
    kept = r.lines()
    out["overflow_trace_ids"] = ids(kept)
    over = r.pipe()
    out["overflow_pipe"] = {"first_lines": over[:2], "ids": ids(over),
                            "lost": [int(m.group(2)) for ln in over if (m := LOST.match(ln))]}
    # Reset empties both readers; off + empty + no reader unloads (trace_remote.c R2).
    r.event(7890)
    out["reset"] = r.set("trace", "")
    out["after_reset"] = {"trace": ids(r.lines()), "pipe": ids(r.pipe())}
    out["event_after_reset"] = r.event(4242)
    out["after_reset_event"] = ids(r.lines())
    _must(r.set("tracing_on", 0))
    out["off_with_events"] = r.get("buffer_size_kb")
    r.set("trace", "")
    out["off_and_reset"] = r.get("buffer_size_kb")
    out["user_space"] = _user_space(r)
    r.reset()
    return out


def check_consumed(args: list[str]) -> dict:
    """What `trace` shows after a consuming read took everything: on a freshly loaded 7 KB
    buffer, two data pages of events (two reader swaps, the second of the page the writer is
    on), all taken through trace_pipe, then one event more. `trace` (non-consuming) must show
    that one event only: the consumed ones are gone (trace.tc "Test interaction with consuming
    read", with one page there)."""
    r = Remote(tracefs.root())
    r.reset()
    _must(r.set("buffer_size_kb", 7))
    _must(r.set("events/test/selftest/enable", 1))
    _must(r.set("tracing_on", 1))
    written = 2 * BATCH
    out: dict[str, Any] = {"written": written,
                           "writes_ok": all(r.event(i) == "ok" for i in range(1, written + 1))}
    out["pipe_ids"] = ids(r.pipe())
    out["one_more"] = r.event(written + 1)
    out["trace_ids"] = ids(r.lines())
    out["cpu0_trace_ids"] = ids(r.lines("per_cpu/cpu0/trace"))
    out["pipe_after"] = ids(r.pipe())
    r.reset()
    return out


def _user_space(r: Remote) -> dict:
    """A remote's buffer is the kernel's to read: no trace_pipe_raw, and its files have no
    mmap or ioctl (trace_remote.c fops; ring_buffer_map() refuses remote buffers)."""
    out: dict[str, object] = {
        "trace_pipe_raw": os.path.exists(f"{r.path}/per_cpu/cpu0/trace_pipe_raw")}
    fd = os.open(f"{r.path}/trace", os.O_RDONLY)
    try:
        out["mmap_trace"] = probelib.outcome(lambda: probelib.Mapping(fd, probelib.PAGE,
                                                                      mmap.PROT_READ).close())
        out["get_reader"] = probelib.outcome(
            lambda: fcntl.ioctl(fd, abi.TRACE_MMAP_IOCTL_GET_READER))
    finally:
        os.close(fd)
    return out


def check_two_cpus(args: list[str]) -> dict:
    """Events written on CPU 0 and CPU 1 in turn: `trace` and `trace_pipe` merge the per-CPU
    buffers by timestamp (trace_remote_iter_read_event(): the oldest event of all CPUs), so
    the ids come back in the order written, each with its CPU."""
    if (os.cpu_count() or 1) < 2:
        raise probelib.Skip("the guest has one CPU: this check needs two")
    r = Remote(tracefs.root())
    r.reset()
    _must(r.set("buffer_size_kb", 7))
    _must(r.set("events/test/selftest/enable", 1))
    _must(r.set("tracing_on", 1))
    out: dict[str, Any] = {"writes": [r.event(i, cpu=i % 2) for i in range(1, 9)]}
    lines = r.lines()
    out["trace"] = [[int(m.group(1)), int(m.group(4))] for ln in lines if (m := EVENT.match(ln))]
    out["pipe_ids"] = ids(r.pipe())
    r.reset()
    return out


def check_too_big(args: list[str]) -> dict:
    """A buffer_size_kb the remote cannot describe: 2^35 KiB, more than UINT_MAX pages a CPU
    (trace_buffer_desc_size(): "Capped by ring_buffer_desc::nr_page_va"). The write is
    taken (TR:203-227 checks only 0 and overflow); loading refuses it, through tracing_on=1
    and through opening trace_pipe. Then a 7 KiB buffer loads and takes an event."""
    r = Remote(tracefs.root())
    r.reset()
    _must(r.set("events/test/selftest/enable", 1))
    out: dict[str, Any] = {"size_kb": 1 << 35, "set": r.set("buffer_size_kb", 1 << 35)}
    out["tracing_on"] = r.set("tracing_on", 1)
    out["after_tracing_on"] = {"tracing_on": r.get("tracing_on"),
                               "size": r.get("buffer_size_kb")}
    r.set("tracing_on", 0)
    out["open_trace_pipe"] = probelib.outcome(
        lambda: os.close(os.open(f"{r.path}/trace_pipe", os.O_RDONLY)))
    out["after_open"] = r.get("buffer_size_kb")
    _must(r.set("buffer_size_kb", 7))
    out["loads_after"] = r.set("tracing_on", 1)
    out["event_after"] = r.event(4004)
    out["shown_after"] = ids(r.lines())
    r.reset()
    return out


def check_alloc_failures(args: list[str]) -> dict:
    """Loading the buffer (tracing_on=1: trace_remote_load(), ring_buffer_alloc_remote(),
    trace_remote_alloc_buffer()) and opening per_cpu/cpu0/trace_pipe, trace_pipe and trace
    (trace_remote_get(), trace_remote_iter()), each with its 1st, 2nd, ... allocation failing
    (fault_inject.sweep). After each attempt, injection off: a refused load leaves the buffer
    unloaded and tracing off; then the remote loads, takes an event and shows it, and unloads
    once off and reset (R2); after an open, refused or not, `trace` shows the event and
    trace_pipe reads it."""
    fault_inject.prepare()
    r = Remote(tracefs.root())
    r.reset()
    _must(r.set("buffer_size_kb", 7))
    _must(r.set("events/test/selftest/enable", 1))

    def works(seen: dict, value: int) -> None:
        seen["loads"] = r.set("tracing_on", 1)
        seen["event"] = r.event(value)
        seen["shown"] = ids(r.lines())
        r.reset()
        r.set("events/test/selftest/enable", 1)
        seen["unloaded"] = r.get("buffer_size_kb")

    def load_setup() -> int:
        r.reset()
        r.set("events/test/selftest/enable", 1)
        return os.open(f"{r.path}/tracing_on", os.O_WRONLY)

    def load(fd: int) -> None:
        os.write(fd, b"1\n")

    def load_judge(fd: int, outcome: str) -> dict:
        os.close(fd)
        seen = {"size": r.get("buffer_size_kb"), "tracing_on": r.get("tracing_on")}
        r.reset()
        r.set("events/test/selftest/enable", 1)
        works(seen, 1001)
        return seen

    def open_setup() -> dict:
        r.set("tracing_on", 1)
        r.event(2002)
        return {}

    def opener(name: str) -> Callable[[dict], None]:
        def open_file(state: dict) -> None:
            state["fd"] = os.open(f"{r.path}/{name}", os.O_RDONLY)
        return open_file

    def open_judge(state: dict, outcome: str) -> dict:
        if "fd" in state:
            os.close(state["fd"])
        seen = {"shown": ids(r.lines()), "piped": ids(r.pipe())}
        r.reset()
        r.set("events/test/selftest/enable", 1)
        return seen

    # The per-CPU pipe first: its reader locks are allocated once, at the remote's first
    # per-CPU open (TR:251-263), and kept.
    out = {"open_cpu_pipe": fault_inject.summary(fault_inject.sweep(
               open_setup, opener("per_cpu/cpu0/trace_pipe"), open_judge)),
           "load": fault_inject.summary(fault_inject.sweep(load_setup, load, load_judge)),
           "open_pipe": fault_inject.summary(
               fault_inject.sweep(open_setup, opener("trace_pipe"), open_judge)),
           "open_trace": fault_inject.summary(
               fault_inject.sweep(open_setup, opener("trace"), open_judge))}
    r.reset()
    return out


def _must(result: str) -> None:
    if result != "ok":
        raise OSError(f"setting up the test remote: {result}")


CHECKS = probelib.check_table(globals())


def main(argv: list[str]) -> int:
    return probelib.check_main(argv, "trace_remote", "Probe tracefs remotes/test (the 7.x "
                               "test trace remote); prints one JSON document of observations "
                               "for CHECK.", CHECKS, "none", _gate)


if __name__ == "__main__":
    probelib.run(main)
