"""Probe the perf AUX area: the validation rules of its mmap (any kernel), and, with the lab's
test PMU (kernels/modules/ringlab_aux, loaded by the test), its data path: aux_head,
PERF_RECORD_AUX records and their flags, the data itself, overwrite mode, aux_watermark
wakeups, PAUSE_OUTPUT, SET_OUTPUT and a concurrent map/unmap loop. Prints observations as one
JSON document; tests/kernel/test_perf_aux.py judges them against the ABI
(include/uapi/linux/perf_event.h, kernel/events/core.c perf_mmap(), kernel/events/
ring_buffer.c rb_alloc_aux()/perf_aux_output_*, seed 000, ../shared/reference/
ring-buffer-abi.md section 2).

The test PMU writes, at every absolute AUX position p (bytes since the start, before
wrapping), the u64 p: so any byte range it reports can be checked in place.

Run by hand in a guest: python3 probe_perf_aux.py CHECK [ARGS]   (-h). Stdlib only.
"""
from __future__ import annotations

import array
import ctypes
import fcntl
import mmap
import os
import select
import signal
import struct
import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import fault_inject
import perf_abi as perf
import probelib
from perf_buffer import NO_PAGE_TABLES, AuxArea, RingBuffer
from perf_events import (event_id, lost_count, module_refs, open_dummy, test_pmu_type,
                         vm_pin_kb)
from probelib import PAGE, Mapping, errno_result, libc

PMU = "ringlab_aux"
MLOCK = "/proc/sys/kernel/perf_event_mlock_kb"
# Test PMU attr.config (ringlab_aux.c): chunk bytes in bits 0-23, flags, chunk budget.
CFG_PARTIAL, CFG_COLLISION, CFG_MAX_SHIFT = 1 << 32, 1 << 33, 40
AUX_FLAG_TRUNCATED, AUX_FLAG_OVERWRITE = 0x01, 0x02
AUX_FLAG_PARTIAL, AUX_FLAG_COLLISION = 0x04, 0x08
SW_FLAGS = perf.ATTR_DISABLED | perf.ATTR_EXCLUDE_KERNEL | perf.ATTR_EXCLUDE_HV


def open_test_pmu(chunk: int = 4096, max_chunks: int = 0, period_us: int = 1000,
                  flags: int = 0, aux_watermark: int = 0, cpu: int = 0) -> int:
    """A per-CPU event of the test PMU (root: perf_event_paranoid allows CPU events)."""
    a = perf.attr(test_pmu_type(PMU), chunk | flags | (max_chunks << CFG_MAX_SHIFT),
                  perf.ATTR_DISABLED | perf.ATTR_SAMPLE_ID_ALL)
    a.config1 = period_us
    a.sample_type = perf.PERF_SAMPLE_IDENTIFIER
    a.aux_watermark = aux_watermark
    return perf.perf_event_open(a, -1, cpu)


@dataclass
class AuxRecord:
    offset: int
    size: int
    flags: int
    id: int


def aux_records(records: list) -> list[AuxRecord]:
    """PERF_RECORD_AUX: u64 aux_offset, aux_size, flags, then sample_id (IDENTIFIER: u64 id,
    last)."""
    out = []
    for r in records:
        if r.type == perf.PERF_RECORD_AUX:
            off, size, flags = struct.unpack_from("<QQQ", r.payload)
            ident = struct.unpack_from("<Q", r.payload, len(r.payload) - 8)[0]
            out.append(AuxRecord(off, size, flags, ident))
    return out


def run_for(fd: int, seconds: float) -> None:
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    time.sleep(seconds)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)


# --- 1. validation --------------------------------------------------------------------------

def _validation_round(fd: int) -> dict:
    """Each rule of perf_mmap()'s AUX branch once, on an event with an 8-page data buffer."""
    out = {}
    out["no_data_buffer"] = probelib.outcome(lambda: Mapping(fd, 4 * PAGE, offset=16 * PAGE).close())
    rb = RingBuffer(fd, 8)
    end = rb.length  # the first byte past the data area: where an AUX area may start
    ctl = perf.PerfEventMmapPage.from_address(rb.base)

    def aux(aux_offset: int, aux_size: int, map_offset: int, length: int,
            prot: int = mmap.PROT_READ | mmap.PROT_WRITE) -> str:
        ctl.aux_offset, ctl.aux_size = aux_offset, aux_size
        return probelib.outcome(lambda: Mapping(fd, length, prot, offset=map_offset).close())

    out["offset_inside_data"] = aux(end - PAGE, 4 * PAGE, end - PAGE, 4 * PAGE)
    out["offset_misaligned"] = aux(end + 8, 4 * PAGE, end, 4 * PAGE)
    out["mmap_offset_differs"] = aux(end, 4 * PAGE, end + 4 * PAGE, 4 * PAGE)
    out["length_differs"] = aux(end, 4 * PAGE, end, 8 * PAGE)
    out["not_power_of_two"] = aux(end, 3 * PAGE, end, 3 * PAGE)
    out["well_formed"] = aux(end, 4 * PAGE, end, 4 * PAGE)
    rb.close()
    ro = RingBuffer(fd, 8, writable=False)  # a read-only control page: aux_offset stays 0
    out["read_only_control_page"] = probelib.outcome(
        lambda: Mapping(fd, 4 * PAGE, offset=ro.length).close())
    ro.close()
    out["data_buffer_maps_after"] = probelib.outcome(lambda: RingBuffer(fd, 8).close())
    return out


def check_validation(args: list[str]) -> dict:
    """The AUX mmap rules on a software event (no AUX support: the well-formed request is
    EOPNOTSUPP) and, if loaded, on the test PMU; ROUNDS times with perf_event_mlock_kb 0 so
    that any charge left behind shows in VmPin."""
    rounds = int(args[0]) if args else 300
    saved = open(MLOCK).read().strip()
    out: dict = {"rounds": rounds}
    try:
        with open(MLOCK, "w") as f:
            f.write("0")
        start = vm_pin_kb()
        fd = open_dummy(SW_FLAGS)
        results = [_validation_round(fd) for _ in range(rounds)]
        os.close(fd)
        out["software"] = results[0]
        out["software_consistent"] = all(r == results[0] for r in results)
        out["vm_pin_kb"] = [start, vm_pin_kb()]
        try:
            pfd = open_test_pmu()
        except probelib.Skip as e:
            out["test_pmu"] = {"skip": str(e)}
        else:
            out["test_pmu"] = _validation_round(pfd)
            out["test_pmu_remap"] = _remap_rules(pfd)
            out["test_pmu_refusals_undone"] = _refusals_undone(pfd)
            os.close(pfd)
            out["vm_pin_kb_after_test_pmu"] = vm_pin_kb()
    finally:
        with open(MLOCK, "w") as f:
            f.write(saved)
    return out


