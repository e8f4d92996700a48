"""Probe the tracefs ring buffer mapped into user space (per_cpu/cpuN/trace_pipe_raw mmap):
ABI version, meta page, data, overflow, refusals, lifetime, readers side by side, throughput.
Prints observations as one JSON document; tests/kernel/test_trace_mmap.py judges them against
the ABI (include/uapi/linux/trace_mmap.h, ../shared/reference/ring-buffer-abi.md section 4).

Each check works in its own tracing instance (instances/ringlab-PID), so it starts from an
empty buffer and leaves the top-level buffer alone. Known events come from trace_marker writes
made by this process pinned to the CPU whose buffer it reads.

Run by hand in a guest: python3 probe_trace_mmap.py CHECK [ARGS]   (-h for the list). Stdlib only.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import re
import select
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import fault_inject
import perf_events
import probelib
import trace_abi as abi
import tracefs
from probelib import (MAP_ANONYMOUS, MAP_FIXED, MREMAP_DONTUNMAP, MREMAP_MAYMOVE, PAGE, Mapping,
                      errno_result, libc, mapped)
from trace_buffer import ParseError, PrintDecoder, parse_subbuf
from tracefs import read_file, write_file

MADV_DONTFORK, MADV_DOFORK = 10, 11


# A snapshot trigger that is armed (tr->snapshot counts it, which is what the mapping rules
# look at: get_snapshot_map()) but never fires: pid_t is never negative. An unfiltered one on
# sched_switch feeds itself (each snapshot's latency_fsnotify() queues irq_work and then work
# on tr_max_lat_wq, whose switches fire it again) and starves ordinary tasks until it is
# disarmed: almost all of the CPU on PREEMPT_RT, where that irq_work runs in the FIFO
# irq_work/N thread (docs/results/2026-11-2x-kernels-and-arches.md, Findings per arch).
ARMED_SNAPSHOT = "snapshot if prev_pid < 0"
NEVER_TRIGGER = "traceon if prev_pid < 0"     # a trigger that never fires, on sched_switch


# --- an instance of our own ----------------------------------------------------------------

class Instance(tracefs.Instance):
    """instances/NAME: a trace array with its own per-CPU buffers, markers and snapshot."""

    def __init__(self, root: str, name: str) -> None:
        super().__init__(root, name)
        self.header = abi.HeaderPage.parse(read_file(f"{root}/events/header_page"))
        self.prints = PrintDecoder(abi.EventFormat.parse(
            read_file(f"{root}/events/ftrace/print/format")))
        self._marker = -1

    def create(self) -> None:
        super().create()
        self._marker = os.open(f"{self.path}/trace_marker", os.O_WRONLY)

    def remove(self) -> str:
        if self._marker >= 0:
            os.close(self._marker)
            self._marker = -1
        return super().remove()

    def own_fds(self) -> frozenset[int]:
        return frozenset({self._marker} if self._marker >= 0 else ())

    def attach(self) -> None:
        """Use an instance that is there already (one the kernel command line made)."""
        self._marker = os.open(f"{self.path}/trace_marker", os.O_WRONLY)

    def mark(self, text: str) -> None:
        os.write(self._marker, text.encode())

    def open_cpu(self, cpu: int, nonblock: bool = True) -> int:
        flags = os.O_RDONLY | (os.O_NONBLOCK if nonblock else 0)
        return os.open(f"{self.path}/per_cpu/cpu{cpu}/trace_pipe_raw", flags)

    def stats(self, cpu: int) -> dict[str, str]:
        return tracefs.cpu_stats(self.path, cpu)


@contextmanager
def instance(subbuf_kb: int | None = None, size_kb: int | None = None,
             suffix: str = "") -> Iterator[Instance]:
    with tracefs.instance(f"ringlab-{os.getpid()}{suffix}", Instance) as inst:
        if subbuf_kb is not None:
            _must(inst.set("buffer_subbuf_size_kb", subbuf_kb), "buffer_subbuf_size_kb")
        if size_kb is not None:
            _must(inst.set("buffer_size_kb", size_kb), "buffer_size_kb")
        yield inst


def _must(result: str, what: str) -> None:
    if result != "ok":
        raise OSError(getattr(errno, result, errno.EIO), f"writing {what}: {result}")


@contextmanager
def pinned(cpu: int) -> Iterator[None]:
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def texts(n: int, tag: str = "m") -> list[str]:
    """n distinct marker texts whose sizes put both small (type_len 1..28) and large
    (type_len 0, more than 112 bytes of data) events in the buffer."""
    return [f"{tag}{i:06d} " + "abcdefghijklmnopqrstuvwxyz"[i % 26] * ((i * 37) % 160)
            for i in range(n)]


# --- the mapping -------------------------------------------------------------------------

class TraceMap:
    """The meta page and the sub-buffers of one per-CPU buffer, mapped read-only, as
    libtracefs maps them: the meta page first (its size read from its first word), then the
    nr_subbufs sub-buffers at offset meta_page_size."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        first = Mapping(fd, PAGE)
        size = first.u32(0)
        if size != PAGE:
            first.close()
            first = Mapping(fd, size)
        self.meta_map = first
        m = self.meta()
        self.meta_page_size, self.subbuf_size = m.meta_page_size, m.subbuf_size
        self.nr_subbufs = m.nr_subbufs
        try:
            self.data = Mapping(fd, self.subbuf_size * self.nr_subbufs,
                                offset=self.meta_page_size)
        except OSError:
            first.close()
            raise

    def meta(self) -> abi.TraceBufferMeta:
        return abi.TraceBufferMeta.from_buffer_copy(
            self.meta_map.read(0, ctypes.sizeof(abi.TraceBufferMeta)))

    def get_reader(self) -> None:
        fcntl.ioctl(self.fd, abi.TRACE_MMAP_IOCTL_GET_READER)

    def subbuf(self, sub_id: int) -> bytes:
        return self.data.read(sub_id * self.subbuf_size, self.subbuf_size)

    def close(self) -> None:
        self.data.close()
        self.meta_map.close()

    def __enter__(self) -> TraceMap:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Drain:
    """What one mmap reader consumed: print texts in order, plus the bookkeeping to judge."""
    texts: list[str] = field(default_factory=list)
    pids: set[int] = field(default_factory=set)
    other_events: int = 0
    swaps: int = 0                   # GET_READER calls that gave a new sub-buffer
    ids: list[int] = field(default_factory=list)
    lost_events: list[int] = field(default_factory=list)  # meta reader.lost_events per swap
    stored_lost: list[int] = field(default_factory=list)  # RB_MISSED_STORED counts
    missed_flags: int = 0
    time_ordered: bool = True
    torn: str | None = None
    reader_read_seen: list[tuple[int, int]] = field(default_factory=list)  # (ours, meta's)
    last_ts: int = 0
    bytes: int = 0                   # event bytes consumed

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d.pop("pids")
        d["pids"] = sorted(self.pids)
        return d


class MapReader:
    """Consumes a mapped buffer as libtracefs does: GET_READER, then read the reader
    sub-buffer (meta reader.id) from where this reader stopped on it."""

    def __init__(self, tm: TraceMap, inst: Instance) -> None:
        self.tm, self.inst = tm, inst
        self.last_id: int | None = None
        self.done = 0                      # offset reached on the current reader sub-buffer
        self.drain = Drain()

    def step(self) -> int:
        """One GET_READER and the new events it gives; returns how many."""
        self.tm.get_reader()
        m = self.tm.meta()
        rid = m.reader_id
        try:
            sb = parse_subbuf(self.tm.subbuf(rid), self.inst.header)
        except ParseError as e:
            self.drain.torn = f"sub-buffer {rid}: {e}"
            return 0
        d = self.drain
        if rid != self.last_id:
            self.last_id, self.done = rid, 0
            d.swaps += 1
            d.ids.append(rid)
            d.lost_events.append(m.reader_lost_events)
            d.missed_flags += sb.missed_events
            if sb.lost is not None:
                d.stored_lost.append(sb.lost)
        d.reader_read_seen.append((self.done, m.reader_read))
        new = [ev for ev in sb.events if ev.offset >= self.done]
        for ev in new:
            p = self.inst.prints.decode(ev)
            if p is None:
                d.other_events += 1
                continue
            d.texts.append(p.text.removesuffix("\n"))
            d.pids.add(p.pid)
            if ev.ts < d.last_ts:
                d.time_ordered = False
            d.last_ts = ev.ts
        d.bytes += max(0, sb.end - self.done)
        self.done = sb.end
        return len(new)

    def until_empty(self, idle_steps: int = 2) -> Drain:
        idle = 0
        while idle < idle_steps and self.drain.torn is None:
            idle = 0 if self.step() else idle + 1
        return self.drain


def read_all(fd: int, inst: Instance, size: int = PAGE) -> tuple[list[str], list[int], str | None]:
    """Consume with read() of trace_pipe_raw (O_NONBLOCK): texts, stored lost counts, torn."""
    out: list[str] = []
    lost: list[int] = []
    while True:
        try:
            chunk = os.read(fd, size)
        except BlockingIOError:
            break
        if not chunk:
            break
        try:
            sb = parse_subbuf(chunk, inst.header)
        except ParseError as e:
            return out, lost, str(e)
        if sb.lost is not None:
            lost.append(sb.lost)
        out += [p.text.removesuffix("\n") for e in sb.events
                if (p := inst.prints.decode(e)) is not None]
    return out, lost, None


# --- 6. ABI version ----------------------------------------------------------------------

def check_abi(args: list[str]) -> dict:
    root = tracefs.root()
    return {**abi.detect_abi(root), "release": os.uname().release,
            "cpus": len(os.sched_getaffinity(0))}


def _mainline_or_skip(root: str) -> None:
    found = abi.detect_abi(root)
    if found["abi"] != "mainline":
        raise probelib.Skip(f"mapping ABI is {found['abi']}, these checks need the mainline (v6.10+) "
                   f"trace_mmap.h ABI: {found['why']}")


# --- 1. meta page ------------------------------------------------------------------------

def check_meta(args: list[str]) -> dict:
    """Meta page fields and counters after known marker writes and GET_READER calls."""
    subbuf_kb = int(args[0]) if args else 4
    n = 16
    with instance(subbuf_kb=subbuf_kb, size_kb=64) as inst, pinned(0):
        fd = inst.open_cpu(0)
        with TraceMap(fd) as tm:
            steps = {"mapped": tm.meta().as_dict()}
            padding = tm.meta_map.read(0, tm.meta_page_size)[tm.meta().meta_struct_len:]
            tm.get_reader()
            steps["get_reader_empty"] = tm.meta().as_dict()
            for t in texts(n):
                inst.mark(t)
            tm.get_reader()
            steps["after_writes_get_reader"] = tm.meta().as_dict()
            reader_commit = [parse_subbuf(tm.subbuf(tm.meta().reader_id), inst.header).commit]
            tm.get_reader()
            steps["get_reader_again"] = tm.meta().as_dict()
            for t in texts(n, "b"):
                inst.mark(t)
            tm.get_reader()
            steps["more_writes_get_reader"] = tm.meta().as_dict()
            reader_commit.append(parse_subbuf(tm.subbuf(tm.meta().reader_id),
                                              inst.header).commit)
        os.close(fd)
        return {"steps": steps, "writes": [n, n], "page_size": PAGE,
                "reader_commit": reader_commit,
                "padding_len": len(padding), "padding_nonzero": sum(1 for b in padding if b),
                "buffer_size_kb": int(inst.get("per_cpu/cpu0/buffer_size_kb")),
                "subbuf_size_kb": int(inst.get("buffer_subbuf_size_kb")),
                "header_data_offset": inst.header.data_offset}


