"""probes/perf_buffer.py (and the record helpers built on it) on perf rings a real kernel wrote:
tests/unit/data/perf-rings, captured in a 6.12.117 Debian cloud guest by capture.py beside
them. test_perf_records.py shows what the parser does on bytes built to order; these show that
what it reads is what a kernel writes, so a layout both the parser and the made-up rings got
wrong cannot pass here. Every check cites include/uapi/linux/perf_event.h (v6.12)."""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

import perf_abi as perf  # from probes/ (pytest's pythonpath): guest-side, stdlib only
import perf_buffer
import perf_events
import probe_perf_ring
from perf_buffer import Record

DATA = Path(__file__).parent.parent / "data" / "perf-rings"
RINGS = ("side-band", "samples", "lost")

# perf_event.h, enum perf_event_type: PERF_RECORD_SWITCH = 14 (perf_abi.py has no name for it)
PERF_RECORD_SWITCH = 14
# perf_event.h, struct perf_event_header's misc bits
MISC_CPUMODE_MASK = 7 << 0
MISC_KERNEL = 1 << 0
MISC_USER = 2 << 0
MISC_SWITCH_OUT = 1 << 13
MISC_SWITCH_OUT_PREEMPT = 1 << 14
# perf_event.h, PERF_RECORD_SAMPLE: the fields of a sample in the order the kernel writes
# them (those sample_type can select and that are one u64 or two u32 each)
SAMPLE_FIELDS = ((perf.PERF_SAMPLE_IDENTIFIER, ("identifier",), "<Q"),
                 (perf.PERF_SAMPLE_IP, ("ip",), "<Q"),
                 (perf.PERF_SAMPLE_TID, ("pid", "tid"), "<II"),
                 (perf.PERF_SAMPLE_TIME, ("time",), "<Q"),
                 (perf.PERF_SAMPLE_ADDR, ("addr",), "<Q"),
                 (perf.PERF_SAMPLE_ID, ("id",), "<Q"),
                 (perf.PERF_SAMPLE_STREAM_ID, ("stream_id",), "<Q"),
                 (perf.PERF_SAMPLE_CPU, ("cpu", "res"), "<II"),
                 (perf.PERF_SAMPLE_PERIOD, ("period",), "<Q"))
# x86-64's canonical halves: user addresses below, kernel addresses at or above
X86_KERNEL_START = 0xFFFF_8000_0000_0000


@dataclass(frozen=True)
class Ring:
    """One captured ring: its data area and what capture.py wrote down about it."""
    name: str
    meta: dict[str, Any]
    data: bytes

    @property
    def sample_type(self) -> int:
        return int(self.meta["attr"]["sample_type"])

    @property
    def size(self) -> int:
        return int(self.meta["data_size"])

    def records(self) -> list[Record]:
        return perf_buffer.parse_records(self.data, self.size, self.meta["data_tail"],
                                         self.meta["data_head"])

    def sample_id(self, record: Record) -> dict[str, int]:
        return perf_buffer.sample_id(record, self.sample_type)


def load(name: str) -> Ring:
    meta = json.loads((DATA / f"{name}.json").read_text())
    return Ring(name, meta, (DATA / f"{name}.bin").read_bytes())


def sample_id_size(sample_type: int) -> int:
    """perf_event.h, struct sample_id: one u64 (or two u32) per TID, TIME, ID, STREAM_ID, CPU
    and IDENTIFIER selected, at the end of every non-SAMPLE record (attr.sample_id_all)."""
    return 8 * sum(1 for bit, _, _ in perf_buffer.SAMPLE_ID_FIELDS if sample_type & bit)


def sample_fields(record: Record, sample_type: int) -> dict[str, int]:
    """A PERF_RECORD_SAMPLE's fields, in perf_event.h's order. Raises if the payload is longer
    or shorter than the fields sample_type selects: the record size must be exactly them."""
    out: dict[str, int] = {}
    off = 0
    for bit, names, fmt in SAMPLE_FIELDS:
        if sample_type & bit:
            out.update(zip(names, struct.unpack_from(fmt, record.payload, off), strict=True))
            off += 8
    assert off == len(record.payload), (record, sample_type)
    return out


def c_string(raw: bytes) -> bytes:
    """comm[] and filename[] (perf_event.h): NUL-terminated, NUL-padded to a u64 boundary."""
    text, nul, pad = raw.partition(b"\0")
    assert nul and not pad.strip(b"\0") and len(raw) % 8 == 0, raw
    return text


@pytest.fixture(params=RINGS)
def ring(request: pytest.FixtureRequest) -> Ring:
    return load(request.param)


# --- every ring -----------------------------------------------------------------------------