def _remap_rules(fd: int) -> dict:
    """With a real AUX area mapped: a second mapping must have the same offset and size."""
    rb = RingBuffer(fd, 8)
    aux = AuxArea(fd, rb, 4)
    out = {
        "same": probelib.outcome(lambda: Mapping(fd, aux.size, mmap.PROT_READ | mmap.PROT_WRITE,
                                         offset=aux.offset).close()),
        "other_size": probelib.outcome(lambda: Mapping(fd, 2 * aux.size, offset=aux.offset).close()),
        "other_offset": probelib.outcome(lambda: Mapping(fd, aux.size,
                                                 offset=aux.offset + aux.size).close()),
    }
    aux.close()
    rb.close()
    return out


def _aux_written(fd: int, aux: AuxArea, seconds: float = 0.1) -> int:
    """aux_head after the test PMU ran for `seconds`: what it wrote into the AUX area."""
    run_for(fd, seconds)
    return aux.head


def _refusals_undone(fd: int) -> dict:
    """With a 4-page AUX area mapped, the two refusals that compare against it (perf_mmap():
    "already mapped with a different size" / "... offset", EINVAL): the control page is made
    to ask for them (aux_size 8 pages, or aux_offset past the area), then put back. Then
    everything is unmapped, and the event must map as if the refusals never were: the data
    buffer with a new size (the old one was released: rb->mmap_count back to 0, seed 004),
    an AUX area on it, which the PMU writes into; VmPin back to where it started."""
    start = vm_pin_kb()
    rb = RingBuffer(fd, 8)
    aux = AuxArea(fd, rb, 4)
    ctl, offset, size = aux.ctl, aux.offset, aux.size
    out: dict[str, Any] = {"vm_pin_kb_mapped": vm_pin_kb()}
    ctl.aux_size = 2 * size
    out["other_size"] = probelib.outcome(
        lambda: Mapping(fd, 2 * size, mmap.PROT_READ | mmap.PROT_WRITE, offset=offset).close())
    ctl.aux_size, ctl.aux_offset = size, offset + size
    out["other_offset"] = probelib.outcome(
        lambda: Mapping(fd, size, mmap.PROT_READ | mmap.PROT_WRITE,
                        offset=offset + size).close())
    ctl.aux_offset = offset
    out["vm_pin_kb_after_refusals"] = vm_pin_kb()
    out["written_while_mapped"] = _aux_written(fd, aux)
    aux.close()
    rb.close()
    out["vm_pin_kb_unmapped"] = vm_pin_kb()
    try:
        rb = RingBuffer(fd, 16)
    except OSError as e:
        out["new_size_after_unmap"] = probelib.errname(e)
    else:
        out["new_size_after_unmap"] = "ok"
        try:
            aux = AuxArea(fd, rb, 4)
        except OSError as e:
            out["aux_maps_again"] = probelib.errname(e)
        else:
            out["aux_maps_again"] = "ok"
            out["written_after"] = _aux_written(fd, aux)
            aux.close()
        rb.close()
    out["vm_pin_kb"] = [start, vm_pin_kb()]
    return out


# --- 3. data path (test PMU) ----------------------------------------------------------------

def _drain(rb: RingBuffer) -> list:
    return rb.read_new()


# The data path's AUX area is 128 KiB whatever the page size (32 pages of 4 KiB, 8 of 16 KiB,
# 2 of 64 KiB): the test PMU writes enough chunks in the test for the stream to wrap the
# area many times at every page size, where 32 pages of 64 KiB (2 MiB) were never wrapped
# (docs/results/2026-11-2x-benchmarks.md).
DATAPATH_AUX_BYTES = 128 * 1024


