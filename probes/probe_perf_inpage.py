"""Probe in-page perf output: perf_output_begin_forward_in_page() (seed 001, "perf: add
perf_output_begin_forward_in_page", ported to 6.12 in kernels/series/inpage), driven by the
lab's test producer kernels/modules/ringlab_inpage (loaded by the test). Prints observations
as one JSON document; tests/kernel/test_perf_inpage.py judges them.

The promises, from the seed's changelog and the ported __perf_output_begin() (stay_in_page):
  1. a reservation never crosses a page boundary of the data area;
  2. if it does not fit in the rest of the current page, that rest is filled with zeros and
     the record starts on the next page (and only then: a record that fits is not moved);
  3. a request larger than a page is refused (the seed returns -ENOSPC and counts no loss);
and the ordinary ring rules of include/uapi/linux/perf_event.h (struct perf_event_mmap_page):
records lie between data_tail and data_head, data_head is read before the data, data_tail is
stored once they are read. A record here is PERF_RECORD_SAMPLE: header, u64 seq (the event's
count of records written before it), then byte i of the record (16 <= i < size) = (seq + i) &
0xff; see the top of ringlab_inpage.c for that and the attr.config encoding.

Reading such a ring: a header of size 0 marks the zero fill, and the reader skips to the next
page boundary. That rule lives in perf_buffer.parse_records_in_page(); the ordinary
parse_records() (which calls a size-0 header torn) is left as the ABI has it, and the probe
reports what it makes of the same bytes. The judging functions below are pure and are tested
on the host (tests/unit/probes/test_perf_buffer_inpage.py).

Run by hand in a guest: python3 probe_perf_inpage.py CHECK [ARGS]   (-h). Stdlib only.
"""
from __future__ import annotations

import fcntl
import os
import struct
import time
from collections.abc import Callable

import perf_abi as perf
import probelib
from perf_buffer import Gap, Record, RingBuffer, TornRecord, parse_records, \
    parse_records_in_page
from perf_events import lost_count, test_pmu_type
from probelib import PAGE

PMU = "ringlab_inpage"
PARAMS = "/sys/module/ringlab_inpage/parameters"
COUNTERS = ("written", "refused", "oversize_accepted", "failed", "split")
# ringlab_inpage.c: attr.config bits 32-39 are the requests per timer tick.
CFG_BURST_SHIFT = 32
MIN_RECORD = 16  # header + u64 seq
# The byte pattern of every record body: record byte i is PATTERN[(seq + i) % 256].
PATTERN = bytes(range(256)) * 257


def cycle(page: int = PAGE) -> list[int]:
    """ringlab_inpage.c's built-in cycle of request sizes (attr.config size 0)."""
    return [16, 24, 1000, 2040, page - 8, page, 3000, page - 3000, page + 8, 40]


def requested_sizes(n: int, page: int = PAGE) -> list[int]:
    """The sizes of the first n requests of the built-in cycle."""
    c = cycle(page)
    return [c[i % len(c)] for i in range(n)]


# --- the model and the judges (pure) ----------------------------------------------------------

def layout(sizes: list[int], page: int,
           start: int = 0) -> tuple[list[int], list[Gap], int]:
    """Where the ported __perf_output_begin(stay_in_page) puts requests of `sizes` into an
    empty ring that nothing else writes to: the records' positions, the zero-filled gaps and
    the final data_head. A request above a page is refused and takes no room; one that does
    not fit the rest of its page (gap_size < size) moves to the next page behind a gap; one
    that fits stays where it is."""
    pos, positions, gaps = start, [], []
    for size in sizes:
        if size > page:
            continue
        room = page - pos % page
        if size > room:
            gaps.append(Gap(pos, room, None))
            pos += room
        positions.append(pos)
        pos += size
    return positions, gaps, pos