# --- 2. data ------------------------------------------------------------------------------

def check_data(args: list[str]) -> dict:
    """Markers written on CPU cpu, read back through the mapping, then the same workload in a
    fresh buffer read with read(). ARGS: SUBBUF_KB CPU [N]"""
    subbuf_kb, cpu = int(args[0]), int(args[1])
    n = int(args[2]) if len(args) > 2 else 300
    if cpu not in os.sched_getaffinity(0):
        raise probelib.Skip(f"the guest has no CPU {cpu}")
    written = texts(n, f"c{cpu}s{subbuf_kb}-")
    size_kb = max(256, subbuf_kb * 8)
    with instance(subbuf_kb=subbuf_kb, size_kb=size_kb) as inst, pinned(cpu):
        fd = inst.open_cpu(cpu)
        with TraceMap(fd) as tm:
            for t in written:
                inst.mark(t)
            mapped = MapReader(tm, inst).until_empty()
            meta = tm.meta().as_dict()
        os.close(fd)
        other_cpu = [c for c in os.sched_getaffinity(0) if c != cpu]
        elsewhere = None
        if other_cpu:  # nothing of ours may land on another CPU's buffer
            fd = inst.open_cpu(other_cpu[0])
            elsewhere = len(read_all(fd, inst)[0])
            os.close(fd)
    with instance(subbuf_kb=subbuf_kb, size_kb=size_kb, suffix="-read") as inst, pinned(cpu):
        for t in written:
            inst.mark(t)
        fd = inst.open_cpu(cpu)
        by_read, _, read_torn = read_all(fd, inst, subbuf_kb * 1024)
        os.close(fd)
    return {"written": len(written), "mapped": mapped.as_dict(), "meta": meta,
            "mapped_equals_written": mapped.texts == written,
            "read_equals_written": by_read == written, "read_count": len(by_read),
            "read_torn": read_torn, "pid": os.getpid(), "cpu": cpu,
            "first_mismatch": _first_mismatch(mapped.texts, written),
            "events_on_other_cpu": elsewhere}


def _first_mismatch(got: list[str], want: list[str]) -> dict | None:
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return {"index": i, "got": g[:40], "want": w[:40]}
    if len(got) != len(want):
        return {"index": min(len(got), len(want)), "got_len": len(got), "want_len": len(want)}
    return None


# --- 3. overflow --------------------------------------------------------------------------

def check_overflow(args: list[str]) -> dict:
    """Write several times what the buffer holds (overwrite mode, the default), then drain:
    written = read + lost, by the meta counters and by reader.lost_events."""
    n = int(args[0]) if args else 2000
    with instance(subbuf_kb=4, size_kb=16) as inst, pinned(0):
        overwrite = inst.get("options/overwrite")
        fd = inst.open_cpu(0)
        with TraceMap(fd) as tm:
            written = texts(n, "o")
            for t in written:
                inst.mark(t)
            before = tm.meta().as_dict()
            drain = MapReader(tm, inst).until_empty()
            after = tm.meta().as_dict()
        os.close(fd)
        stats = inst.stats(0)
    return {"written": n, "overwrite_option": overwrite, "meta_before_drain": before,
            "meta_after_drain": after, "drain": drain.as_dict(), "read_events": len(drain.texts),
            "read_is_newest_suffix": drain.texts == written[len(written) - len(drain.texts):],
            "stats": stats}


def _page_words(tm: TraceMap) -> dict[str, int]:
    """The meta page's last two u64 (trace_abi.META_PAGES_LOST, META_PAGES_TOUCHED)."""
    return {"pages_lost": tm.meta_map.u64(abi.META_PAGES_LOST),
            "pages_touched": tm.meta_map.u64(abi.META_PAGES_TOUCHED)}


def check_page_counters(args: list[str]) -> dict:
    """The meta page's words after `read` (pages_lost, pages_touched in 7.x, Reserved1/2
    before) through a workload of identical marker events, trace_clock counter (no time
    extends: every full sub-buffer holds the same number of events): fresh, after FIRST
    events (no loss) and GET_READER, after SECOND more (overwriting) and GET_READER; with
    meta overrun, the per-CPU stats, and the events a full sub-buffer holds."""
    first = int(args[0]) if args else 200
    second = int(args[1]) if len(args) > 1 else 2000
    text = "p" * 40
    with instance(subbuf_kb=4, size_kb=32) as inst, pinned(0):
        _must(inst.set("trace_clock", "counter"), "trace_clock")
        fd = inst.open_cpu(0)
        with TraceMap(fd) as tm:
            out: dict[str, Any] = {"fresh": {**_page_words(tm), **tm.meta().as_dict()}}
            for _ in range(first):
                inst.mark(text)
            tm.get_reader()
            m = tm.meta()
            sb = parse_subbuf(tm.subbuf(m.reader_id), inst.header)
            sizes = sorted({b.offset - a.offset for a, b in zip(sb.events, sb.events[1:])})
            out["first_subbuf"] = {"events": len(sb.events), "time_extends": sb.time_extends,
                                   "time_stamps": sb.time_stamps, "paddings": sb.paddings,
                                   "event_sizes": sizes, "usable": tm.subbuf_size
                                   - inst.header.data_offset}
            out["after_first"] = {**_page_words(tm), **m.as_dict()}
            for _ in range(second):
                inst.mark(text)
            tm.get_reader()
            out["after_second"] = {**_page_words(tm), **tm.meta().as_dict()}
        os.close(fd)
        out["stats"] = inst.stats(0)
    return {**out, "first": first, "second": second, "nr_subbufs": tm.nr_subbufs,
            "subbuf_size": tm.subbuf_size}


# --- 4. refusals --------------------------------------------------------------------------

def _map_result(fd: int, length: int, prot: int = mmap.PROT_READ, flags: int = mmap.MAP_SHARED,
                offset: int = 0) -> str:
    try:
        Mapping(fd, length, prot, flags, offset).close()
        return "ok"
    except OSError as e:
        return probelib.errname(e)
    except OverflowError:
        return "offset does not fit off_t"


REFUSED = {
    # name: (prot, flags, offset in sub-buffers past the meta page or None for 0)
    "prot_write": (mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED),
    "prot_exec": (mmap.PROT_READ | mmap.PROT_EXEC, mmap.MAP_SHARED),
    "map_private": (mmap.PROT_READ, mmap.MAP_PRIVATE),
}


def _refused(fd: int) -> dict:
    return {name: _map_result(fd, PAGE, prot, flags) for name, (prot, flags) in REFUSED.items()}