def check_datapath(args: list[str]) -> dict:
    """Chunks of 4096 and 3000 bytes with the reader keeping up (aux_tail advanced): the
    records tile the AUX stream from 0, wrapping the area, and the data at every reported
    byte is right."""
    out = {}
    for chunk in (4096, 3000):
        fd = open_test_pmu(chunk=chunk, period_us=2000)
        rb = RingBuffer(fd, 16)
        aux = AuxArea(fd, rb, max(1, DATAPATH_AUX_BYTES // PAGE))
        eid = event_id(fd)
        recs, bad, heads = [], [], []
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
        deadline = time.monotonic() + 0.8
        while time.monotonic() < deadline:
            time.sleep(0.01)
            heads.append(aux.head)
            new = aux_records(_drain(rb))
            for r in new:
                bad += aux.bad_words(r.offset, r.size)
                aux.tail = r.offset + r.size  # consumed
            recs += new
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
        new = aux_records(_drain(rb))
        for r in new:
            bad += aux.bad_words(r.offset, r.size)
        recs += new
        out[str(chunk)] = {
            "records": len(recs), "aux_head": aux.head, "aux_size": aux.size,
            "sum_sizes": sum(r.size for r in recs),
            "contiguous": all(b.offset == a.offset + a.size for a, b in zip(recs, recs[1:])),
            "first_offset": recs[0].offset if recs else None,
            "flags": sorted({r.flags for r in recs}), "ids_ok": all(r.id == eid for r in recs),
            "sizes": sorted({r.size for r in recs}), "bad_words": bad[:8],
            "head_monotonic": heads == sorted(heads), "wrapped": aux.head > aux.size}
        aux.close()
        rb.close()
        os.close(fd)
    return out


def check_truncated(args: list[str]) -> dict:
    """A reader that never advances aux_tail: the chunk that does not fit is cut to the free
    space (CIRC_SPACE: the size less one byte, so 8 less in whole words) and flagged
    TRUNCATED, and the event stops (perf_aux_output_end() disables it)."""
    fd = open_test_pmu(chunk=3000, period_us=300)
    rb = RingBuffer(fd, 16)
    aux = AuxArea(fd, rb, 16)
    run_for(fd, 0.3)
    recs = aux_records(_drain(rb))
    out = {"aux_size": aux.size, "aux_head": aux.head, "records": len(recs),
           "sum_sizes": sum(r.size for r in recs),
           "truncated": [i for i, r in enumerate(recs) if r.flags & AUX_FLAG_TRUNCATED],
           "last": vars(recs[-1]) if recs else None,
           "bad_words": aux.bad_words(0, min(aux.head, aux.size))}
    head = aux.head
    time.sleep(0.05)
    out["head_moved_after_stop"] = aux.head != head
    aux.close()
    rb.close()
    os.close(fd)
    return out


def check_flags(args: list[str]) -> dict:
    """PARTIAL and COLLISION set by the PMU reach PERF_RECORD_AUX.flags."""
    out = {}
    for name, cfg in (("partial", CFG_PARTIAL), ("collision", CFG_COLLISION),
                      ("both", CFG_PARTIAL | CFG_COLLISION)):
        fd = open_test_pmu(max_chunks=4, flags=cfg, period_us=300)
        rb = RingBuffer(fd, 16)
        aux = AuxArea(fd, rb, 16)
        run_for(fd, 0.1)
        out[name] = sorted({r.flags for r in aux_records(_drain(rb))})
        aux.close()
        rb.close()
        os.close(fd)
    return out


def check_overwrite(args: list[str]) -> dict:
    """A read-only AUX mapping is overwrite (snapshot) mode: the PMU keeps writing past the
    end, aux_head runs ahead of the size, and the buffer holds the newest aux_size bytes."""
    fd = open_test_pmu(chunk=4096, period_us=300)
    rb = RingBuffer(fd, 16)
    aux = AuxArea(fd, rb, 8, writable=False)
    run_for(fd, 0.3)
    head = aux.head
    recs = aux_records(_drain(rb))
    out = {"aux_size": aux.size, "aux_head": head, "records": len(recs),
           "flags": sorted({r.flags for r in recs}),
           "newest_bad_words": aux.bad_words(head - aux.size, aux.size) if head >= aux.size
           else ["aux_head below aux_size"]}
    aux.close()
    rb.close()
    os.close(fd)
    return out


def watermark_cases(page: int) -> tuple[tuple[str, int, int, int, int, bool], ...]:
    """(name, chunk bytes, chunks written, attr.aux_watermark, AUX pages, AUX mapped writable).
    The default watermark is half the area, 16 pages: 8 chunks of 4 KiB reach it with 4 KiB
    pages, 32 with 16 KiB pages, so the chunk counts come from the guest's page size."""
    half = 16 * page // 2
    return (
        ("below_16k", 4096, 3, 16384, 16, True),
        ("at_16k", 4096, 4, 16384, 16, True),
        ("below_16k_uneven", 3000, 5, 16384, 16, True),
        ("past_16k_uneven", 3000, 6, 16384, 16, True),
        ("below_default", 4096, half // 4096 - 1, 0, 16, True),
        ("at_default", 4096, half // 4096, 0, 16, True),
        ("overwrite_mode", 4096, 20, 16384, 16, False),
    )


WATERMARK_CASES = watermark_cases(PAGE)


# How long aux_head may stand still before a wait for the PMU's writes gives up: the PMU
# writes a chunk every few milliseconds, so a second and a half without progress is a kernel that
# does not publish aux_head, not a slow guest. A probe that waits on the kernel stops
# itself and says what it waited for, instead of running into its deadline (issue 23 §3).
STALL_S = 1.5


def _wait_for_head(aux: AuxArea, want: int, keep_tail: bool = False) -> str | None:
    """Wait until aux_head reaches want (keeping aux_tail at it if keep_tail); None once it
    has, else what stopped the wait."""
    last, since = aux.head, time.monotonic()
    while (head := aux.head) < want:
        if keep_tail:
            aux.tail = head
        if head != last:
            last, since = head, time.monotonic()
        elif time.monotonic() - since > STALL_S:
            return f"aux_head stood at {head} for {STALL_S} s, waiting for {want}"
        time.sleep(0.005)
    return None


def _pollin_after(chunk: int, chunks: int, watermark: int, pages: int, writable: bool) -> dict:
    """The test PMU writes exactly `chunks` chunks (its chunk budget) and stops; once aux_head
    has settled, poll(0) tells whether a wakeup is pending (perf_poll() hands out rb->poll,
    which perf_output_wakeup() sets). The data buffer is 16 pages, so its own watermark (half
    of it) is far from the few PERF_RECORD_AUX written: any POLLIN is the AUX area's."""
    fd = open_test_pmu(chunk=chunk, max_chunks=chunks, period_us=2000, aux_watermark=watermark)
    rb = RingBuffer(fd, 16)
    aux = AuxArea(fd, rb, pages, writable=writable)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    stalled = _wait_for_head(aux, chunk * chunks)
    time.sleep(0.02)  # ten periods: a chunk past the budget would be there by now
    head = aux.head
    p = select.poll()
    p.register(fd, select.POLLIN)
    pollin = any(ev & select.POLLIN for _, ev in p.poll(0))
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    truncated = any(r.flags & AUX_FLAG_TRUNCATED for r in aux_records(_drain(rb)))
    out: dict[str, Any] = {"aux_head": head, "pollin": pollin, "aux_size": aux.size,
                           "truncated": truncated}
    if stalled:
        out["stalled"] = stalled
    aux.close()
    rb.close()
    os.close(fd)
    return out


F_SETOWN, F_SETSIG = 8, 10  # include/uapi/asm-generic/fcntl.h


def _wakeups_counted(chunk: int, chunks: int, watermark: int, pages: int = 16) -> dict:
    """Every wakeup, counted: with O_ASYNC and F_SETSIG a realtime signal, each wakeup of
    the event (perf_event_wakeup(): kill_fasync(..., POLL_IN)) queues one signal, which stays
    blocked until counted. The reader keeps aux_tail at aux_head meanwhile, so the area
    never fills: whatever wakes it is aux_head's progress."""
    sig = signal.SIGRTMIN
    signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
    fd = open_test_pmu(chunk=chunk, max_chunks=chunks, period_us=20000, aux_watermark=watermark)
    rb = RingBuffer(fd, 16)
    aux = AuxArea(fd, rb, pages)
    fcntl.fcntl(fd, F_SETOWN, os.getpid())
    fcntl.fcntl(fd, F_SETSIG, sig)
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    stalled = _wait_for_head(aux, chunk * chunks, keep_tail=True)
    time.sleep(0.1)  # five periods: a chunk past the budget would be there by now
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    signals = 0
    while signal.sigtimedwait([sig], 0) is not None:
        signals += 1
    out: dict[str, Any] = {"aux_head": aux.head, "signals": signals, "aux_size": aux.size}
    if stalled:
        out["stalled"] = stalled
    aux.close()
    rb.close()
    os.close(fd)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
    return out


def check_watermark(args: list[str]) -> dict:
    """aux_watermark wakeups, exactly: the PMU writes a known number of bytes and stops, then
    the probe asks whether a wakeup is pending. rb_need_aux_wakeup(): a wakeup once aux_head
    has moved aux_watermark bytes past the last one, never in overwrite mode; rb_alloc_aux():
    aux_watermark 0 is half the AUX area."""
    out = {name: {"chunk": chunk, "chunks": n, "aux_watermark": wm,
                  **_pollin_after(chunk, n, wm, pages, writable)}
           for name, chunk, n, wm, pages, writable in WATERMARK_CASES}
    out["every_watermark"] = {"chunk": 3000, "chunks": 11, "aux_watermark": 8192,
                              **_wakeups_counted(3000, 11, 8192)}
    return out


def check_pause(args: list[str]) -> dict:
    """PAUSE_OUTPUT: no PERF_RECORD_AUX reaches the paused data buffer; the ones dropped are
    counted (PERF_RECORD_LOST after resume); AUX data and aux_head go on (the AUX area is not
    paused in this ABI: rb->paused gates perf_output_begin() only)."""
    fd = open_test_pmu(chunk=4096, period_us=5000)
    rb = RingBuffer(fd, 16)
    aux = AuxArea(fd, rb, 64)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    time.sleep(0.05)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_PAUSE_OUTPUT, 1)
    # Whatever the PMU wrote before the ioctl returned is "before": a tick can land between
    # a drain and the ioctl.
    before = aux_records(_drain(rb))
    head_paused = aux.head
    time.sleep(0.05)
    during = aux_records(_drain(rb))
    head_resumed = aux.head
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_PAUSE_OUTPUT, 0)
    time.sleep(0.05)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    after_raw = _drain(rb)
    after = aux_records(after_raw)
    recs = before + during + after
    out = {"records_before": len(before), "records_while_paused": len(during),
           "records_after": len(after), "lost_after": lost_count(after_raw),
           "aux_head_moved_while_paused": head_resumed - head_paused,
           "aux_head": aux.head, "recorded_bytes": sum(r.size for r in recs),
           "bad_words": [b for r in recs for b in aux.bad_words(r.offset, r.size)][:8]}
    aux.close()
    rb.close()
    os.close(fd)
    return out


def check_set_output(args: list[str]) -> dict:
    """Two test-PMU events on one CPU, the second redirected (SET_OUTPUT) to the first's
    buffer with its AUX area: records of both ids, tiling one AUX stream, data right.
    Each event stops after 64 chunks (192 KiB in all: the 128 KiB area wraps once): the
    check of every word is bounded, however slowly a loaded TCG guest runs this loop (a
    producer without end outran it once, in a CI simulation)."""
    a = open_test_pmu(chunk=2048, max_chunks=64, period_us=2000)
    b = open_test_pmu(chunk=1024, max_chunks=64, period_us=3000)
    rb = RingBuffer(a, 16)
    aux = AuxArea(a, rb, 32)
    out: dict[str, Any] = {
        "set_output": probelib.outcome(lambda: fcntl.ioctl(b, perf.PERF_EVENT_IOC_SET_OUTPUT, a))}
    ida, idb = event_id(a), event_id(b)
    fcntl.ioctl(a, perf.PERF_EVENT_IOC_ENABLE)
    fcntl.ioctl(b, perf.PERF_EVENT_IOC_ENABLE)
    recs, bad = [], []
    for i in range(41):
        if i == 40:
            for fd in (a, b):
                fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
        time.sleep(0.01)
        new = aux_records(_drain(rb))
        for r in new:  # checked before aux_tail lets the PMU write over them
            bad += aux.bad_words(r.offset, r.size)
        if new:
            aux.tail = new[-1].offset + new[-1].size
        recs += new
    out.update({"records": len(recs), "from_a": sum(r.id == ida for r in recs),
                "from_b": sum(r.id == idb for r in recs),
                "contiguous": all(y.offset == x.offset + x.size for x, y in zip(recs, recs[1:])),
                "bad_words": bad[:8],
                "aux_head": aux.head, "sum_sizes": sum(r.size for r in recs)})
    aux.close()
    rb.close()
    os.close(b)
    os.close(a)
    return out


# What each step of the race may end in. Both threads map the same event with the same data
# size and the same aux_offset/aux_size, so no rule of perf_mmap() refuses them: the data
# mmap retries a buffer that is going away ("Raced against perf_mmap_close()", goto again)
# and the AUX mmap of a mapped AUX area only counts it (rb_has_aux()); ENOMEM (rb_alloc(),
# rb_alloc_aux()) is the one failure mmap(2) documents for them. munmap(2) of a whole
# mapping has no failure here.
RACE_OUTCOMES = {"data mmap": {"ok", "ENOMEM"}, "aux mmap": {"ok", "ENOMEM"},
                 "aux munmap": {"ok"}, "data munmap": {"ok"}}


def _unmap(m: Mapping) -> str:
    """munmap(2) of the whole mapping, its result checked (Mapping.close() ignores it)."""
    result = errno_result(libc.munmap(ctypes.c_void_p(m.addr), m.length) == 0)
    m.addr = None
    return result


def _race_round(fd: int, note) -> None:
    """Map the data buffer and its AUX area, hold them a moment, unmap both; every step's
    outcome goes to note(step, outcome)."""
    try:
        rb = RingBuffer(fd, 8)
    except OSError as e:
        note("data mmap", probelib.errname(e))
        return
    note("data mmap", "ok")
    try:
        area = AuxArea(fd, rb, 8)
    except OSError as e:
        note("aux mmap", probelib.errname(e))
    else:
        note("aux mmap", "ok")
        time.sleep(0.001)
        note("aux munmap", _unmap(area.map))
    note("data munmap", _unmap(rb.map))


def check_map_unmap_race(args: list[str]) -> dict:
    """Two test-PMU events sharing one buffer (SET_OUTPUT), while two threads map and unmap
    the data buffer and the AUX area, for SECONDS in two halves: first with the probe holding
    a mapping of the buffer, so it stays and both events write into it while its AUX area
    comes and goes; then without, so the buffer itself is freed and made again (the
    redirected event is detached with the first buffer: perf_mmap_close()). Every step's
    outcome is counted; the test checks them against RACE_OUTCOMES and the kernel log."""
    seconds = float(args[0]) if args else 4
    a = open_test_pmu(chunk=1024, period_us=200)
    b = open_test_pmu(chunk=512, period_us=300)
    held = RingBuffer(a, 8)
    out: dict[str, Any] = {"seconds": seconds, "set_output": probelib.outcome(
        lambda: fcntl.ioctl(b, perf.PERF_EVENT_IOC_SET_OUTPUT, a)), "allowed": {
        k: sorted(v) for k, v in RACE_OUTCOMES.items()}}
    for fd in (a, b):
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    lock = threading.Lock()
    records: dict[int, int] = {}
    for phase in ("buffer_held", "buffer_recreated"):
        counts: dict[str, dict[str, int]] = {step: {} for step in RACE_OUTCOMES}
        stop = time.monotonic() + seconds / 2

        def note(step: str, result: str) -> None:
            with lock:
                counts[step][result] = counts[step].get(result, 0) + 1

        def worker() -> None:
            while time.monotonic() < stop:
                _race_round(a, note)

        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            if phase == "buffer_held":  # PERF_RECORD_AUX of each event, while it is there
                for r in aux_records(_drain(held)):
                    records[r.id] = records.get(r.id, 0) + 1
            time.sleep(0.01)
        if phase == "buffer_held":
            held.close()
        out[phase] = counts
    out["aux_records_while_held"] = {"first": records.get(event_id(a), 0),
                                     "redirected": records.get(event_id(b), 0)}
    for fd in (a, b):
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    os.close(b)
    os.close(a)
    return out


def check_aux_unmap_beside_writer(args: list[str]) -> dict:
    """The AUX area's last munmap on CPU 0 while the test PMU writes into it from the last
    CPU (a chunk of 16 KiB every 100 us, inside its hrtimer callback: perf_aux_output_begin()
    .. perf_aux_output_end()), for SECONDS, the data buffer held. perf_mmap_close() stops
    every writer (perf_pmu_output_stop(), an IPI that waits for the transaction) before
    rb_free_aux() drops the mapping's reference, so the AUX pages are freed there, in process
    context (race mutant 069 stops them after). Overwrite mode (read-only), so the writer never
    stops on a full area. How many mappings were made, in how many the writer moved aux_head,
    and the records it left; a WARN is the kernel log's, judged by the test."""
    seconds = float(args[0]) if args else 3.0
    last = max(os.sched_getaffinity(0))
    fd = open_test_pmu(chunk=16384, period_us=100, cpu=last)
    held = RingBuffer(fd, 8)
    counts: dict[str, int] = {}
    records = written = 0
    try:
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
        os.sched_setaffinity(0, {0})
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            try:
                area = AuxArea(fd, held, 8, writable=False)
                time.sleep(0.0005)      # a few of the writer's ticks into this area
                written += area.head > 0
                area.map.close()
                counts["ok"] = counts.get("ok", 0) + 1
            except OSError as e:
                name = probelib.errname(e)
                counts[name] = counts.get(name, 0) + 1
            records += len(aux_records(_drain(held)))
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    finally:
        held.close()
        os.close(fd)
    return {"maps": counts, "aux_records": records, "written": written, "cpus": last + 1}


def check_full(args: list[str]) -> dict:
    """An AUX area the reader says is full: aux_tail one aux_size behind aux_head (as a
    reader that consumed nothing of a full area leaves it). perf_aux_output_begin() finds no
    room (aux_head - aux_tail >= aux_size), gives the PMU no handle, disables the event and
    wakes the reader: no byte written, no record, POLLIN. Given room (aux_tail = aux_head)
    it stays quiet until enabled again, then writes."""
    fd = open_test_pmu(chunk=4096, period_us=300)
    rb = RingBuffer(fd, 16)
    aux = AuxArea(fd, rb, 16)
    aux.tail = (aux.head - aux.size) % (1 << 64)
    run_for(fd, 0.2)
    out: dict[str, Any] = {"aux_size": aux.size, "head_while_full": aux.head,
                           "records_while_full": len(aux_records(_drain(rb))),
                           "revents": _revents(fd)}
    aux.tail = aux.head  # room again: a disabled event stays quiet
    time.sleep(0.1)
    out["head_with_room_not_enabled"] = aux.head
    out["records_with_room_not_enabled"] = len(aux_records(_drain(rb)))
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    time.sleep(0.1)
    head = aux.head
    time.sleep(0.1)
    out["writes_after_enable"] = aux.head > head or head > 0
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    out["bad_words_after"] = aux.bad_words(0, min(aux.head, aux.size))
    aux.close()
    rb.close()
    os.close(fd)
    return out


CONTIG = "ringlab_aux_contig"
MAPPED = f"/sys/module/{PMU}/parameters/mapped"
CFG_SKIP_SHIFT = 24


def _mapped() -> int:
    with open(MAPPED) as f:
        return int(f.read())


def open_contig(chunk: int = 4096, skip_words: int = 0, min_pages: int = 0,
                period_us: int = 300, max_chunks: int = 0, aux_watermark: int = 0,
                cpu: int = 0) -> int:
    """A per-CPU event of ringlab_aux_contig (ringlab_aux.c): chunk bytes, skip_words u64s
    skipped before each chunk, setup_aux() refusing fewer than min_pages pages."""
    a = perf.attr(test_pmu_type(CONTIG), chunk | (skip_words << CFG_SKIP_SHIFT) |
                  (max_chunks << CFG_MAX_SHIFT), perf.ATTR_DISABLED | perf.ATTR_SAMPLE_ID_ALL)
    a.config1, a.config2 = period_us, min_pages
    a.sample_type = perf.PERF_SAMPLE_IDENTIFIER
    a.aux_watermark = aux_watermark
    return perf.perf_event_open(a, -1, cpu)


def check_contig(args: list[str]) -> dict:
    """ringlab_aux_contig, a PMU without scatter-gather (PERF_PMU_CAP_AUX_NO_SG) that asks to
    hear of each mapping (event_mapped/event_unmapped), refuses small AUX areas and skips
    bytes for alignment. Observed: the mapped count through mmap, mremap and munmap of the
    data and AUX areas; the data path in contiguous blocks, reader-driven and overwrite; the
    refused small area (setup_aux() NULL: rb_alloc_aux() ENOMEM) and the area allowed; the
    records and aux_head with skips (perf_aux_output_skip())."""
    out: dict[str, Any] = {"mapped_at_start": _mapped()}
    fd = open_contig()
    rb = RingBuffer(fd, 16)
    counts = {"data": _mapped()}
    aux = AuxArea(fd, rb, 16)
    counts["aux"] = _mapped()
    moved = probelib.remap(aux.map.addr, aux.map.length, "move")
    counts["aux_moved"] = _mapped()
    out["moved"] = moved[0]
    if moved[0] == "ok":
        aux.map.addr = moved[1]
    eid = event_id(fd)
    run_for(fd, 0.2)
    recs = aux_records(_drain(rb))
    out["datapath"] = {"records": len(recs), "aux_head": aux.head,
                       "ids_ok": all(r.id == eid for r in recs),
                       "contiguous": all(b.offset == a.offset + a.size
                                         for a, b in zip(recs, recs[1:])),
                       "bad_words": [w for r in recs for w in aux.bad_words(r.offset, r.size)][:8]}
    aux.close()
    counts["aux_unmapped"] = _mapped()
    rb.close()
    counts["all_unmapped"] = _mapped()
    os.close(fd)
    out["mapped"] = counts
    # overwrite: a read-only AUX area, one contiguous block (rb_alloc_aux(): max_order
    # ilog2(nr_pages), refused if the block came smaller)
    fd = open_contig()
    rb = RingBuffer(fd, 16)
    try:
        aux = AuxArea(fd, rb, 8, writable=False)
    except OSError as e:
        out["overwrite"] = {"map": probelib.errname(e)}
    else:
        run_for(fd, 0.3)
        head = aux.head
        out["overwrite"] = {"map": "ok", "aux_size": aux.size, "aux_head": head,
                            "newest_bad_words": aux.bad_words(head - aux.size, aux.size)
                            if head >= aux.size else ["aux_head below aux_size"]}
        aux.close()
    rb.close()
    os.close(fd)
    # the smallest area setup_aux() takes: 8 pages
    fd = open_contig(min_pages=8)
    rb = RingBuffer(fd, 16)
    out["min_pages"] = {}
    for n in (4, 8):
        out["min_pages"][str(n)] = probelib.outcome(partial(_map_aux, fd, rb, n))
    rb.close()
    os.close(fd)
    # skips: 8 words (64 bytes) before each 256-byte chunk, 20 chunks (well inside the area);
    # a 64-byte watermark, so that a skip alone crosses it (perf_aux_output_skip() wakes)
    fd = open_contig(chunk=256, skip_words=8, max_chunks=20, aux_watermark=64)
    rb = RingBuffer(fd, 16)
    aux = AuxArea(fd, rb, 16)
    run_for(fd, 0.2)
    recs = aux_records(_drain(rb))
    out["skips"] = {"skip": 64, "chunk": 256, "records": len(recs), "aux_head": aux.head,
                    "revents": _revents(fd),
                   "offsets": [r.offset for r in recs[:6]], "sizes": sorted({r.size for r in recs}),
                   "bad_words": [w for r in recs for w in aux.bad_words(r.offset, r.size)][:8]}
    aux.close()
    rb.close()
    os.close(fd)
    out["mapped_at_end"] = _mapped()
    return out


def _map_aux(fd: int, rb: RingBuffer, pages: int) -> None:
    AuxArea(fd, rb, pages).close()


def check_alloc_failures(args: list[str]) -> dict:
    """Mapping the test PMU's AUX area (rb_alloc_aux(): the page array, the pages,
    setup_aux()'s buffer) with its 1st, 2nd, ... allocation failing (fault_inject.sweep).
    After each attempt, injection off: a mapping that was made takes the PMU's data; a
    refused one leaves the event able to map its AUX area, and the data written there is
    right; VmPin is as before."""
    fault_inject.prepare()
    pin_start = vm_pin_kb()

    def setup() -> dict:
        fd = open_test_pmu(chunk=4096, period_us=300)
        return {"fd": fd, "rb": RingBuffer(fd, 16)}

    def call(state: dict) -> None:
        state["aux"] = AuxArea(state["fd"], state["rb"], 16)

    def judge(state: dict, outcome: str) -> dict:
        fd, rb = state["fd"], state["rb"]
        seen: dict[str, Any] = {}
        aux = state.get("aux")
        if aux is None:
            try:
                aux = AuxArea(fd, rb, 16)
                seen["maps_after"] = "ok"
            except OSError as e:
                seen["maps_after"] = probelib.errname(e)
        if aux is not None:
            seen["written"] = _aux_written(fd, aux)
            seen["bad_words"] = aux.bad_words(0, min(aux.head, aux.size))
            aux.close()
        rb.close()
        os.close(fd)
        seen["vm_pin_kb"] = vm_pin_kb()
        return seen

    return {"vm_pin_kb": pin_start,
            "map": fault_inject.summary(fault_inject.sweep(setup, call, judge))}


def check_contig_alloc_failures(args: list[str]) -> dict:
    """ringlab_aux_contig (event_mapped/event_unmapped, AUX_NO_SG) with each allocation of a
    call failing in turn (fault_inject.sweep): the first mapping of its buffer, where no page
    table is yet (map_range()'s failure undoes event_mapped with event_unmapped), and its
    read-only AUX area (overwrite: one block of the whole area, refused when the allocator
    falls back to a smaller one). After each attempt, injection off: the PMU's count of live
    mappings back to where it was once all is closed, the event maps again, VmPin as before."""
    fault_inject.prepare()
    pin_start, mapped_start = vm_pin_kb(), _mapped()

    def data_setup() -> dict:
        return {"fd": open_contig()}

    def data_call(state: dict) -> None:
        state["rb"] = RingBuffer(state["fd"], 16, at=NO_PAGE_TABLES)

    def aux_setup() -> dict:
        fd = open_contig()
        return {"fd": fd, "rb": RingBuffer(fd, 16)}

    def aux_call(state: dict) -> None:
        state["aux"] = AuxArea(state["fd"], state["rb"], 8, writable=False)

    def judge(state: dict, outcome: str) -> dict:
        fd, rb, aux = state["fd"], state.get("rb"), state.get("aux")
        seen: dict[str, Any] = {"mapped_while_open": _mapped() - mapped_start}
        if outcome != "ok":   # the call refused: what it asked for maps now
            seen["maps_after"] = probelib.outcome(
                (lambda: RingBuffer(fd, 16).close()) if rb is None else
                (lambda: AuxArea(fd, rb, 8, writable=False).close()))
        if aux is not None:
            aux.close()
        if rb is not None:
            rb.close()
        os.close(fd)
        seen["mapped_after"] = _mapped() - mapped_start
        seen["vm_pin_kb"] = vm_pin_kb()
        return seen

    return {"vm_pin_kb": pin_start,
            "data": fault_inject.summary(fault_inject.sweep(data_setup, data_call, judge)),
            "aux": fault_inject.summary(fault_inject.sweep(aux_setup, aux_call, judge))}


def _verified(aux: AuxArea, start: int, length: int) -> bool:
    """Every u64 of [start, start+length) holds its position: compared a slice at a time."""
    pos, end = start, start + length
    while pos < end:
        off = pos % aux.size
        n = min(end - pos, aux.size - off)
        if aux.map.read(off, n) != array.array("Q", range(pos, pos + n, 8)).tobytes():
            return False
        pos += n
    return True


# perf_event.h struct perf_event_attr flag bits: disabled 0, inherit 1, pinned 2, exclusive 3.
ATTR_PINNED, ATTR_EXCLUSIVE = 1 << 2, 1 << 3
POLL_BITS = (("POLLIN", select.POLLIN), ("POLLERR", select.POLLERR),
             ("POLLHUP", select.POLLHUP))


def _revents(fd: int, timeout_ms: int = 0) -> list[str]:
    p = select.poll()
    p.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
    got = 0
    for _, ev in p.poll(timeout_ms):
        got |= ev
    return [name for name, bit in POLL_BITS if got & bit]


def _read_len(fd: int) -> int | str:
    try:
        return len(os.read(fd, 64))
    except OSError as e:
        return probelib.errname(e)


def check_pinned_error(args: list[str]) -> dict:
    """Pinned test-PMU events on CPU 0 that cannot go on (kernel/events/core.c
    group_can_go_on(): an exclusive group cannot join events already on the PMU), so
    merge_sched_in() puts them in PERF_EVENT_STATE_ERROR: read() and poll() of one without a
    buffer, of one with its buffer mapped, of one whose poll() was already waiting when
    enabling put it in error, and of the healthy pinned event holding the PMU."""
    def open_pinned(flags: int) -> int:
        a = perf.attr(test_pmu_type(PMU), 4096, flags)
        a.config1 = 1_000_000  # a chunk a second, and no AUX area: nothing is ever written
        return perf.perf_event_open(a, -1, 0)

    holder = open_pinned(ATTR_PINNED)
    holder_rb = RingBuffer(holder, 1)
    unmapped = open_pinned(ATTR_PINNED | ATTR_EXCLUSIVE)
    mapped = open_pinned(ATTR_PINNED | ATTR_EXCLUSIVE)
    mapped_rb = RingBuffer(mapped, 1)
    waited = open_pinned(perf.ATTR_DISABLED | ATTR_PINNED | ATTR_EXCLUSIVE)
    waited_rb = RingBuffer(waited, 1)
    before = _revents(waited)
    woke: dict[str, Any] = {}

    def waiter() -> None:
        t = time.monotonic()
        woke["revents"] = _revents(waited, 3000)
        woke["seconds"] = round(time.monotonic() - t, 3)

    th = threading.Thread(target=waiter)
    th.start()
    time.sleep(0.3)
    fcntl.ioctl(waited, perf.PERF_EVENT_IOC_ENABLE)
    th.join()
    out: dict[str, Any] = {"waited_before_enable": before, "waited_poll": woke}
    for name, fd in (("holder", holder), ("unmapped", unmapped), ("mapped", mapped),
                     ("waited", waited)):
        out[name] = {"read_bytes": _read_len(fd), "revents": _revents(fd)}
    for rb in (holder_rb, mapped_rb, waited_rb):
        rb.close()
    for fd in (waited, mapped, unmapped, holder):
        os.close(fd)
    return out


def _unload() -> str:
    """rmmod of the test PMU's module: 'ok' or what delete_module(2) said."""
    import subprocess
    r = subprocess.run(["rmmod", PMU], capture_output=True, text=True)
    return "ok" if r.returncode == 0 else (r.stderr.strip() or f"exit {r.returncode}")


def check_module_unload(args: list[str]) -> dict:
    """The test PMU's module unloaded under a mapping: each event holds a reference to its
    PMU's module (perf_init_event() try_module_get(pmu->module), dropped in _free_event()),
    and a mapping holds its event even after close(); so rmmod is refused while an AUX area
    is mapped, and once everything is unmapped and closed the count is back where it was
    and rmmod works (a reference a mapping path leaked would keep the module forever).
    Unloads the module: the next test that needs the PMU loads it again."""
    out: dict[str, Any] = {"refcnt_before": module_refs(PMU)}
    fd = open_test_pmu(chunk=4096, period_us=2000)
    rb = RingBuffer(fd, 4)
    aux = AuxArea(fd, rb, 4)
    out["refcnt_mapped"] = module_refs(PMU)
    os.close(fd)                                   # the mappings keep the event
    out["refcnt_closed_mapped"] = module_refs(PMU)
    out["rmmod_while_mapped"] = _unload()
    out["loaded_after_refused_rmmod"] = module_refs(PMU) is not None
    aux.close()
    rb.close()
    out["refcnt_unmapped"] = module_refs(PMU)
    out["rmmod_after"] = _unload()
    out["loaded_after_rmmod"] = module_refs(PMU) is not None
    return out


def check_revoke(args: list[str]) -> dict:
    """The test PMU unregistered under a mapped event (7.x: perf_pmu_unregister() revokes
    live events, "perf: Make perf_pmu_unregister() useable"; the event's state REVOKED): a new
    mmap and every ioctl are ENODEV, poll() says EPOLLERR, read() still works, the existing
    mappings stay readable with aux_head frozen, the PMU type is gone (ENOENT), and the event
    no longer holds the module. Then everything unmapped, closed, and the module unloaded
    (the next test that needs the PMU loads it again)."""
    param = f"/sys/module/{PMU}/parameters/unregister"
    if not os.path.exists(param):
        raise probelib.Skip("ringlab_aux has no `unregister` parameter: the kernel's "
                            "include/linux/perf_event.h has no PERF_EVENT_STATE_REVOKED, so "
                            "its perf_pmu_unregister() cannot revoke live events")
    pmu_type = test_pmu_type(PMU)
    fd = open_test_pmu(chunk=4096, period_us=2000)
    rb = RingBuffer(fd, 4)
    aux = AuxArea(fd, rb, 4)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    run_for(fd, 0.1)
    out: dict[str, Any] = {"aux_head_before": aux.head, "refcnt_before": module_refs(PMU)}
    out["unregister"] = probelib.outcome(lambda: _write(param, "1"))
    out["pmu_in_sysfs"] = os.path.exists(f"/sys/bus/event_source/devices/{PMU}")
    out["refcnt_after"] = module_refs(PMU)
    out["mmap_again"] = probelib.outcome(
        lambda: Mapping(fd, rb.length, mmap.PROT_READ | mmap.PROT_WRITE).close())
    out["ioctl_enable"] = probelib.outcome(
        lambda: fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE))
    out["ioctl_disable"] = probelib.outcome(
        lambda: fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE))
    out["poll"] = _revents(fd)
    out["read"] = _read_len(fd)
    head = aux.head
    time.sleep(0.1)
    out["aux_head_frozen"] = aux.head == head
    out["data_head_readable"] = rb.data_head >= 0
    a = perf.attr(pmu_type, 4096, perf.ATTR_DISABLED)
    out["open_old_type"] = probelib.outcome(lambda: os.close(perf.perf_event_open(a, -1, 0)))
    aux.close()
    rb.close()
    os.close(fd)
    out["rmmod"] = _unload()
    out["loaded_after_rmmod"] = module_refs(PMU) is not None
    return out