def test_the_control_page_describes_the_data_area_captured(ring: Ring) -> None:
    """perf_event.h, struct perf_event_mmap_page: data_offset is where the buffer starts (the
    page after the control page) and data_size its size (the 2^n data pages mapped); the
    unread bytes, data_head - data_tail, fit in it."""
    m = ring.meta
    assert m["data_offset"] == m["page_size"]
    assert m["data_size"] == m["data_pages"] * m["page_size"] == len(ring.data)
    assert 0 <= m["data_head"] - m["data_tail"] <= m["data_size"]
    assert m["release"].startswith("6.12.")


def test_the_walk_goes_record_by_record_from_data_tail_to_exactly_data_head(ring: Ring) -> None:
    """perf_event.h, struct perf_event_mmap_page: the records user space has to read are the
    bytes from data_tail to data_head; struct perf_event_header.size is the size of the whole
    record, header included. So each record starts where the one before ends, the first at
    data_tail, and the last ends on data_head itself."""
    records = ring.records()
    assert records
    assert records[0].position == ring.meta["data_tail"]
    for a, b in pairwise(records):
        assert b.position == a.position + a.size
    assert records[-1].position + records[-1].size == ring.meta["data_head"]


def test_records_are_whole_u64s_and_of_types_the_kernel_defines(ring: Ring) -> None:
    """perf_event.h lays every record out as the 8-byte header and u64 fields (the char arrays
    comm[] and filename[] padded to a u64: kernel/events/core.c rounds them up to
    sizeof(u64)), so a record's size and its start are multiples of 8; its type is one of
    enum perf_event_type (below PERF_RECORD_MAX)."""
    for r in ring.records():
        assert r.size % 8 == 0 and r.position % 8 == 0, r
        assert r.size == perf.HEADER_SIZE + len(r.payload)
        assert 0 < r.type < perf.PERF_RECORD_MAX, r