# Sub-buffers of two pages for the refusal checks (8 KiB with 4 KiB pages, 32 KiB with 16
# KiB): a page-aligned offset inside a sub-buffer exists only then. With sub-buffers of one
# page (8 KiB asked for on a 16 KiB kernel) "off a sub-buffer boundary" is not page-aligned,
# and mmap refuses it for that alone, before the driver's rule is reached.
def refusal_subbuf_kb(page: int) -> int:
    return max(8, 2 * page // 1024)


REFUSAL_SUBBUF_KB = refusal_subbuf_kb(PAGE)


def check_first_mapping(args: list[str]) -> dict:
    """The refusals on a CPU buffer nobody maps yet. ring_buffer_map() takes another path for
    the first mapping than for further ones (user_mapped), so they are probed separately; a
    refused mapping that "succeeds" here leaves a VMA the kernel never set up."""
    sub = REFUSAL_SUBBUF_KB * 1024
    with instance(subbuf_kb=REFUSAL_SUBBUF_KB, size_kb=8 * REFUSAL_SUBBUF_KB) as inst, pinned(0):
        rw = os.open(f"{inst.path}/per_cpu/cpu0/trace_pipe_raw", os.O_RDWR | os.O_NONBLOCK)
        out = _refused(rw)
        # the meta area is one sub-buffer (v6.12): a page into the first data sub-buffer
        out["off_subbuf_boundary"] = _map_result(rw, PAGE, offset=sub + PAGE)
        out["past_the_end"] = _map_result(rw, PAGE, offset=1 << 30)
        os.close(rw)
        out["after"] = _refusals_left(inst)
        out["map_after"] = "ok" if _remap_works(inst) else "failed"
    return out


def _pipe_fds_of(inst: Instance) -> list[str]:
    """The trace pipe files of inst this process holds open (each holds tr->trace_ref)."""
    return [f for f in tracefs.open_fds_under(inst.path).values() if "trace_pipe" in f]


def _refusals_left(inst: Instance) -> dict:
    """What refused mappings must not leave behind, with nothing mapped: the buffer is not
    "mapped" (GET_READER on a fresh fd: ENODEV), it resizes (ring_buffer_resize(): EBUSY
    while resize_disabled), a snapshot trigger arms and disarms (get_snapshot_map()'s
    tr->mapped back to 0: tracing_arm_snapshot_locked() refuses while it is not), and so
    does a latency tracer where the kernel has one. Each change is undone. The caller holds
    no trace_pipe_raw fd of the instance: one open fd alone makes a tracer switch EBUSY."""
    held = _pipe_fds_of(inst)
    if held:  # the probe's own mistake: every tracer switch below would be EBUSY for it
        raise RuntimeError(f"_refusals_left() called with trace pipe files of the instance "
                           f"open: {', '.join(held)}")
    out: dict[str, Any] = {}
    fd = inst.open_cpu(0)
    out["get_reader"] = _ioctl_result(fd, abi.TRACE_MMAP_IOCTL_GET_READER)
    os.close(fd)
    size = inst.get("buffer_size_kb").split()[0]
    out["resize"] = inst.set("buffer_size_kb", 16 * REFUSAL_SUBBUF_KB)
    inst.set("buffer_size_kb", size)
    if os.path.exists(f"{inst.path}/snapshot"):
        trig = f"{inst.path}/events/sched/sched_switch/trigger"
        out["snapshot_arm"] = write_file(trig, ARMED_SNAPSHOT)
        out["snapshot_disarm"] = write_file(trig, "!" + ARMED_SNAPSHOT)
    listing = f"{inst.path}/available_tracers"
    available = read_file(listing if os.path.exists(listing)
                          else f"{inst.root}/available_tracers").split()
    tracer = next((t for t in LATENCY_TRACERS if t in available), None)
    if tracer:
        out["latency_tracer"] = tracer
        out["latency_tracer_arm"] = inst.set("current_tracer", tracer)
        out["latency_tracer_disarm"] = inst.set("current_tracer", "nop")
    return out


def check_refusals(args: list[str]) -> dict:
    """Every refusal the ABI lists, each with the errno the kernel gave. The fd is opened
    O_RDWR (root may) so that PROT_WRITE reaches the driver's rule; with O_RDONLY the VFS
    refuses it first (EACCES, mm/mmap.c do_mmap)."""
    out: dict = {}
    with instance(subbuf_kb=REFUSAL_SUBBUF_KB, size_kb=8 * REFUSAL_SUBBUF_KB) as inst:
        rw = os.open(f"{inst.path}/per_cpu/cpu0/trace_pipe_raw", os.O_RDWR | os.O_NONBLOCK)
        fd = inst.open_cpu(0)
        out["get_reader_unmapped"] = _ioctl_result(fd, abi.TRACE_MMAP_IOCTL_GET_READER)
        out["prot_write_rdonly_fd"] = _map_result(fd, PAGE, mmap.PROT_READ | mmap.PROT_WRITE)
        with TraceMap(fd) as tm:
            meta, sub, nr = tm.meta_page_size, tm.subbuf_size, tm.nr_subbufs
            out["geometry"] = {"meta_page_size": meta, "subbuf_size": sub, "nr_subbufs": nr}
            out["while_mapped"] = _refused(rw)
            out["mprotect_write"] = errno_result(libc.mprotect(
                tm.meta_map.addr, tm.meta_map.length, mmap.PROT_READ | mmap.PROT_WRITE) == 0)
            out["mprotect_exec"] = errno_result(libc.mprotect(
                tm.meta_map.addr, tm.meta_map.length, mmap.PROT_READ | mmap.PROT_EXEC) == 0)
            # Mapped read-only from an fd open for writing, the VFS leaves VM_MAYWRITE set:
            # only the driver's own rule (__rb_map_vma() clears it) refuses PROT_WRITE.
            with TraceMap(rw) as rwm:
                out["mprotect_write_rw_fd"] = errno_result(libc.mprotect(
                    rwm.meta_map.addr, rwm.meta_map.length,
                    mmap.PROT_READ | mmap.PROT_WRITE) == 0)
            out["noexec_mount"] = tracefs.noexec(inst.root)
            out["unknown_ioctl"] = _ioctl_result(fd, abi._IO("R", 0x21))
            out["wake_ioctl_0"] = _ioctl_result(fd, 0)
            out["offsets"] = {
                "whole_data": _map_result(fd, sub * nr, offset=meta),
                "one_subbuf_short": _map_result(fd, sub * (nr - 1), offset=meta),
                "last_subbuf": _map_result(fd, sub, offset=meta + (nr - 1) * sub),
                "off_subbuf_boundary": _map_result(fd, PAGE, offset=meta + sub // 2),
                "one_subbuf_too_long": _map_result(fd, sub * (nr + 1), offset=meta),
                "past_the_end": _map_result(fd, sub, offset=meta + nr * sub),
                "far_past_the_end": _map_result(fd, PAGE, offset=meta + 1024 * nr * sub),
                "huge": _map_result(fd, PAGE, offset=1 << 46),
                "huge_max": _map_result(fd, PAGE, offset=(1 << 63) - PAGE),
            }
            out["busy_while_mapped"] = _busy_writes(inst)
            # A refused sub-buffer size must leave nothing half-published: the meta page and
            # the file keep the old size ("ring-buffer: Check resize_disabled before
            # publishing the new subbuf order", 7.2.x stable), and the mapping still reads.
            inst.mark("after-busy-writes")
            out["after_busy_writes"] = {
                "meta_subbuf_size": tm.meta().subbuf_size,
                "file_subbuf_kb": int(inst.get("buffer_subbuf_size_kb")),
                "reads": _marker_read(tm, inst, "after-busy-writes")}
        out["after_unmap"] = _busy_writes(inst, undo=True)
        # Both fds are closed first: an open trace_pipe_raw holds tr->trace_ref, and
        # tracing_set_tracer() refuses any tracer switch with EBUSY while it does (v6.12
        # kernel/trace/trace.c, "If trace pipe files are being read"), mapped or not.
        os.close(rw)
        os.close(fd)
        out["after"] = _refusals_left(inst)
        out["map_after"] = "ok" if _remap_works(inst) else "failed"
        fd = inst.open_cpu(0)
        # An armed snapshot (a snapshot trigger) first makes the mapping fail; a snapshot
        # buffer merely allocated by `echo 1 > snapshot` does not arm one (get_snapshot_map()
        # tests tr->snapshot, the count of armed users).
        out["snapshot_file"] = os.path.exists(f"{inst.path}/snapshot")
        if out["snapshot_file"]:
            trig = f"{inst.path}/events/sched/sched_switch/trigger"
            out["set_trigger"] = write_file(trig, ARMED_SNAPSHOT)
            out["map_with_snapshot_trigger"] = _map_result(fd, PAGE)
            out["clear_trigger"] = write_file(trig, "!" + ARMED_SNAPSHOT)
            out["map_after_trigger_cleared"] = _map_result(fd, PAGE)
            out["alloc_snapshot"] = inst.set("snapshot", 1)
            out["map_with_snapshot_allocated"] = _map_result(fd, PAGE)
            inst.set("snapshot", 0)
        os.close(fd)
    return out


def _ioctl_result(fd: int, cmd: int) -> str:
    return probelib.outcome(lambda: fcntl.ioctl(fd, cmd))


def _marker_read(tm: TraceMap, inst: Instance, marker: str) -> str:
    """'ok' if the mapping reads the marker written before, 'not read' if it reads without
    it, else the errno its reading met (a snapshot armed on a mapped buffer, against the rule,
    swaps the mapped buffer away: GET_READER ENODEV): a result for the test to name, never a
    crash of the probe."""
    try:
        return "ok" if marker in MapReader(tm, inst).until_empty().texts else "not read"
    except OSError as e:
        return probelib.errname(e)


def _busy_writes(inst: Instance, undo: bool = False) -> dict:
    """The writes the ABI refuses while a buffer is mapped (EBUSY). With undo, after the
    mapping is gone, each is made and then reverted, so the instance is as before."""
    out = {"buffer_size_kb": inst.set("buffer_size_kb", 128),
           "per_cpu_buffer_size_kb": inst.set("per_cpu/cpu0/buffer_size_kb", 32),
           "buffer_subbuf_size_kb": inst.set("buffer_subbuf_size_kb", 16)}
    if os.path.exists(f"{inst.path}/snapshot"):
        out["snapshot"] = inst.set("snapshot", 1)
        out["snapshot_trigger"] = write_file(f"{inst.path}/events/sched/sched_switch/trigger",
                                             ARMED_SNAPSHOT)
        if undo:
            inst.set("snapshot", 0)
            write_file(f"{inst.path}/events/sched/sched_switch/trigger",
                       "!" + ARMED_SNAPSHOT)
    if undo:
        inst.set("buffer_subbuf_size_kb", REFUSAL_SUBBUF_KB)
        inst.set("buffer_size_kb", 8 * REFUSAL_SUBBUF_KB)
    return out


# --- 5. lifetime --------------------------------------------------------------------------

def _remap_works(inst: Instance, cpu: int = 0) -> bool:
    inst.mark("remap-check")
    fd = inst.open_cpu(cpu)
    try:
        with TraceMap(fd) as tm:
            return "remap-check" in MapReader(tm, inst).until_empty().texts
    finally:
        os.close(fd)


def _lifetime_partial(inst: Instance) -> dict:
    """Unmap one page in the middle of the data area, then the rest."""
    out: dict[str, Any] = {}
    fd = inst.open_cpu(0)
    tm = TraceMap(fd)
    out["partial_munmap"] = errno_result(libc.munmap(tm.data.addr + PAGE, PAGE) == 0)
    inst.mark("after-partial")
    out["get_reader_after_partial"] = _ioctl_result(fd, abi.TRACE_MMAP_IOCTL_GET_READER)
    out["rest_munmap"] = errno_result(libc.munmap(tm.data.addr, tm.data.length) == 0)
    tm.data.addr = None
    tm.meta_map.close()
    os.close(fd)
    out["remap_works"] = _remap_works(inst)
    return out


def _lifetime_fork(inst: Instance) -> dict:
    """fork(): the mapping is not inherited (VM_DONTCOPY) unless MADV_DOFORK clears that;
    then the child's copy and the parent's must both unmap cleanly."""
    out: dict = {}
    fd = inst.open_cpu(0)
    with TraceMap(fd) as tm:
        addr = tm.meta_map.addr
        out["child_without_dofork"] = probelib.in_child(
            lambda: {"meta_page_size": ctypes.c_uint32.from_address(addr).value})
        out["vm_flags"] = probelib.vm_flags(addr)
        out["madv_dofork"] = errno_result(
            libc.madvise(addr, tm.meta_map.length, MADV_DOFORK) == 0)
        out["madv_dofork_control"] = _madv_dofork_control()
        out["madv_dofork_data"] = errno_result(libc.madvise(tm.data.addr, tm.data.length,
                                                            MADV_DOFORK) == 0)
        out["expected_meta_page_size"] = tm.meta().meta_page_size
        out["child_with_dofork"] = probelib.in_child(
            lambda: {"meta_page_size": ctypes.c_uint32.from_address(addr).value})
        inst.mark("after-fork")
        out["parent_reads_after_child_exit"] = \
            "after-fork" in MapReader(tm, inst).until_empty().texts
    os.close(fd)
    out["remap_works"] = _remap_works(inst)
    return out


def _madv_dofork_control() -> dict:
    """What the mm answers MADV_DOFORK on a mapping of another subsystem that is VM_SPECIAL
    too (a perf buffer: VM_DONTEXPAND, VM_PFNMAP on 7.x): whether the refusal is the mm's
    rule for such VMAs rather than tracing's."""
    try:
        fd = perf_events.open_dummy()
    except OSError as e:
        return {"error": probelib.errname(e)}
    try:
        with Mapping(fd, 2 * PAGE, mmap.PROT_READ | mmap.PROT_WRITE) as m:
            return {"vm_flags": probelib.vm_flags(m.addr),
                    "madv_dofork": errno_result(
                        libc.madvise(m.addr, m.length, MADV_DOFORK) == 0)}
    finally:
        os.close(fd)


def _lifetime_twice(inst: Instance) -> dict:
    """Two mappings of one fd and one of a second fd of the same CPU share one buffer."""
    out: dict = {}
    fd, fd2 = inst.open_cpu(0), inst.open_cpu(0)
    a, b = TraceMap(fd), TraceMap(fd)
    try:
        c, out["second_fd_map"] = TraceMap(fd2), "ok"
    except OSError as e:
        c, out["second_fd_map"] = None, probelib.errname(e)
    inst.mark("twice")
    a.get_reader()
    out["same_view"] = a.meta().as_dict() == b.meta().as_dict() and \
        (c is None or c.meta().as_dict() == a.meta().as_dict())
    a.close()
    out["get_reader_after_first_unmapped"] = _ioctl_result(fd, abi.TRACE_MMAP_IOCTL_GET_READER)
    b.close()
    if c:
        out["get_reader_other_fd_while_mapped"] = _ioctl_result(
            fd2, abi.TRACE_MMAP_IOCTL_GET_READER)
        c.close()
    out["get_reader_after_all_unmapped"] = _ioctl_result(fd, abi.TRACE_MMAP_IOCTL_GET_READER)
    os.close(fd)
    os.close(fd2)
    out["remap_works"] = _remap_works(inst)
    return out


def _lifetime_close_first(inst: Instance) -> dict:
    """Closing the fd before munmap: the mapping keeps the file, and stays readable."""
    fd = inst.open_cpu(0)
    tm = TraceMap(fd)
    os.close(fd)
    out = {"meta_readable_after_close": tm.meta().meta_page_size == tm.meta_page_size,
           "rmdir_while_mapped_fd_closed": probelib.outcome(lambda: os.rmdir(inst.path))}
    tm.close()
    out["remap_works"] = _remap_works(inst)
    return out


def _lifetime_instances(inst: Instance) -> dict:
    """Instances made and removed while one is mapped; the mapped one is busy."""
    out: dict[str, Any] = {}
    fd = inst.open_cpu(0)
    with TraceMap(fd):
        other = f"{inst.root}/instances/ringlab-{os.getpid()}-other"
        out["mkdir_other"] = probelib.outcome(lambda: os.mkdir(other))
        out["rmdir_other"] = probelib.outcome(lambda: os.rmdir(other))
        out["rmdir_mapped_instance"] = probelib.outcome(lambda: os.rmdir(inst.path))
    os.close(fd)
    out["remap_works"] = _remap_works(inst)
    return out


def _lifetime_rounds(inst: Instance, rounds: int = 200) -> dict:
    """Many map/unmap rounds leave nothing behind: the buffer still resizes."""
    for _ in range(rounds):
        fd = inst.open_cpu(0)
        TraceMap(fd).close()
        os.close(fd)
    return {"rounds": rounds, "resize_after": inst.set("buffer_size_kb", 32),
            "remap_works": _remap_works(inst)}


def _lifetime_moved(inst: Instance) -> dict:
    """The buffer's only mapping, its meta page, moved whole (mremap MAYMOVE|FIXED, which
    VM_DONTEXPAND does not forbid): the buffer must stay mapped through the move (GET_READER
    works, the meta page reads right at its new address), and the moved mapping's munmap must
    be the last one (the buffer resizes again). Then the data area maps and reads as usual."""
    out: dict[str, Any] = {}
    fd = inst.open_cpu(0)
    tm = TraceMap(fd)
    tm.data.close()  # the meta page alone: its move is all that keeps the buffer mapped
    out["move"], new, _ = probelib.remap(tm.meta_map.addr, tm.meta_map.length, "move")
    if out["move"] == "ok":
        tm.meta_map.addr = new
    out["get_reader_after_move"] = _ioctl_result(fd, abi.TRACE_MMAP_IOCTL_GET_READER)
    out["meta_after_move"] = {"meta_page_size": tm.meta().meta_page_size,
                              "nr_subbufs": tm.meta().nr_subbufs}
    out["meta_before"] = {"meta_page_size": tm.meta_page_size, "nr_subbufs": tm.nr_subbufs}
    tm.meta_map.close()
    out["resize_after"] = inst.set("buffer_size_kb", 32)
    os.close(fd)
    out["remap_works"] = _remap_works(inst)
    return out


RESHAPES = ("shrinking_mremap", "map_fixed_over_part", "mprotect_part", "grow_meta",
            "grow_meta_maymove", "grow_data", "grow_data_maymove", "dontunmap_move_data")


def _reshape_ops(tm: TraceMap, moved: list[tuple[int, int]]) -> dict:
    """Each of RESHAPES: a split of the data mapping at its second page, or a growth of a
    mapping by a page (in place, or moving: where it went, and its length, is appended to
    `moved`), or a move of the data area keeping the old range (MREMAP_DONTUNMAP), as a
    callable returning 'ok' or the errno's name."""
    data, meta = tm.data, tm.meta_map
    second = ctypes.c_void_p(data.addr + PAGE)

    def grow(m: Mapping, flags: int, by: int = PAGE) -> str:
        new = libc.mremap(ctypes.c_void_p(m.addr), m.length, m.length + by, flags, None)
        if mapped(new):
            moved.append((new, m.length + by))
        return errno_result(mapped(new))

    return {
        "shrinking_mremap": lambda: errno_result(mapped(libc.mremap(
            ctypes.c_void_p(data.addr), data.length, data.length - PAGE, 0, None))),
        "map_fixed_over_part": lambda: errno_result(mapped(libc.mmap(
            second, PAGE, mmap.PROT_READ, mmap.MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0))),
        "mprotect_part": lambda: errno_result(libc.mprotect(second, PAGE, 0) == 0),  # PROT_NONE
        "grow_meta": lambda: grow(meta, 0),
        "grow_meta_maymove": lambda: grow(meta, MREMAP_MAYMOVE),
        "grow_data": lambda: grow(data, 0),
        "grow_data_maymove": lambda: grow(data, MREMAP_MAYMOVE),
        "dontunmap_move_data": lambda: grow(data, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, 0),
    }


def _one_reshape(inst: Instance, name: str) -> dict:
    """One of RESHAPES on a fresh mapping: its result, the VMAs of the meta page and data
    area before and after, whether GET_READER still gives what was written, then munmap of
    all of it (wherever a growth moved it)."""
    fd = inst.open_cpu(0)
    tm = TraceMap(fd)
    spans = [(tm.meta_map.addr, tm.meta_map.length), (tm.data.addr, tm.data.length)]
    before = [probelib.vmas_in(a, n) for a, n in spans]
    moved: list[tuple[int, int]] = []
    ctypes.set_errno(0)
    result = _reshape_ops(tm, moved)[name]()
    after = [probelib.vmas_in(a, n) for a, n in spans]
    inst.mark(f"after-{name}")
    reads = "mapping changed"
    if after == before:
        reads = "ok" if f"after-{name}" in MapReader(tm, inst).until_empty().texts \
            else "marker not read"
    for a, n in spans + moved:
        libc.munmap(ctypes.c_void_p(a), n)
    tm.data.addr = tm.meta_map.addr = None
    os.close(fd)
    return {"result": result, "vmas_before": before, "vmas_after": after, "reads_after": reads}


def _lifetime_reshape(inst: Instance) -> dict:
    """Each of RESHAPES in its own child process: a kernel that lets a mapping grow or split
    where it must not can answer the next touch with SIGBUS, which is then this reshape's
    result ({"signal": "SIGBUS"}), not the end of the probe; the child's exit unmaps whatever
    the reshape left."""
    out: dict[str, Any] = {name: probelib.in_child(_one_reshape, inst, name)
                           for name in RESHAPES}
    out["remap_works"] = _remap_works(inst)
    return out


LIFETIME = {"partial": _lifetime_partial, "fork": _lifetime_fork, "twice": _lifetime_twice,
            "close-first": _lifetime_close_first, "instances": _lifetime_instances,
            "rounds": _lifetime_rounds, "reshape": _lifetime_reshape, "moved": _lifetime_moved}


def check_lifetime(args: list[str]) -> dict:
    """ARGS: one of partial, fork, twice, close-first, instances, rounds, reshape, moved.
    After each, the instance must still be removable (no reference left behind)."""
    part = args[0] if args else ""
    if part not in LIFETIME:
        raise probelib.Skip(f"lifetime needs one of: {', '.join(LIFETIME)}")
    with instance(subbuf_kb=4, size_kb=64) as inst, pinned(0):
        out = LIFETIME[part](inst)
        path = inst.path
    out["instance_removed"] = not os.path.exists(path)
    return {"part": part, **out}


# --- latency tracers ----------------------------------------------------------------------

# The tracers with use_max_tr set (kernel/trace/trace_irqsoff.c, trace_sched_wakeup.c): they
# swap the buffer with its snapshot (update_max_tr()), which a mapped buffer cannot allow.
LATENCY_TRACERS = ("irqsoff", "preemptoff", "preemptirqsoff", "wakeup", "wakeup_rt",
                   "wakeup_dl")


def check_latency_tracer(args: list[str]) -> dict:
    """Switching an instance to a latency tracer while its buffer is mapped, and after
    munmap. Skips, saying which tracers the kernel has, when it has none of them."""
    with instance(subbuf_kb=4, size_kb=64) as inst, pinned(0):
        listing = f"{inst.path}/available_tracers"  # an instance lists what it may use
        available = read_file(listing if os.path.exists(listing)
                              else f"{inst.root}/available_tracers").split()
        tracer = next((t for t in LATENCY_TRACERS if t in available), None)
        if tracer is None:
            raise probelib.Skip(
                f"kernel has no latency tracer (use_max_tr: {', '.join(LATENCY_TRACERS)}) in "
                f"available_tracers: {' '.join(available) or 'none'} (CONFIG_IRQSOFF_TRACER, "
                f"CONFIG_PREEMPT_TRACER, CONFIG_SCHED_TRACER off)")
        out: dict[str, Any] = {"tracer": tracer, "current_before": inst.get("current_tracer")}
        fd = inst.open_cpu(0)
        with TraceMap(fd) as tm:
            out["set_while_mapped"] = inst.set("current_tracer", tracer)
            out["current_while_mapped"] = inst.get("current_tracer")
            inst.mark("after-latency-tracer")
            out["reads_while_mapped"] = \
                "after-latency-tracer" in MapReader(tm, inst).until_empty().texts
        os.close(fd)
        out["set_after_unmap"] = inst.set("current_tracer", tracer)
        out["current_after_unmap"] = inst.get("current_tracer")
        fd = inst.open_cpu(0)
        out["map_with_latency_tracer"] = _map_result(fd, PAGE)
        os.close(fd)
        out["back_to_nop"] = inst.set("current_tracer", "nop")
        # The tracer armed the snapshot and nop disarmed it (tr->snapshot back to 0), and the
        # refused switch took nothing: the buffer maps again.
        fd = inst.open_cpu(0)
        out["map_after_nop"] = _map_result(fd, PAGE)
        os.close(fd)
    return out


# --- 7. readers side by side ---------------------------------------------------------------

def check_readers(args: list[str]) -> dict:
    """An mmap reader and a read() reader (another fd) of the same CPU buffer, taking turns.
    Both consume from the one per-CPU reader position: read() on a mapped buffer copies
    events out instead of swapping sub-buffers (ring_buffer_read_page(): cpu_buffer->mapped),
    and GET_READER consumes what lies below meta reader.read. So no event may reach both
    readers, and none may be lost."""
    rounds = int(args[0]) if args else 20
    with instance(subbuf_kb=4, size_kb=64) as inst, pinned(0):
        fd, rfd = inst.open_cpu(0), inst.open_cpu(0)
        written: list[str] = []
        by_map: set[str] = set()
        by_read: list[str] = []
        read_after_map, torn = [], None
        with TraceMap(fd) as tm:
            for r in range(rounds):
                batch = texts(7 + 5 * (r % 4), f"r{r:03d}-")
                written += batch
                for t in batch:
                    inst.mark(t)
                if r % 3 == 2:
                    got, _, torn = read_all(rfd, inst)
                    read_after_map += [t for t in got if t in by_map]
                    by_read += got
                else:
                    tm.get_reader()
                    m = tm.meta()
                    sb = parse_subbuf(tm.subbuf(m.reader_id), inst.header)
                    by_map.update(p.text.removesuffix("\n") for e in sb.events
                                  if e.offset < inst.header.data_offset + m.reader_read
                                  and (p := inst.prints.decode(e)) is not None)
            got, _, _ = read_all(rfd, inst)
            read_after_map += [t for t in got if t in by_map]
            by_read += got
            tm.get_reader()
            final = tm.meta().as_dict()
            try:
                os.read(fd, PAGE)
                same_fd_read = "ok"
            except OSError as e:
                same_fd_read = probelib.errname(e)
            splice = _splice_once(rfd)
        os.close(fd)
        os.close(rfd)
    seen = by_map | set(by_read)
    return {"written": len(written), "by_map": len(by_map), "by_read": len(by_read),
            "read_duplicates": len(by_read) - len(set(by_read)),
            "read_returned_mapped_events": len(read_after_map),
            "missing": len(set(written) - seen), "foreign": len(seen - set(written)),
            "torn": torn, "meta_final": final, "read_on_mapped_fd": same_fd_read,
            "splice_on_mapped": splice}


def read_answer(fd: int) -> str:
    """What one read() of up to four pages answers: "N bytes" (0: the end of file) or the
    errno's name."""
    try:
        return f"{len(os.read(fd, PAGE * 4))} bytes"
    except OSError as e:
        return probelib.errname(e)


def check_reader_after_other_close(args: list[str]) -> dict:
    """read() of an empty trace_pipe_raw by an fd that stays open, while another descriptor
    of the same open file is closed: a forked child's inherited copy at its exit, and
    close(dup(fd)). read(2) says 0 is the end of file; an open trace_pipe_raw with nothing in
    it answers EAGAIN (O_NONBLOCK) or waits (tracing_buffers_read()). Also the answer on a
    fresh open of the same buffer, and how long a blocking read waits (alarm after 1 s)."""
    import signal
    import time

    out: dict = {}
    with instance(subbuf_kb=4, size_kb=16) as inst, pinned(0):
        fd = inst.open_cpu(0)
        out["before"] = read_answer(fd)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        out["after_child_exit"] = read_answer(fd)
        os.close(fd)
        fd = inst.open_cpu(0)
        out["fresh_open"] = read_answer(fd)
        os.close(os.dup(fd))
        out["after_dup_closed"] = read_answer(fd)
        os.close(fd)
        fd = inst.open_cpu(0, nonblock=False)
        os.close(os.dup(fd))
        old = signal.signal(signal.SIGALRM, lambda *a: None)
        signal.alarm(1)
        start = time.monotonic()
        out["blocking_after_dup_closed"] = read_answer(fd)
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        out["blocking_waited_s"] = round(time.monotonic() - start, 2)
        os.close(fd)
    return out


def check_subbuf_change_reader(args: list[str]) -> dict:
    """An open trace_pipe_raw (O_NONBLOCK) across a new buffer_subbuf_size_kb, with one event
    in the buffer at the change (ring_buffer_subbuf_order_set() frees the pages it was on):
    what read() answers, twice, what per_cpu/cpu0/stats says is there, and GET_READER of a
    mapping of it; then the same with no event at the change, and with the size unchanged."""
    out: dict = {}
    for name, first, second, event in (("changed", 8, 4, True), ("changed_empty", 8, 4, False),
                                       ("unchanged", 8, 8, True)):
        with instance(subbuf_kb=first, size_kb=32, suffix=f"-{name}") as inst, pinned(0):
            fd = inst.open_cpu(0)
            if event:
                inst.mark("before the change\n")
            _must(inst.set("buffer_subbuf_size_kb", second), "buffer_subbuf_size_kb")
            out[name] = {"read": read_answer(fd), "again": read_answer(fd),
                         "entries": int(inst.stats(0).get("entries", "-1"))}
            os.close(fd)
    # The mapped reader, with no read() before it (a read swaps the reader page): GET_READER
    # after the change (a WARN here is the test's kernel log's, judged by the plugin).
    with instance(subbuf_kb=4, size_kb=128, suffix="-mapped") as inst, pinned(0):
        inst.mark("before the change\n")
        fd = inst.open_cpu(0)
        _must(inst.set("buffer_subbuf_size_kb", 8), "buffer_subbuf_size_kb")
        with TraceMap(fd) as tm:
            out["changed"]["get_reader"] = probelib.outcome(tm.get_reader)
        os.close(fd)
    return out


# Events of 100 bytes of text: a print event of 128 bytes (4 + 4 length + 8 trace_entry + 8
# ip + the text, its newline and NUL, rounded to 4). 200 of them go round an 8 KiB buffer of
# 4 KiB sub-buffers (3 of them) and then some: about 124 overwritten.
SUBBUF_TEXT = 100
SUBBUF_EVENT = 128
OVERRUN_MARKERS = 200


def _mark_n(inst: Instance, n: int, tag: str) -> None:
    for i in range(n):
        inst.mark(f"{tag}{i:05d} ".ljust(SUBBUF_TEXT, "x"))


def _first_subbuf(inst: Instance, sb_bytes: bytes) -> dict:
    """What a reader sub-buffer (or a page read()) says: its events and the missed-events
    flag (RB_MISSED_EVENTS) with the count stored after the data (RB_MISSED_STORED)."""
    sb = parse_subbuf(sb_bytes, inst.header)
    return {"events": len(sb.events), "missed": sb.missed_events, "stored_lost": sb.lost,
            "texts": [p.text.split(" ")[0] for e in sb.events
                      if (p := inst.prints.decode(e)) is not None][:3]}


def check_subbuf_change_missed(args: list[str]) -> dict:
    """A buffer that overran (OVERRUN_MARKERS unread events in an 8 KiB buffer of 4 KiB
    sub-buffers), then a new buffer_subbuf_size_kb (8), which discards everything
    (ftrace.rst: "any data in the ring buffer ... will be discarded") and installs empty
    pages (ring_buffer_subbuf_order_set()), then new events, fewer than the new pages hold:
    what the first reader after the change is told was missed. Three readers, each in its own
    instance: `read` (read() of trace_pipe_raw after one event), `mapped_on_writer` (one
    event, mmap, GET_READER: the reader swaps in the page the writer is on) and `mapped`
    (events past the first sub-buffer, mmap, GET_READER). Each: the per-CPU stats before the
    change, the first sub-buffer's flag and stored count, and for the mapped ones the meta
    page after GET_READER (reader.lost_events, entries, overrun, read)."""
    out: dict[str, Any] = {"markers": OVERRUN_MARKERS, "text_bytes": SUBBUF_TEXT}
    for name in ("read", "mapped_on_writer", "mapped"):
        with instance(subbuf_kb=4, size_kb=8, suffix=f"-{name}") as inst, pinned(0):
            _mark_n(inst, OVERRUN_MARKERS, "o")
            stats = inst.stats(0)
            seen: dict[str, Any] = {"overrun_before": int(stats.get("overrun", "-1")),
                                    "entries_before": int(stats.get("entries", "-1"))}
            _must(inst.set("buffer_subbuf_size_kb", 8), "buffer_subbuf_size_kb")
            # more than one 8 KiB sub-buffer (the writer moves on), less than the ring's two
            after = 80 if name == "mapped" else 1
            _mark_n(inst, after, "n")
            seen["written_after"] = after
            fd = inst.open_cpu(0)
            try:
                if name == "read":
                    try:
                        seen.update(_first_subbuf(inst, os.read(fd, 8192)))
                        seen["got"] = "ok"
                    except OSError as e:
                        seen["got"] = probelib.errname(e)
                else:
                    with TraceMap(fd) as tm:
                        seen["got"] = probelib.outcome(tm.get_reader)
                        m = tm.meta()
                        seen["meta"] = {k: v for k, v in m.as_dict().items() if k in (
                            "reader_lost_events", "reader_id", "reader_read", "entries",
                            "overrun", "read")}
                        seen.update(_first_subbuf(inst, tm.subbuf(m.reader_id)))
            finally:
                os.close(fd)
            seen["stats_after"] = {k: inst.stats(0).get(k) for k in ("entries", "overrun")}
            out[name] = seen
    return out


def _poll_mask(fd: int, timeout_ms: int) -> int:
    """poll(POLLIN) of one fd: the events it reported (0: none before the timeout)."""
    import select
    p = select.poll()
    p.register(fd, select.POLLIN)
    got = p.poll(timeout_ms)
    return got[0][1] if got else 0


def check_subbuf_change_watermark(args: list[str]) -> dict:
    """buffer_percent 50 (ftrace.rst: a poll()/blocking read of per_cpu/cpuN/trace_pipe_raw
    waits until "roughly half of the ring buffer sub-buffers are full"), in two instances
    that end alike: `flipped` writes and reads one event (a fresh open of trace_pipe_raw,
    O_NONBLOCK) and then sets a new buffer_subbuf_size_kb, FLIPS times (8, 4, 8, 4 KiB), then
    writes and reads one more; `control` sets the same sizes on the empty buffer first, then
    writes and reads its FLIPS + 1 events. Both hold nothing, with the same geometry and the
    writer on the reader's page; then each is filled in 3/2 x nr_pages steps of just under
    half a sub-buffer (to about 70% of its sub-buffers, without overwriting) and polled
    (POLLIN, TIMEOUT_MS) after each step. With the meta page's counters (a mapping made
    before and after the fill). ARGS: [FLIPS [TIMEOUT_MS]]"""
    flips = int(args[0]) if args else 4
    timeout_ms = int(args[1]) if len(args) > 1 else 20
    sizes = [8 if i % 2 == 0 else 4 for i in range(flips)]
    out: dict[str, Any] = {"flips": sizes, "percent": 50, "timeout_ms": timeout_ms}
    for name in ("control", "flipped"):
        with instance(subbuf_kb=4, size_kb=28, suffix=f"-{name}") as inst, pinned(0):
            if not os.path.exists(f"{inst.path}/buffer_percent"):
                raise probelib.Skip("the instance has no buffer_percent file")
            _must(inst.set("buffer_percent", 50), "buffer_percent")
            if name == "control":
                for kb in sizes:
                    _must(inst.set("buffer_subbuf_size_kb", kb), "buffer_subbuf_size_kb")
            reads = []
            for i in range(flips + 1):      # one event written and read, FLIPS + 1 times
                inst.mark(f"w{i}\n")
                fd = inst.open_cpu(0)
                reads.append(read_answer(fd))
                os.close(fd)
                if name == "flipped" and i < flips:
                    _must(inst.set("buffer_subbuf_size_kb", sizes[i]), "buffer_subbuf_size_kb")
            seen: dict[str, Any] = {"reads": reads,
                                    "subbuf_kb": int(inst.get("buffer_subbuf_size_kb"))}
            fd = inst.open_cpu(0)
            try:
                with TraceMap(fd) as tm:
                    nr_pages, subbuf_size = tm.nr_subbufs - 1, tm.subbuf_size
                    seen["before_fill"] = {**_page_words(tm), **{
                        k: v for k, v in tm.meta().as_dict().items()
                        if k in ("entries", "overrun", "read")}}
                # just under half a sub-buffer of events a step, to about 70% of the ring
                per_step = (subbuf_size - inst.header.data_offset) // 2 // SUBBUF_EVENT
                steps = 3 * nr_pages // 2
                polls = []
                for s in range(steps):
                    _mark_n(inst, per_step, f"s{s:02d}-")
                    polls.append(_poll_mask(fd, timeout_ms))
                seen.update(nr_pages=nr_pages, subbuf_size=subbuf_size, per_step=per_step,
                            steps=steps, polls=polls,
                            first_pollin=next((i + 1 for i, ev in enumerate(polls)
                                               if ev & 1), None),
                            stats_after=inst.stats(0))
                with TraceMap(fd) as tm:
                    seen["after_fill"] = {**_page_words(tm), **{
                        k: v for k, v in tm.meta().as_dict().items()
                        if k in ("entries", "overrun", "read")}}
            finally:
                os.close(fd)
            out[name] = seen
    return out


def check_marker_beside_snapshot_swap(args: list[str]) -> dict:
    """trace_marker writes on CPU 0 while `echo 1 > snapshot` swaps the instance's buffer
    with its snapshot from the last CPU, for a few seconds, nothing mapped: the writer's read
    of tr->array_buffer.buffer against update_max_tr()'s swap. How many of each were made;
    a data race there is the kernel log's (a race kernel's KCSAN), judged by the plugin."""
    seconds = float(args[0]) if args else 3.0
    last = max(os.sched_getaffinity(0))
    with instance(size_kb=64) as inst, _snapshot_allocated(inst) as snap:
        marker = os.open(f"{inst.path}/trace_marker", os.O_WRONLY)
        try:
            made = _loops(seconds, [(0, lambda: os.write(marker, b"m"), "markers"),
                                    (last, lambda: os.write(snap, b"1"), "swaps")])
        finally:
            os.close(marker)
    return dict(made, cpus=last + 1)


@contextmanager
def _snapshot_allocated(inst: Instance) -> Iterator[int]:
    """The instance's snapshot allocated once (each `echo 1` then swaps, no more), and its
    file open for writing; freed after."""
    if not os.path.exists(f"{inst.path}/snapshot"):
        raise probelib.Skip("no snapshot file in a tracefs instance (CONFIG_TRACER_SNAPSHOT)")
    _must(inst.set("snapshot", 1), "snapshot")
    snap = os.open(f"{inst.path}/snapshot", os.O_WRONLY)
    try:
        yield snap
    finally:
        os.close(snap)
        inst.set("snapshot", 0)


def check_pipe_raw_read_beside_snapshot_swap(args: list[str]) -> dict:
    """Non-blocking read()s of CPU 0's (empty) trace_pipe_raw, GET_READERs of it unmapped
    (ENODEV) and reads of its stats file on CPU 0, while `echo 1 > snapshot` swaps the
    instance's buffer with its snapshot from the last CPU, for a few seconds:
    tracing_buffers_read(), trace_empty(), tracing_buffers_ioctl() and tracing_stats_read()
    reload tr->array_buffer.buffer against update_max_tr()'s swap. No
    marker written: that writer races the swap too (trace-marker-write-races-snapshot-swap,
    a symptom of its own). How many of each; a data race there is the kernel log's (a race
    kernel's KCSAN), judged by the plugin."""
    seconds = float(args[0]) if args else 3.0
    last = max(os.sched_getaffinity(0))
    with instance(size_kb=64) as inst, _snapshot_allocated(inst) as snap:
        raw = os.open(f"{inst.path}/per_cpu/cpu0/trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
        stats = os.open(f"{inst.path}/per_cpu/cpu0/stats", os.O_RDONLY)
        page = os.sysconf("SC_PAGE_SIZE")
        try:    # each read() of the empty buffer is EAGAIN: counted as refused
            made = _loops(seconds, [(0, lambda: os.read(raw, page), "reads"),
                                    (0, lambda: os.pread(stats, page, 0), "stats"),
                                    (0, lambda: fcntl.ioctl(raw, abi.TRACE_MMAP_IOCTL_GET_READER),
                                     "get_readers"),
                                    (last, lambda: os.write(snap, b"1"), "swaps")])
        finally:
            os.close(stats)
            os.close(raw)
    return dict(made, cpus=last + 1)


def check_map_beside_snapshot_arm(args: list[str]) -> dict:
    """mmap()s of CPU 0's trace_pipe_raw on CPU 0, each with one GET_READER, while the last
    CPU arms the snapshot (`echo 1 > snapshot`: allocated, swapped, disarmed) and frees it
    (`echo 0`) in a loop, for a few seconds. A mapping and an armed snapshot exclude each
    other (trace_snapshot.c: get_snapshot_map() refuses while tr->snapshot counts an arm,
    tracing_arm_snapshot_locked() while tr->mapped counts a mapping, both under
    snapshot_trigger_lock): each mmap() or arm that loses is EBUSY, and a mapping that was
    made keeps its buffer (GET_READER never ENODEV) and leaves it resizable once unmapped.
    The snapshot is freed each round, so each arm allocates it: the window race mutant 067
    opens. What each side got, by result."""
    seconds = float(args[0]) if args else 3.0
    last = max(os.sched_getaffinity(0))
    import threading
    got: dict[str, dict[str, int]] = {"maps": {}, "get_reader": {}, "arms": {}, "frees": {}}
    stop = time.monotonic() + seconds

    def count(side: str, result: str) -> None:
        got[side][result] = got[side].get(result, 0) + 1

    with instance(size_kb=1024) as inst:
        if not os.path.exists(f"{inst.path}/snapshot"):
            raise probelib.Skip("no snapshot file in a tracefs instance (CONFIG_TRACER_SNAPSHOT)")
        fd = inst.open_cpu(0)
        snap = os.open(f"{inst.path}/snapshot", os.O_WRONLY)

        def mapper() -> None:
            os.sched_setaffinity(0, {0})
            while time.monotonic() < stop:
                try:
                    tm = TraceMap(fd)
                except OSError as e:
                    count("maps", errno.errorcode.get(e.errno or 0, str(e.errno)))
                    continue
                count("maps", "ok")
                try:
                    count("get_reader", _ioctl_result(fd, abi.TRACE_MMAP_IOCTL_GET_READER))
                finally:
                    tm.close()

        def armer() -> None:
            os.sched_setaffinity(0, {last})
            while time.monotonic() < stop:
                for side, value in (("arms", b"1"), ("frees", b"0")):
                    try:
                        os.write(snap, value)
                        count(side, "ok")
                    except OSError as e:
                        count(side, errno.errorcode.get(e.errno or 0, str(e.errno)))
        threads = [threading.Thread(target=mapper), threading.Thread(target=armer)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            os.close(snap)
            os.close(fd)
        # nothing mapped now: the buffer must take a new size (ring_buffer_resize() refuses
        # a mapped one only)
        resize = inst.set("buffer_size_kb", 512)
    return dict(got, resize_after=resize, cpus=last + 1)


def check_stats_beside_reader(args: list[str]) -> dict:
    """read()s of CPU 0's per_cpu stats from the last CPU while CPU 0 writes markers and
    consumes them through its trace_pipe_raw, for a few seconds: tracing_stats_read()'s
    lockless counters (ring_buffer_read_events_cpu(), ring_buffer_entries_cpu(), ...) against
    the reader's rb_advance_reader() under reader_lock. How many of each; a data race is the
    kernel log's (a race kernel's KCSAN), judged by the plugin."""
    seconds = float(args[0]) if args else 3.0
    last = max(os.sched_getaffinity(0))
    with instance(size_kb=64) as inst:
        marker = os.open(f"{inst.path}/trace_marker", os.O_WRONLY)
        raw = inst.open_cpu(0)
        page = os.sysconf("SC_PAGE_SIZE")

        def mark_and_consume() -> None:
            os.write(marker, b"m" * 32)
            os.read(raw, page)  # a part-filled page: copied event by event (rb_advance_reader)
        try:
            made = _loops(seconds, [(0, mark_and_consume, "consumed"),
                                    (last, lambda: inst.stats(0), "stats")])
        finally:
            os.close(raw)
            os.close(marker)
    return dict(made, cpus=last + 1)


def check_events_enabled_beside_switches(args: list[str]) -> dict:
    """The instance's sched events enabled and disabled in a loop from the last CPU, and a
    trigger that never fires set and removed on sched_switch beside it, while CPU 0 switches
    tasks (1 ms sleeps), for a few seconds: each switch or wake-up runs the events' handlers,
    which read the event file's flags without a lock (trace_event_buffer_lock_reserve(),
    trace_event_buffer_commit()) while enabling sets its bits and a trigger's registration
    its TRIGGER_MODE. How many of each; a data race is the kernel log's (a race kernel's
    KCSAN), judged by the plugin."""
    seconds = float(args[0]) if args else 3.0
    last = max(os.sched_getaffinity(0))
    with instance(size_kb=64) as inst:
        enable = f"{inst.path}/events/sched/enable"
        trigger = f"{inst.path}/events/sched/sched_switch/trigger"
        flips = iter(range(1 << 62))
        sets = iter(range(1 << 62))

        def flip() -> None:
            write_file(enable, f"{next(flips) % 2 ^ 1}\n")

        def set_trigger() -> None:
            write_file(trigger, ("", "!")[next(sets) % 2] + NEVER_TRIGGER)
        try:
            made = _loops(seconds, [(0, lambda: time.sleep(0.001), "switches"),
                                    (last, flip, "flips"), (last, set_trigger, "triggers")])
        finally:
            write_file(trigger, "!" + NEVER_TRIGGER)
            write_file(enable, "0\n")
    return dict(made, cpus=last + 1)


def _loops(seconds: float, loops: list[tuple[int, Callable[[], object], str]]) -> dict:
    """Each (cpu, one round, name) a thread pinned to `cpu`, rounds until `seconds` pass:
    {name: rounds done, "refused": rounds an OSError ended}."""
    import threading
    made = {name: 0 for _, _, name in loops}
    made["refused"] = 0
    stop = time.monotonic() + seconds

    def loop(cpu: int, once: Callable[[], object], name: str) -> None:
        os.sched_setaffinity(0, {cpu})
        while time.monotonic() < stop:
            try:
                once()
                made[name] += 1
            except OSError:
                made["refused"] += 1
    threads = [threading.Thread(target=loop, args=a) for a in loops]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return made


def check_two_marker_writers_on_one_cpu(args: list[str]) -> dict:
    """Two trace_marker writers pinned to the same CPU, for a few seconds: each copies its
    text into the CPU's one user buffer with preemption enabled, and retries when the CPU
    switched tasks meanwhile (kernel/trace/trace.c trace_user_fault_read()). How many
    markers each wrote; a data race is the kernel log's, judged by the plugin."""
    seconds = float(args[0]) if args else 3.0
    last = max(os.sched_getaffinity(0))
    with instance(size_kb=64) as inst:
        fds = [os.open(f"{inst.path}/trace_marker", os.O_WRONLY) for _ in range(2)]
        try:
            made = _loops(seconds, [(last, lambda: os.write(fds[0], b"a" * 64), "first"),
                                    (last, lambda: os.write(fds[1], b"b" * 64), "second")])
        finally:
            for fd in fds:
                os.close(fd)
    return made


def check_full_waiter_beside_nested_writers(args: list[str]) -> dict:
    """A poll() for a buffer_percent-full CPU 0 buffer from the last CPU, while CPU 0 writes
    trace_marker events in a task and the instance's timer and sched events from its
    interrupts, for a few seconds: each commit's rb_wakeups() reads and writes
    cpu_buffer->last_pages_touch (kernel/trace/ring_buffer.c) while a full waiter is
    pending, an interrupt's commit nested inside a task's on the same CPU. How many of each;
    a data race is the kernel log's (a race kernel's KCSAN), judged by the plugin."""
    seconds = float(args[0]) if args else 3.0
    last = max(os.sched_getaffinity(0))
    with instance(size_kb=64) as inst:
        inst.set("buffer_percent", 50)
        events = [f"{inst.path}/events/sched/enable",
                  f"{inst.path}/events/timer/hrtimer_expire_entry/enable"]
        for e in events:
            write_file(e, "1\n")
        marker = os.open(f"{inst.path}/trace_marker", os.O_WRONLY)
        raw = os.open(f"{inst.path}/per_cpu/cpu0/trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
        poller = select.poll()
        poller.register(raw, select.POLLIN)
        try:
            made = _loops(seconds, [(0, lambda: os.write(marker, b"m" * 64), "markers"),
                                    (last, lambda: poller.poll(10), "polls")])
        finally:
            for e in events:
                write_file(e, "0\n")
            os.close(raw)
            os.close(marker)
    return dict(made, cpus=last + 1)


def check_mapped_reader_beside_writer(args: list[str]) -> dict:
    """A trace_marker writer on the last CPU while a reader on CPU 0 maps that CPU's buffer
    and swaps sub-buffers with GET_READER, for a few seconds: the lockless writer against the
    reader's swap under reader_lock (kernel/trace/ring_buffer.c __rb_get_reader_page()
    against rb_move_tail() and rb_commit()), which the ring buffer's design allows. How many
    of each; a data race is the kernel log's, judged by the plugin."""
    seconds = float(args[0]) if args else 3.0
    last = max(os.sched_getaffinity(0))
    with instance(size_kb=64) as inst:
        marker = os.open(f"{inst.path}/trace_marker", os.O_WRONLY)
        fd = inst.open_cpu(last)
        try:
            with TraceMap(fd) as tm:
                made = _loops(seconds, [(last, lambda: os.write(marker, b"m" * 64), "markers"),
                                        (0, tm.get_reader, "swaps")])
        finally:
            os.close(fd)
            os.close(marker)
    return dict(made, cpus=last + 1)


def check_full_read(args: list[str]) -> dict:
    """read() of whole committed sub-buffers of a mapped buffer, then the mapping drains the
    rest, round after round. A mapped buffer's sub-buffers are the ones user space maps
    (meta subbuf ids), so ring_buffer_read_page() must copy a full page out, never swap it
    for the reader's spare page (cpu_buffer->mapped, from 117c39200d9d "ring-buffer:
    Introducing ring-buffer mapping functions"): a swapped page leaves the mapping showing a
    stale page once the ring comes round to it. read() then the mapping, in turn, must give
    every event once and in order."""
    rounds = int(args[0]) if args else 24
    # ~2.5 sub-buffers of one page a round (90 events with 4 KiB pages, 360 with 16 KiB), in
    # a buffer of 16 of them: read() then takes whole committed sub-buffers, as the rule says.
    # (90 events into a 16 KiB sub-buffer fill less than one: read() then copies a partial
    # page, another case.)
    per_round = int(args[1]) if len(args) > 1 else 90 * PAGE // 4096
    with instance(subbuf_kb=PAGE // 1024, size_kb=16 * PAGE // 1024) as inst, pinned(0):
        fd, rfd = inst.open_cpu(0), inst.open_cpu(0)
        written: list[str] = []
        got: list[str] = []
        torn = None
        with TraceMap(fd) as tm:
            reader = MapReader(tm, inst)
            for r in range(rounds):
                batch = texts(per_round, f"f{r:03d}-")
                written += batch
                for t in batch:
                    inst.mark(t)
                for _ in range(2):  # the rest of the reader page, then a fresh full one
                    try:
                        chunk = os.read(rfd, PAGE)
                    except BlockingIOError:
                        break
                    try:
                        sb = parse_subbuf(chunk, inst.header)
                    except ParseError as e:
                        torn = f"read() page in round {r}: {e}"
                        break
                    got += [p.text.removesuffix("\n") for e in sb.events
                            if (p := inst.prints.decode(e)) is not None]
                before = len(reader.drain.texts)
                reader.until_empty()
                got += reader.drain.texts[before:]
                if torn or reader.drain.torn:
                    torn = torn or reader.drain.torn
                    break
        os.close(fd)
        os.close(rfd)
    return {"rounds": rounds, "written": len(written), "got": len(got),
            "in_order": got == written, "duplicates": len(got) - len(set(got)),
            "missing": len(set(written) - set(got)), "foreign": len(set(got) - set(written)),
            "torn": torn, "first_mismatch": _first_mismatch(got, written),
            # (where this reader started on a sub-buffer, the meta page's reader.read): the
            # first few, to tell what read() consumed from what the mapping was told
            "reader_read_seen": reader.drain.reader_read_seen[:12] if rounds else []}


def _splice_once(fd: int) -> str:
    r, w = os.pipe()
    try:
        n = os.splice(fd, w, 16 * PAGE, flags=2)  # SPLICE_F_NONBLOCK
        return f"{n} bytes"
    except OSError as e:
        return probelib.errname(e)
    finally:
        os.close(r)
        os.close(w)


# --- 8. persistent (boot-mapped) instances -------------------------------------------------

def _optional(path: str) -> str | None:
    return read_file(path) if os.path.exists(path) else None


def check_oversized(args: list[str]) -> dict:
    """A size the memory cannot hold, for the whole buffer and for one CPU's: refused with
    ENOMEM before anything is allocated (__rb_allocate_pages() asks si_mem_available() first:
    "ring-buffer: Check if memory is available before allocation", v4.17), and the buffer keeps
    its size. Four times MemTotal per CPU, so no estimate of available memory can allow it."""
    with open("/proc/meminfo") as f:
        total_kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    huge = 4 * total_kb
    with instance() as inst:
        before = (inst.get("buffer_size_kb"), inst.get("per_cpu/cpu0/buffer_size_kb"))
        whole = inst.set("buffer_size_kb", huge)
        cpu0 = inst.set("per_cpu/cpu0/buffer_size_kb", huge)
        after = (inst.get("buffer_size_kb"), inst.get("per_cpu/cpu0/buffer_size_kb"))
        # The buffer still takes events after the refusals.
        inst.set("tracing_on", 1)
        marker = inst.set("trace_marker", "ringlab-after-oversized")
        shown = "ringlab-after-oversized" in inst.get("trace")
    return {"asked_kb": huge, "whole": whole, "cpu0": cpu0, "before": list(before),
            "after": list(after), "marker": marker, "shown": shown}


CPU1_ONLINE = "/sys/devices/system/cpu/cpu1/online"


def check_resize_cpus(args: list[str]) -> dict:
    """ring_buffer_resize() across CPUs, on a guest of 2+ CPUs, from a task on CPU 0: one
    CPU's size set for the other CPU (its pages swapped in by work run on that CPU); a size
    that fits memory once but not twice (__rb_allocate_pages() asks si_mem_available() per
    CPU: CPU 0's pages are made, CPU 1's are refused, and CPU 0's freed: ENOMEM with the
    sizes as they were); and while CPU 1 is offline, the whole buffer and CPU 1's alone
    resized (its pages swapped in at once, not by work on it). CPU 1 comes back with the
    size set, and an event written there is read."""
    if (os.cpu_count() or 1) < 2:
        raise probelib.Skip("the guest has one CPU: this check needs two")
    if not os.path.exists(CPU1_ONLINE):
        raise probelib.Skip(f"no {CPU1_ONLINE}: CPU 1 cannot go offline "
                            "(CONFIG_HOTPLUG_CPU is off)")
    with open("/proc/meminfo") as f:
        avail_kb = next(int(ln.split()[1]) for ln in f if ln.startswith("MemAvailable:"))
    out: dict[str, Any] = {"mem_available_kb": avail_kb}
    with instance(size_kb=16) as inst, pinned(0):
        # What buffer_size_kb shows for each size (whole sub-buffers' data: rounded up),
        # measured on CPU 0, CPU 1's yardstick.
        out["shown"] = {}
        for kb in (64, 32, 48):
            _must(inst.set("per_cpu/cpu0/buffer_size_kb", kb), "per_cpu/cpu0/buffer_size_kb")
            out["shown"][str(kb)] = inst.get("per_cpu/cpu0/buffer_size_kb")
        out["other_cpu"] = inst.set("per_cpu/cpu1/buffer_size_kb", 64)
        out["other_cpu_reads"] = inst.get("per_cpu/cpu1/buffer_size_kb")
        once = avail_kb * 6 // 10
        before = [inst.get(f"per_cpu/cpu{c}/buffer_size_kb") for c in (0, 1)]
        out["fits_once"] = {"size_kb": once, "result": inst.set("buffer_size_kb", once),
                            "before": before,
                            "after": [inst.get(f"per_cpu/cpu{c}/buffer_size_kb")
                                      for c in (0, 1)]}
        out["offline"] = write_file(CPU1_ONLINE, "0")
        try:
            out["whole_while_offline"] = inst.set("buffer_size_kb", 32)
            out["cpu1_after_whole"] = inst.get("per_cpu/cpu1/buffer_size_kb")
            out["cpu1_while_offline"] = inst.set("per_cpu/cpu1/buffer_size_kb", 48)
            out["cpu1_after_own"] = inst.get("per_cpu/cpu1/buffer_size_kb")
        finally:
            out["online"] = write_file(CPU1_ONLINE, "1")
        out["cpu1_after_online"] = inst.get("per_cpu/cpu1/buffer_size_kb")
        with pinned(1):
            inst.mark("on-cpu1-after-online")
        out["cpu1_event"] = "on-cpu1-after-online" in inst.get("per_cpu/cpu1/trace")
    return out


def check_blocking_reader(args: list[str]) -> dict:
    """GET_READER on a mapped trace_pipe_raw opened without O_NONBLOCK waits for the buffer
    first (tracing_buffers_ioctl(): ring_buffer_wait() up to buffer_percent, 0 here: any
    data). Empty, it waits until a signal ends the wait (an alarm after 0.5 s, whose handler
    does nothing: EINTR, Python's handlers have no SA_RESTART); with an event there, it
    returns (an alarm at 5 s would end a wait) with the event in the reader sub-buffer."""
    import signal

    with instance(subbuf_kb=REFUSAL_SUBBUF_KB, size_kb=8 * REFUSAL_SUBBUF_KB) as inst, pinned(0):
        _must(inst.set("buffer_percent", 0), "buffer_percent")
        fd = inst.open_cpu(0, nonblock=False)
        out: dict[str, Any] = {}
        try:
            with TraceMap(fd) as tm:
                old = signal.signal(signal.SIGALRM, lambda *a: None)
                signal.setitimer(signal.ITIMER_REAL, 0.5)
                start = time.monotonic()
                out["empty"] = _ioctl_result(fd, abi.TRACE_MMAP_IOCTL_GET_READER)
                out["empty_waited_s"] = round(time.monotonic() - start, 2)
                inst.mark("blocking-reader")
                signal.setitimer(signal.ITIMER_REAL, 5)  # EINTR if it waits with data there
                out["with_data"] = _ioctl_result(fd, abi.TRACE_MMAP_IOCTL_GET_READER)
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
                out["marker_in_reader"] = b"blocking-reader" in tm.subbuf(tm.meta().reader_id)
        finally:
            os.close(fd)
    return out


def check_snapshot_busy(args: list[str]) -> dict:
    """Arming a snapshot while the unallocated snapshot buffer is open for reading: the open
    `snapshot` file's iterator holds the buffer's resize_disabled (ring_buffer_read_start()),
    so allocating it (resizing it to the main buffer's size) is refused, and the arm undone
    (trace_snapshot.c tracing_arm_snapshot_locked(): tr->snapshot-- on failure). Once the
    file is closed, the same trigger arms and disarms."""
    with instance() as inst:
        if not os.path.exists(f"{inst.path}/snapshot"):
            raise probelib.Skip("kernel has no snapshot file (CONFIG_TRACER_SNAPSHOT is off)")
        trig = f"{inst.path}/events/sched/sched_switch/trigger"
        # print_snapshot_help() (trace.c): "Snapshot is freed" / "Snapshot is allocated"
        out: dict[str, Any] = {"freed_before": "Snapshot is freed" in inst.get("snapshot")}
        fd = os.open(f"{inst.path}/snapshot", os.O_RDONLY)
        try:
            out["arm_while_open"] = write_file(trig, ARMED_SNAPSHOT)
            out["triggers_while_open"] = _triggers(trig)
        finally:
            os.close(fd)
        out["arm_after_close"] = write_file(trig, ARMED_SNAPSHOT)
        out["disarm"] = write_file(trig, "!" + ARMED_SNAPSHOT)
        out["triggers_after"] = _triggers(trig)
    return out


def _triggers(path: str) -> list[str]:
    """The triggers set on an event (its trigger file, less the comment lines)."""
    return [ln for ln in read_file(path).splitlines() if ln and not ln.startswith("#")]


def check_alloc_failures(args: list[str]) -> dict:
    """Mapping a CPU buffer (the meta page, then the sub-buffers: ring_buffer_map(),
    __rb_map_vma()) with its 1st, 2nd, ... allocation failing (fault_inject.sweep). After each
    attempt, injection off, the fd closed: a mapping that was made reads a marker written
    before it, and a refused one leaves nothing (_refusals_left(): GET_READER on a fresh fd
    ENODEV, the buffer resizes, a snapshot arms; _remap_works(): it maps and reads again)."""
    fault_inject.prepare()
    with instance(subbuf_kb=REFUSAL_SUBBUF_KB, size_kb=8 * REFUSAL_SUBBUF_KB) as inst, pinned(0):
        fd = inst.open_cpu(0)
        with TraceMap(fd) as tm:
            geometry = {"meta_page_size": tm.meta_page_size, "nr_subbufs": tm.nr_subbufs}
        os.close(fd)

        def setup() -> dict:
            inst.mark("before-the-mapping")
            return {"fd": inst.open_cpu(0)}

        def call(state: dict) -> None:
            state["tm"] = TraceMap(state["fd"])

        def judge(state: dict, outcome: str) -> dict:
            seen: dict[str, Any] = {}
            if (tm := state.get("tm")) is not None:
                seen["nr_subbufs"] = tm.nr_subbufs
                seen["reads"] = _marker_read(tm, inst, "before-the-mapping")
                tm.close()
            os.close(state["fd"])
            seen["left"] = _refusals_left(inst)
            seen["map_after"] = "ok" if _remap_works(inst) else "failed"
            return seen

        sweep = fault_inject.sweep(setup, call, judge)
    return {"geometry": geometry, "map": fault_inject.summary(sweep)}


# Events written to the boot instance and consumed through trace_pipe before the reboot:
# about 4 sub-buffers of 4 KiB, so that the reader swaps some out and back into the ring.
READ_BEFORE_REBOOT = 140


def _consume_pipe(path: str) -> int:
    """Events consumed from a trace_pipe (O_NONBLOCK) until it is empty: lines read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return sum(chunk.count(b"\n") for chunk in iter(partial(_read_or_empty, fd), b""))
    finally:
        os.close(fd)


def _read_or_empty(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except BlockingIOError:   # EAGAIN: nothing left to consume
        return b""


def check_persistent(args: list[str]) -> dict:
    """PHASE MARK BOOT [FIXED [COPY]]: instances the kernel command line made (trace_instance=
    NAME@LABEL on reserve_mem=, NAME@ADDR:SIZE on memmap=, COPY=NAME a backup copy). `write`
    puts READ_BEFORE_REBOOT events in BOOT's buffer and consumes them through CPU 0's
    trace_pipe, then MARK (tracing on only for it); after a warm reboot `read` says whether
    MARK came back in BOOT (and in COPY), which of the consumed events BOOT's `trace` shows
    again, then which of them user space may map, and reads an event through BOOT's mapping
    when the kernel allows one."""
    phase, mark_text, names = args[0], args[1], args[2:]
    root = tracefs.root()
    roles = dict(zip(("boot", "fixed", "copy"), names))
    out: dict[str, Any] = {"instances": {r: os.path.isdir(f"{root}/instances/{n}")
                                         for r, n in roles.items()}}
    if not out["instances"]["boot"]:
        return out
    boot = Instance(root, roles["boot"])
    boot.attach()
    out["last_boot_info"] = _optional(f"{boot.path}/last_boot_info")
    out["buffer_meta"] = {cpu: _optional(f"{boot.path}/per_cpu/cpu{cpu}/buffer_meta")
                          for cpu in range(os.cpu_count() or 1)}
    if phase == "write":
        out["tracing_on_at_boot"] = boot.get("tracing_on")
        # The instance holds "the last boot's data" (TRACE_ARRAY_FL_LAST_BOOT, set for every
        # boot instance at boot) until a reset: a consuming read that finds it empty resets it
        # then (update_last_data_if_empty()), wiping what was read. Truncating `trace` starts
        # this boot's data first, as a user does.
        _must(tracefs.write_file(f"{boot.path}/trace", ""), "trace")
        _must(boot.set("tracing_on", 1), "tracing_on")
        with pinned(0):
            for i in range(READ_BEFORE_REBOOT):
                boot.mark(f"{mark_text}-r{i:04d} " + "r" * 80)
            out["consumed"] = _consume_pipe(f"{boot.path}/per_cpu/cpu0/trace_pipe")
            boot.mark(mark_text)
        _must(boot.set("tracing_on", 0), "tracing_on")
        out["read_events"] = READ_BEFORE_REBOOT
        out["has_mark"] = mark_text in read_file(f"{boot.path}/trace")
        return out
    shown = read_file(f"{boot.path}/trace")
    out["has_mark"] = mark_text in shown
    out["read_back"] = [int(i) for i in re.findall(rf"{re.escape(mark_text)}-r(\d{{4}}) ", shown)]
    if out["instances"].get("copy"):
        out["copy_has_mark"] = mark_text in read_file(f"{root}/instances/{roles['copy']}/trace")
    out["map"] = {}
    for role, name in roles.items():
        if out["instances"][role]:
            fd = os.open(f"{root}/instances/{name}/per_cpu/cpu0/trace_pipe_raw",
                         os.O_RDONLY | os.O_NONBLOCK)
            out["map"][role] = _map_result(fd, PAGE)
            os.close(fd)
    if out["map"]["boot"] == "ok":
        # Tracing on again starts this boot's data (update_last_data() resets the buffer).
        _must(boot.set("tracing_on", 1), "tracing_on")
        fd = boot.open_cpu(0)
        try:
            with TraceMap(fd) as tm, pinned(0):
                out["geometry"] = {"subbuf_size": tm.subbuf_size, "nr_subbufs": tm.nr_subbufs}
                boot.mark(mark_text + "-mapped")
                out["reads_through_mapping"] = \
                    mark_text + "-mapped" in MapReader(tm, boot).until_empty().texts
        finally:
            os.close(fd)
            boot.set("tracing_on", 0)
    return out


# --- benchmark ----------------------------------------------------------------------------

@dataclass
class Consumed:
    bytes: int = 0
    events: int = 0
    kernel_s: float = 0.0    # inside the consuming system calls (ioctl, read, splice)
    setup_s: float = 0.0     # mapping the buffer (mmap), once per consumer


def check_throughput(args: list[str]) -> dict:
    """Events/s consumed from one pre-filled CPU buffer through the mapping, read() and
    splice() of trace_pipe_raw. 'transport' only moves sub-buffers to where the consumer can
    read them (for the mapping: GET_READER and the meta page, no copy); 'parsed' also parses
    every event in Python, the same parser on each path. kernel_s is the time spent in the
    consuming system calls, which says where the difference comes from; setup_s is the
    mmap itself (left out of the rates: a consumer maps once)."""
    n = int(args[0]) if args else 20000
    subbuf_kb = int(args[1]) if len(args) > 1 else 4
    out: dict = {"events": n, "subbuf_kb": subbuf_kb}
    for method in ("mmap", "read", "splice"):  # warm up each path (imports, caches)
        with instance(subbuf_kb=4, size_kb=64) as inst, pinned(0):
            for t in texts(200, "w"):
                inst.mark(t)
            fd = inst.open_cpu(0)
            CONSUMERS[method](fd, inst, True)
            os.close(fd)
    for method in ("mmap", "read", "splice"):
        for parse in (False, True):
            with instance(subbuf_kb=subbuf_kb, size_kb=max(512, n * 200 // 1024)) as inst, \
                    pinned(0):
                for t in texts(n, "t"):
                    inst.mark(t)
                fd = inst.open_cpu(0)
                t0 = time.perf_counter()
                c = CONSUMERS[method](fd, inst, parse)
                took = time.perf_counter() - t0
                os.close(fd)
                if not parse:  # the buffer's own count of what was consumed
                    c.events = int(inst.stats(0).get("read events", 0))
            steady = took - c.setup_s
            out[f"{method}_{'parsed' if parse else 'transport'}"] = {
                "seconds": took, "setup_s": c.setup_s, "kernel_s": c.kernel_s,
                "bytes": c.bytes, "events": c.events,
                "events_per_s": c.events / steady if steady > 0 and c.events else None,
                "us_per_event_in_kernel": c.kernel_s / c.events * 1e6 if c.events else None}
    return out


def _count(buf: memoryview, inst: Instance, start: int = 0) -> int:
    first = inst.header.data_offset + start
    return sum(1 for e in parse_subbuf(buf, inst.header).events if e.offset >= first)


def _consume_mmap(fd: int, inst: Instance, parse: bool) -> Consumed:
    c = Consumed()
    t = time.perf_counter()
    tm = TraceMap(fd)
    c.setup_s = time.perf_counter() - t
    with tm:
        meta = abi.TraceBufferMeta.from_address(tm.meta_map.addr)  # the live page, no copy
        last_id, done = None, 0
        while True:
            t = time.perf_counter()
            tm.get_reader()
            c.kernel_s += time.perf_counter() - t
            rid, upto = meta.reader_id, meta.reader_read
            if rid == last_id and upto == done:
                break
            start = done if rid == last_id else 0
            last_id, done = rid, upto
            c.bytes += upto - start
            if parse:
                view = (ctypes.c_char * tm.subbuf_size).from_address(
                    tm.data.addr + rid * tm.subbuf_size)
                c.events += _count(memoryview(view).cast("B"), inst, start)
    return c


def _consume_read(fd: int, inst: Instance, parse: bool) -> Consumed:
    c, buf = Consumed(), bytearray(_subbuf_size(inst))
    while True:
        t = time.perf_counter()
        try:
            n = os.readv(fd, [buf])
        except BlockingIOError:
            n = 0
        c.kernel_s += time.perf_counter() - t
        if not n:
            break
        c.bytes += n
        if parse:
            c.events += _count(memoryview(buf)[:n], inst)
    return c


def _consume_splice(fd: int, inst: Instance, parse: bool) -> Consumed:
    """splice() into a pipe, then read() the pipe: the consumer's copy of a page."""
    size = _subbuf_size(inst)
    c, buf = Consumed(), bytearray(size)
    r, w = os.pipe()
    fcntl.fcntl(w, 1031, max(size, PAGE * 16))  # F_SETPIPE_SZ: room for one sub-buffer
    try:
        while True:
            t = time.perf_counter()
            try:
                n = os.splice(fd, w, size, flags=2)  # SPLICE_F_NONBLOCK
            except BlockingIOError:
                n = 0
            got = 0
            while got < n:
                got += os.readv(r, [memoryview(buf)[got:n]])
            c.kernel_s += time.perf_counter() - t
            if not n:
                break
            c.bytes += got
            if parse:
                c.events += _count(memoryview(buf)[:got], inst)
    finally:
        os.close(r)
        os.close(w)
    return c


def _subbuf_size(inst: Instance) -> int:
    return int(inst.get("buffer_subbuf_size_kb")) * 1024


CONSUMERS = {"mmap": _consume_mmap, "read": _consume_read, "splice": _consume_splice}

CHECKS = probelib.check_table(globals())


def _gate(check: str) -> None:
    """tracefs must be there; every check but `abi` needs the mainline mapping ABI."""
    root = tracefs.root()
    if check != "abi":
        _mainline_or_skip(root)


def main(argv: list[str]) -> int:
    return probelib.check_main(argv, "trace_mmap", "Probe the tracefs ring buffer mmap "
                               "(trace_pipe_raw); prints one JSON document of observations "
                               "for CHECK.", CHECKS, "sub-buffer KB, CPU, counts", _gate)


if __name__ == "__main__":
    probelib.run(main)