def check_revoke_unload(args: list[str]) -> dict:
    """The module of a revoked PMU unloaded while its AUX area is still mapped, then the
    area unmapped. A revoke drops the event's module reference (__pmu_detach_event():
    module_put(pmu->module)), but the AUX buffer keeps the PMU's free_aux() pointer
    (rb->free_aux, called from the last AUX munmap: __rb_free_aux()). So either rmmod is
    refused while the area lives, or the munmap must not call into the unloaded module.
    Writes a ringlab line to /dev/kmsg before each step: a crash's console names it."""
    param = f"/sys/module/{PMU}/parameters/unregister"
    if not os.path.exists(param):
        raise probelib.Skip("ringlab_aux has no `unregister` parameter: the kernel's "
                            "include/linux/perf_event.h has no PERF_EVENT_STATE_REVOKED, so "
                            "its perf_pmu_unregister() cannot revoke live events")
    fd = open_test_pmu(chunk=4096, period_us=2000)
    rb = RingBuffer(fd, 4)
    aux = AuxArea(fd, rb, 4)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    run_for(fd, 0.1)
    out: dict[str, Any] = {}
    _mark("revoke-unload: unregister")
    out["unregister"] = probelib.outcome(lambda: _write(param, "1"))
    _mark("revoke-unload: rmmod with the AUX area mapped")
    out["rmmod_while_mapped"] = _unload()
    _mark("revoke-unload: munmap of the AUX area")
    aux.close()
    _mark("revoke-unload: munmap of the data area and close")
    rb.close()
    os.close(fd)
    out["survived"] = True
    if out["rmmod_while_mapped"] != "ok":
        out["rmmod"] = _unload()
    return out