def test_a_record_is_marked_wrapped_exactly_when_it_crosses_the_end_of_the_area(
        ring: Ring) -> None:
    """The data area is a ring (perf_event.h: data_head only grows; the byte at position p is
    at data_offset + p % data_size): a record whose bytes run past the end of the area goes on
    at its start."""
    for r in ring.records():
        assert r.wrapped == (r.position // ring.size != (r.position + r.size - 1) // ring.size)


def test_the_lost_count_of_the_ring_is_what_read_reports(ring: Ring) -> None:
    """perf_event.h: PERF_RECORD_LOST { u64 id; u64 lost; } says how many records the kernel
    could not write; read() with PERF_FORMAT_LOST gives the event's own total. capture.py
    stops each ring while it has room, so every loss is reported in the ring."""
    assert perf_events.lost_count(ring.records()) == ring.meta["lost_samples"]


# --- the side-band ring: COMM, FORK, EXIT, MMAP, SWITCH -----------------------------------------

def test_side_band_records_are_the_ones_the_attributes_ask_for() -> None:
    """perf_event.h, struct perf_event_attr: comm gives PERF_RECORD_COMM, task FORK and EXIT,
    mmap MMAP (PROT_EXEC mappings), context_switch SWITCH; a dummy event has no samples."""
    ring = load("side-band")
    types = {r.type for r in ring.records()}
    assert types == {perf.PERF_RECORD_COMM, perf.PERF_RECORD_FORK, perf.PERF_RECORD_EXIT,
                     perf.PERF_RECORD_MMAP, PERF_RECORD_SWITCH}


def test_side_band_sizes_are_the_layouts_plus_sample_id() -> None:
    """perf_event.h: COMM { u32 pid, tid; char comm[]; }, FORK and EXIT { u32 pid, ppid;
    u32 tid, ptid; u64 time; }, MMAP { u32 pid, tid; u64 addr, len, pgoff; char filename[]; },
    SWITCH { } (the header says in or out), each then struct sample_id (sample_id_all)."""
    ring = load("side-band")
    trailer = sample_id_size(ring.sample_type)
    assert trailer == 40  # TID, TIME, ID, CPU, IDENTIFIER
    for r in ring.records():
        body = r.payload[:len(r.payload) - trailer]
        if r.type in (perf.PERF_RECORD_FORK, perf.PERF_RECORD_EXIT):
            assert len(body) == 24, r
        elif r.type == PERF_RECORD_SWITCH:
            assert body == b"", r
        elif r.type == perf.PERF_RECORD_COMM:
            assert c_string(body[8:]), r
        elif r.type == perf.PERF_RECORD_MMAP:
            assert c_string(body[32:]), r


def test_side_band_sample_ids_name_this_event_and_the_task_it_ran_in() -> None:
    """perf_event.h, struct sample_id: pid/tid of the task the record was written in, time,
    id (the event's: PERF_EVENT_IOC_ID, which an inherited child's record shares), cpu, and
    identifier, which duplicates id at a fixed place, the record's last u64. The event was
    on CPU 0 only, and times only go forward."""
    ring = load("side-band")
    m = ring.meta
    tasks = {(m["pid"], m["tid"]), (m["child_pid"], m["child_pid"])}
    ids = [ring.sample_id(r) for r in ring.records()]
    for sid, r in zip(ids, ring.records(), strict=True):
        assert (sid["pid"], sid["tid"]) in tasks, r
        assert sid["id"] == sid["identifier"] == m["event_id"] == r.u64(len(r.payload) // 8 - 1)
        assert sid["cpu"] == m["event_cpu"] and sid["res"] == 0
    assert [s["time"] for s in ids] == sorted(s["time"] for s in ids)


def test_comm_records_carry_the_names_set_by_prctl() -> None:
    """perf_event.h, PERF_RECORD_COMM { u32 pid, tid; char comm[]; }: the capturing process's
    PR_SET_NAME, then its child's (inherit: the child's records come to the parent's ring);
    misc has no PERF_RECORD_MISC_COMM_EXEC (1 << 13), since neither was an exec."""
    ring = load("side-band")
    m = ring.meta
    comms = [(*struct.unpack_from("<II", r.payload), c_string(r.payload[8:-40]).decode(), r.misc)
             for r in ring.records() if r.type == perf.PERF_RECORD_COMM]
    assert comms == [(m["pid"], m["tid"], m["comm"], 0),
                     (m["child_pid"], m["child_pid"], m["child_comm"], 0)]


def test_fork_and_exit_name_the_child_and_its_parent() -> None:
    """perf_event.h, PERF_RECORD_FORK and PERF_RECORD_EXIT { u32 pid, ppid; u32 tid, ptid;
    u64 time; }: the child and the process that forked it. FORK is written in the parent
    (its sample_id is the parent's), EXIT in the child, which had inherited the event; the
    exit comes after the fork."""
    ring = load("side-band")
    m = ring.meta
    child, parent = m["child_pid"], m["pid"]
    by_type = {r.type: r for r in ring.records()
               if r.type in (perf.PERF_RECORD_FORK, perf.PERF_RECORD_EXIT)}
    fork, exit_ = by_type[perf.PERF_RECORD_FORK], by_type[perf.PERF_RECORD_EXIT]
    for r in (fork, exit_):
        assert struct.unpack_from("<IIII", r.payload) == (child, parent, child, m["tid"])
    assert ring.sample_id(fork)["pid"] == parent and ring.sample_id(exit_)["pid"] == child
    assert fork.u64(2) < exit_.u64(2)  # time


def test_mmap_record_names_the_file_mapped_with_prot_exec() -> None:
    """perf_event.h, PERF_RECORD_MMAP { u32 pid, tid; u64 addr; u64 len; u64 pgoff; char
    filename[]; }: the mapping of /bin/true (len whole pages: the vma's), from offset 0, made
    in user space (misc cpumode PERF_RECORD_MISC_USER)."""
    ring = load("side-band")
    m = ring.meta
    (r,) = [r for r in ring.records() if r.type == perf.PERF_RECORD_MMAP]
    pid, tid, addr, length, pgoff = struct.unpack_from("<IIQQQ", r.payload)
    assert (pid, tid) == (m["pid"], m["tid"])
    page = m["page_size"]
    assert addr % page == 0 and pgoff == 0
    assert length == -(-m["mmap_len"] // page) * page
    assert c_string(r.payload[32:-40]).decode() == m["mmap_file"]
    assert r.misc & MISC_CPUMODE_MASK == MISC_USER


def test_a_task_is_switched_out_and_in_by_turns() -> None:
    """perf_event.h, PERF_RECORD_SWITCH: a context switch in or out, flagged by
    PERF_RECORD_MISC_SWITCH_OUT; PERF_RECORD_MISC_SWITCH_OUT_PREEMPT only with it (the task
    was preempted while runnable). One task (its sample_id tid) never goes out, or in, twice
    in a row."""
    ring = load("side-band")
    ways: dict[int, list[bool]] = {}
    for r in ring.records():
        if r.type == PERF_RECORD_SWITCH:
            out = bool(r.misc & MISC_SWITCH_OUT)
            assert out or not r.misc & MISC_SWITCH_OUT_PREEMPT, r
            ways.setdefault(ring.sample_id(r)["tid"], []).append(out)
    assert set(ways) == {ring.meta["tid"], ring.meta["child_pid"]}
    for seq in ways.values():
        assert all(a != b for a, b in pairwise(seq)), seq


# --- the sample ring: cpu-clock PERF_RECORD_SAMPLEs across the end of the area ----------------

def test_samples_are_the_fields_sample_type_selects_and_nothing_else() -> None:
    """perf_event.h, PERF_RECORD_SAMPLE { u64 ip; u32 pid, tid; u64 time; u32 cpu, res;
    u64 period; } for IP|TID|TIME|CPU|PERIOD: 40 bytes after the header, every one."""
    ring = load("samples")
    records = ring.records()
    assert {r.type for r in records} == {perf.PERF_RECORD_SAMPLE}
    assert {r.size for r in records} == {perf.HEADER_SIZE + 40}
    for r in records:
        sample_fields(r, ring.sample_type)


def test_sample_fields_decode_to_this_process_and_this_period() -> None:
    """PERF_RECORD_SAMPLE's pid/tid are the capturing process's (pid 0 in perf_event_open:
    this task only), cpu one the guest has (res is reserved: 0), period the attr's
    sample_period (cpu-clock with a fixed period), time increasing; the header's cpumode says
    where ip was, and on x86-64 the address agrees (PERF_RECORD_MISC_KERNEL: the upper half)."""
    ring = load("samples")
    m = ring.meta
    samples = [(r, sample_fields(r, ring.sample_type)) for r in ring.records()]
    for r, s in samples:
        assert (s["pid"], s["tid"]) == (m["pid"], m["tid"])
        assert s["cpu"] < m["cpus"] and s["res"] == 0
        assert s["period"] == m["attr"]["sample_period"]
        mode = r.misc & MISC_CPUMODE_MASK
        assert mode in (MISC_KERNEL, MISC_USER), r
        if m["machine"] == "x86_64":
            assert (s["ip"] >= X86_KERNEL_START) == (mode == MISC_KERNEL), (r, s)
    times = [s["time"] for _, s in samples]
    assert all(a < b for a, b in pairwise(times))


def test_the_unread_samples_run_across_the_end_of_the_area() -> None:
    """The capture left data_tail past 1.75 areas and data_head past 2.25: the walk goes
    through the end of the data area and on from its start (the ring of
    struct perf_event_mmap_page), with one record split by it (48 does not divide 8192)."""
    ring = load("samples")
    m = ring.meta
    assert m["data_tail"] // ring.size < m["data_head"] // ring.size
    assert sum(r.wrapped for r in ring.records()) == 1


# --- the lost ring: a full ring, then PERF_RECORD_LOST first ---------------------------------

def test_after_a_full_ring_the_first_record_is_lost_with_the_count() -> None:
    """perf_event.h, PERF_RECORD_LOST { u64 id; u64 lost; struct sample_id; }: once the
    reader made room, the kernel writes the count of records it dropped before the next
    record, with the event's id. capture.py consumed all of a full one-page ring: the LOST
    record starts at the old data_head (16 bytes short of the area's end, so it wraps)."""
    ring = load("lost")
    m = ring.meta
    lost, *rest = ring.records()
    assert lost.type == perf.PERF_RECORD_LOST and lost.position == m["full_head"]
    assert lost.size == perf.HEADER_SIZE + 16 + sample_id_size(ring.sample_type)
    assert lost.wrapped
    assert lost.u64(0) == m["event_id"] and lost.u64(1) == m["lost_samples"] >= 20
    assert rest and {r.type for r in rest} == {perf.PERF_RECORD_SAMPLE}


def test_lost_sample_id_is_the_sample_the_kernel_was_writing() -> None:
    """The LOST record's struct sample_id (sample_id_all) is filled from the sample whose
    write found room again (kernel/events/ring_buffer.c, __perf_output_begin()): this task,
    this event, and the time of the first sample after it."""
    ring = load("lost")
    m = ring.meta
    lost, first, *_ = ring.records()
    sid = ring.sample_id(lost)
    assert (sid["pid"], sid["tid"], sid["identifier"]) == (m["pid"], m["tid"], m["event_id"])
    assert sid["time"] == sample_fields(first, ring.sample_type)["time"]


def test_the_lab_sample_reader_decodes_identifier_tid_time_samples() -> None:
    """probe_perf_ring.samples() reads (identifier, pid, tid, time): perf_event.h puts
    IDENTIFIER first and TID, TIME next whatever else is selected, so it reads the lost
    ring's IDENTIFIER|TID|TIME|CPU samples right; and each one is 8 + 32 bytes."""
    ring = load("lost")
    m = ring.meta
    rest = ring.records()[1:]
    assert {r.size for r in rest} == {perf.HEADER_SIZE + 32}
    decoded = probe_perf_ring.samples(rest)
    assert decoded == [(m["event_id"], m["pid"], m["tid"],
                        sample_fields(r, ring.sample_type)["time"]) for r in rest]