def crossings(records: list[Record], page: int) -> list[int]:
    """Positions of the records that cross a page boundary (promise 1)."""
    return [r.position for r in records if r.position // page != (r.position + r.size - 1) // page]


def gap_problems(records: list[Record], gaps: list[Gap], page: int) -> list[str]:
    """What is wrong with the gaps (promise 2): a byte that is not zero, a gap not followed by
    a record on the next page, or a gap where the reservation after it would have fitted.
    That reservation is the next record, and the one after it if the next is the
    PERF_RECORD_LOST the kernel writes in front of a record (same reservation)."""
    by_pos = {r.position: i for i, r in enumerate(records)}
    out = []
    for g in gaps:
        if g.nonzero is not None:
            out.append(f"gap at {g.position} ({g.length} bytes): byte +{g.nonzero} is not zero")
        if (g.position + g.length) % page:
            out.append(f"gap at {g.position} ({g.length} bytes) does not end at a page boundary")
        i = by_pos.get(g.position + g.length)
        if i is None:
            out.append(f"gap at {g.position} ({g.length} bytes): no record right after it")
            continue
        need = records[i].size
        if records[i].type == perf.PERF_RECORD_LOST and i + 1 < len(records):
            need += records[i + 1].size
        if need <= g.length:
            out.append(f"gap at {g.position} ({g.length} bytes) before a {need}-byte "
                       f"reservation that fitted in it: the record was moved for nothing")
    return out


def body_problem(r: Record) -> str | None:
    """What is wrong with one of the module's records, None if it is exactly what it wrote."""
    if r.size < MIN_RECORD or r.misc != 0:
        return f"record at {r.position}: size {r.size} misc {r.misc} (want >= 16, misc 0)"
    seq = struct.unpack_from("<Q", r.payload)[0]
    start = (seq + MIN_RECORD) % 256
    want = PATTERN[start:start + r.size - MIN_RECORD]
    if r.payload[8:] != want:
        bad = next(i for i, (a, b) in enumerate(zip(r.payload[8:], want)) if a != b)
        return f"record seq {seq} at {r.position}: byte {MIN_RECORD + bad} of {r.size} differs"
    return None


def content_problems(records: list[Record], first_seq: int | None = 0) -> list[str]:
    """Every SAMPLE is one the module wrote (pattern intact) and their seqs run on without a
    hole from first_seq (None: from the first one seen). seq counts records written, so a hole
    is a record lost after the kernel accepted it. Only SAMPLE and LOST records may be there."""
    out = []
    expect = first_seq
    for r in records:
        if r.type == perf.PERF_RECORD_LOST:
            continue
        if r.type != perf.PERF_RECORD_SAMPLE:
            out.append(f"record at {r.position}: type {r.type}, not SAMPLE or LOST")
            continue
        if (p := body_problem(r)) is not None:
            out.append(p)
        if r.size < MIN_RECORD:
            continue
        seq = struct.unpack_from("<Q", r.payload)[0]
        if expect is not None and seq != expect:
            out.append(f"record at {r.position}: seq {seq}, expected {expect}")
        expect = seq + 1
    return out


def judge(records: list[Record], gaps: list[Gap], page: int,
          first_seq: int | None = 0) -> dict:
    """The observations of one read (or of a whole stream), for the test to judge."""
    samples = [r for r in records if r.type == perf.PERF_RECORD_SAMPLE]
    return {"records": len(samples), "lost": lost_count(records), "gaps": len(gaps),
            "gap_lengths": sorted({g.length for g in gaps}),
            "crossings": crossings(records, page)[:8],
            "wrapped": sum(r.wrapped for r in records),
            "gap_problems": gap_problems(records, gaps, page)[:8],
            "content_problems": content_problems(records, first_seq)[:8]}


def abi_parser_outcome(data: bytes, data_size: int, start: int, end: int) -> str:
    """What the ordinary parse_records() makes of an in-page ring: 'ok', or the TornRecord."""
    try:
        parse_records(data, data_size, start, end)
        return "ok"
    except TornRecord as e:
        return f"TornRecord: {e}"


# --- the module and its events ----------------------------------------------------------------

def counters() -> dict[str, int]:
    return {name: int(open(f"{PARAMS}/{name}").read()) for name in COUNTERS}


def since(before: dict[str, int]) -> dict[str, int]:
    now = counters()
    return {k: now[k] - before[k] for k in COUNTERS}


def last_error() -> int:
    return int(open(f"{PARAMS}/last_error").read())


def open_producer(size: int, requests: int, burst: int = 1, period_us: int = 1000,
                  cpu: int = 0) -> int:
    """An event of the test producer on one CPU (root: a CPU-wide event): `requests` requests
    of `size` bytes (0: the built-in cycle), `burst` a timer tick."""
    a = perf.attr(test_pmu_type(PMU), size | (burst << CFG_BURST_SHIFT), perf.ATTR_DISABLED)
    a.config1, a.config2 = requests, period_us
    a.sample_type = 0  # the module requires it: its record body is not sample fields
    return perf.perf_event_open(a, -1, cpu)


def run_until_done(fd: int, requests: int, before: dict[str, int], timeout: float) -> bool:
    """Enable the event until the module has handled `requests` requests (every request ends
    in exactly one counter), then disable it. False if that took longer than timeout."""
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    deadline = time.monotonic() + timeout
    done = False
    while time.monotonic() < deadline:
        c = since(before)
        # oversize_accepted and split are also counted in written.
        if c["written"] + c["refused"] + c["failed"] >= requests:
            done = True
            break
        time.sleep(0.01)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    return done


def one_shot(size: int, requests: int, pages: int, burst: int) -> dict:
    """One event, `requests` requests into a ring of `pages` data pages that nobody reads
    meanwhile; then everything from 0 to data_head, read with the in-page parser."""
    before = counters()
    fd = open_producer(size, requests, burst)
    rb = RingBuffer(fd, pages)
    try:
        done = run_until_done(fd, requests, before, timeout=30 + requests * 0.01)
        head = rb.data_head
        data = rb.data()  # after data_head (perf_event.h: read data_head, rmb, then data)
        out: dict = {"done": done, "data_head": head, "data_size": rb.data_size,
                     "counters": since(before), "last_error": last_error()}
        try:
            records, gaps = parse_records_in_page(data, rb.data_size, 0, head, PAGE)
        except TornRecord as e:
            out["torn"] = str(e)
            return out
        out.update(judge(records, gaps, PAGE))
        # parse_records_in_page() read every byte up to data_head, or it would have raised.
        out["abi_parser"] = abi_parser_outcome(data, rb.data_size, 0, head)
        out["sizes"] = [r.size for r in records if r.type == perf.PERF_RECORD_SAMPLE]
        out["positions"] = [r.position for r in records]
        out["gap_positions"] = [g.position for g in gaps]
        out["first_gap"] = gaps[0].position if gaps else None
        return out
    finally:
        rb.close()
        os.close(fd)


# --- checks -------------------------------------------------------------------------------

def check_cycle(args: list[str]) -> dict:
    """The built-in cycle of sizes (page ends hit on purpose, one oversize request in ten)
    into a ring big enough for all of it, read once at the end; with the layout the ported
    code must give (layout()) to compare with. ARGS: REQUESTS PAGES"""
    requests = int(args[0]) if args else 60
    pages = int(args[1]) if len(args) > 1 else 64
    out = one_shot(0, requests, pages, burst=10)
    sizes = requested_sizes(requests)
    positions, gaps, end = layout(sizes, PAGE)
    out.update({"page_size": PAGE, "requests": requests,
                "oversize_requests": sum(s > PAGE for s in sizes),
                "expected_sizes": [s for s in sizes if s <= PAGE],
                "expected_positions": positions,
                "expected_gap_positions": [g.position for g in gaps],
                "expected_data_head": end})
    return out


def check_oversize(args: list[str]) -> dict:
    """Requests of a page plus 8 bytes (must all be refused, nothing reserved, no loss
    counted) and, on another event, of exactly a page (must all be written, one a page).
    ARGS: REQUESTS"""
    n = int(args[0]) if args else 5
    return {"page_size": PAGE, "requests": n,
            "over": one_shot(PAGE + 8, n, 16, burst=1),
            "page": one_shot(PAGE, n, 16, burst=1)}


def check_stream(args: list[str]) -> dict:
    """The built-in cycle for SECONDS through a small ring (PAGES data pages) that a reader
    empties as it goes: the data area wraps many times, and each read is judged before
    data_tail lets the kernel write over it. Records the reader was too slow for are lost
    (PERF_RECORD_LOST), never torn. ARGS: SECONDS PAGES"""
    seconds = float(args[0]) if args else 2.0
    pages = int(args[1]) if len(args) > 1 else 8
    before = counters()
    fd = open_producer(0, 0, burst=1, period_us=500)
    rb = RingBuffer(fd, pages)
    records: list[Record] = []
    gaps: list[Gap] = []
    torn = None
    reads = 0
    try:
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
        stop = time.monotonic() + seconds
        while torn is None:
            last = time.monotonic() >= stop
            if last:
                fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
            torn = _read_into(rb, records, gaps)
            reads += 1
            if last:
                break
            time.sleep(0.003)
        out = {"seconds": seconds, "data_size": rb.data_size, "data_head": rb.data_head,
               "reads": reads, "counters": since(before), "torn": torn,
               "passes_over_data_area": rb.data_head // rb.data_size,
               **judge(records, gaps, PAGE)}
        return out
    finally:
        rb.close()
        os.close(fd)


def _read_into(rb: RingBuffer, records: list[Record], gaps: list[Gap]) -> str | None:
    """One reader pass: data_tail to data_head with the in-page parser, then data_tail =
    data_head (perf_event.h: the kernel may write over what is behind data_tail)."""
    head, tail = rb.data_head, rb.data_tail
    data = rb.data()
    try:
        new, new_gaps = parse_records_in_page(data, rb.data_size, tail, head, PAGE)
    except TornRecord as e:
        return str(e)
    records += new
    gaps += new_gaps
    rb.data_tail = head
    return None


def _gate(check: str) -> None:
    """Every check needs the test producer: skip with the exact reason when it is absent."""
    test_pmu_type(PMU)


CHECKS: dict[str, Callable[[list[str]], dict]] = probelib.check_table(globals())


def main(argv: list[str]) -> int:
    return probelib.check_main(argv, "perf_inpage", "Probe in-page perf output "
                               "(perf_output_begin_forward_in_page, seed 001) through the "
                               "ringlab_inpage test producer; prints one JSON document of "
                               "observations for CHECK.", CHECKS,
                               "cycle: REQUESTS PAGES; oversize: REQUESTS; stream: SECONDS PAGES",
                               gate=_gate)


if __name__ == "__main__":
    probelib.run(main)