def _mark(text: str) -> None:
    with open("/dev/kmsg", "w") as f:
        f.write(f"ringlab: {text}\n")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def check_throughput(args: list[str]) -> dict:
    """AUX bytes/s through the test PMU and a reader: 64 KiB chunks every 100 us into a 1 MiB
    area for SECONDS, the reader consuming records and advancing aux_tail; once with the
    data only moved, once with every byte checked. ARGS: SECONDS"""
    seconds = float(args[0]) if args else 2
    out = {}
    for mode in ("transport", "verified"):
        fd = open_test_pmu(chunk=65536, period_us=100)
        rb = RingBuffer(fd, 64)
        aux = AuxArea(fd, rb, 256)
        consumed, bad, truncated = 0, 0, 0
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for r in aux_records(_drain(rb)):
                if mode == "verified" and not _verified(aux, r.offset, r.size):
                    bad += 1
                truncated += bool(r.flags & AUX_FLAG_TRUNCATED)
                consumed += r.size
                aux.tail = r.offset + r.size
        took = time.perf_counter() - t0
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
        out[mode] = {"bytes": consumed, "seconds": took, "bytes_per_s": consumed / took,
                     "bad_records": bad, "truncated_records": truncated,
                     "offered_bytes_per_s": 65536 / 100e-6}
        aux.close()
        rb.close()
        os.close(fd)
    return out


CHECKS = probelib.check_table(globals())


def main(argv: list[str]) -> int:
    return probelib.check_main(argv, "perf_aux", "Probe the perf AUX area; prints one JSON "
                               "document of observations for CHECK.", CHECKS, "rounds, seconds")


if __name__ == "__main__":
    probelib.run(main)
