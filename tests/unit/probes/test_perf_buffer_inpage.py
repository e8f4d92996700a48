"""The in-page reader and judges of probes/probe_perf_inpage.py (and perf_buffer's
parse_records_in_page) on rings built byte by byte: clean rings as the ported
__perf_output_begin(stay_in_page) lays them out, and the faults each judge must catch (a record
crossing a page, a tail not zero-filled, a needless gap, a torn gap, corrupt content)."""
from __future__ import annotations

import struct

import pytest

import perf_buffer  # noqa: E402  (guest-side modules: stdlib only, imported by path)
import probe_perf_inpage as inpage  # noqa: E402
from perf_buffer import TornRecord, parse_records_in_page  # noqa: E402

PAGE = 4096
SAMPLE, LOST = 9, 2
STALE = 0xEE  # what was in the ring before: the kernel does not clear the data area


def sample(seq: int, size: int) -> bytes:
    """A record as ringlab_inpage.c writes it: header, u64 seq, byte i = (seq + i) & 0xff."""
    body = bytes((seq + i) & 0xFF for i in range(16, size))
    return struct.pack("<IHHQ", SAMPLE, 0, size, seq) + body


def lost(n: int) -> bytes:
    return struct.pack("<IHHQQ", LOST, 0, 24, 77, n)


class Ring:
    """A data area of `pages` pages full of stale bytes, written at data_head-style positions
    (position p lives at p % size), the way the kernel writes it."""

    def __init__(self, pages: int, start: int = 0) -> None:
        self.size = pages * PAGE
        self.data = bytearray([STALE]) * self.size
        self.start = self.head = start

    def put(self, blob: bytes) -> int:
        pos = self.head
        for i, b in enumerate(blob):
            self.data[(pos + i) % self.size] = b
        self.head += len(blob)
        return pos

    def in_page(self, *blobs: bytes, zero: bool = True) -> int:
        """One reservation of the blobs together, as the ported code makes it: if it does not
        fit the rest of the page, that rest is zero-filled (unless zero=False) first."""
        need = sum(len(b) for b in blobs)
        room = PAGE - self.head % PAGE
        if need > room:
            self.put(bytes(room) if zero else bytes([STALE]) * room)
        pos = self.head
        for b in blobs:
            self.put(b)
        return pos

    def parse(self) -> tuple[list[perf_buffer.Record], list[perf_buffer.Gap]]:
        return parse_records_in_page(bytes(self.data), self.size, self.start, self.head, PAGE)


def cycle_ring(requests: int, pages: int = 32, start: int = 0) -> Ring:
    ring = Ring(pages, start)
    seq = 0
    for size in inpage.requested_sizes(requests, PAGE):
        if size > PAGE:
            continue  # refused: nothing reserved
        ring.in_page(sample(seq, size))
        seq += 1
    return ring


def test_layout_of_the_first_cycle() -> None:
    # 16, 24, 1000, 2040 fill 3080 bytes; 4088 does not fit the 1016 left; 4096 does not fit
    # the 8 left after it; 3000 + 1096 end exactly at a page end; 4104 is refused; 40.
    positions, gaps, end = inpage.layout(inpage.requested_sizes(10, PAGE), PAGE)
    assert positions == [0, 16, 40, 1040, 4096, 8192, 12288, 15288, 16384]
    assert [(g.position, g.length) for g in gaps] == [(3080, 1016), (8184, 8)]
    assert end == 16424


def test_parser_reads_a_clean_in_page_ring_as_the_model_lays_it_out() -> None:
    ring = cycle_ring(60)
    records, gaps = ring.parse()
    positions, model_gaps, end = inpage.layout(inpage.requested_sizes(60, PAGE), PAGE)
    assert [r.position for r in records] == positions and ring.head == end
    assert [(g.position, g.length) for g in gaps] == [(g.position, g.length) for g in model_gaps]
    assert all(g.nonzero is None for g in gaps)
    j = inpage.judge(records, gaps, PAGE)
    assert j["records"] == 54 and j["gaps"] == 12 and j["gap_lengths"] == [8, 976, 1016]
    assert not j["crossings"] and not j["gap_problems"] and not j["content_problems"]


def test_the_ordinary_parser_stops_at_the_zero_fill() -> None:
    ring = cycle_ring(10)
    with pytest.raises(TornRecord, match=r"record at 3080 has type 0 size 0"):
        perf_buffer.parse_records(bytes(ring.data), ring.size, 0, ring.head)
    assert inpage.abi_parser_outcome(bytes(ring.data), ring.size, 0, ring.head) \
        .startswith("TornRecord: record at 3080 has type 0 size 0")


def test_a_wrapped_ring_read_from_its_tail() -> None:
    # Positions far past the data area's size, as after many passes, and the unread part
    # running over the area's end: the reader works modulo the size, and in-page records
    # never wrap that end (it is a page boundary).
    start = 5 * 8 * PAGE + 6 * PAGE + 1000
    ring = cycle_ring(14, pages=8, start=start)
    records, gaps = ring.parse()
    assert ring.head - start < ring.size and ring.head > 6 * 8 * PAGE
    j = inpage.judge(records, gaps, PAGE)
    assert j["records"] == 13 and j["wrapped"] == 0
    assert not j["crossings"] and not j["gap_problems"] and not j["content_problems"]


def test_a_record_crossing_a_page_is_reported() -> None:
    ring = Ring(4)
    for seq in range(3):
        ring.put(sample(seq, 1504))  # no in-page rule: the third runs over 4096
    records, gaps = ring.parse()
    assert not gaps
    assert inpage.crossings(records, PAGE) == [3008]
    assert inpage.judge(records, gaps, PAGE)["crossings"] == [3008]


def test_a_tail_not_zero_filled_cannot_be_skipped() -> None:
    # The kernel skipped the tail but left the stale bytes: the header there is garbage.
    ring = Ring(4)
    ring.in_page(sample(0, 3000))
    ring.in_page(sample(1, 2000), zero=False)
    with pytest.raises(TornRecord):
        ring.parse()


def test_a_tail_with_a_nonzero_byte_is_reported() -> None:
    ring = Ring(4)
    ring.in_page(sample(0, 3000))
    ring.in_page(sample(1, 2000))
    ring.data[3000 + 500] = 1  # inside the zero fill, past its size-0 header
    records, gaps = ring.parse()
    assert [(g.position, g.length, g.nonzero) for g in gaps] == [(3000, 1096, 500)]
    problems = inpage.gap_problems(records, gaps, PAGE)
    assert problems == ["gap at 3000 (1096 bytes): byte +500 is not zero"]


def test_a_gap_before_a_record_that_fitted_is_reported() -> None:
    ring = Ring(4)
    ring.in_page(sample(0, 3000))
    ring.put(bytes(PAGE - 3000))  # skipped although the next record fits in 1096 bytes
    ring.put(sample(1, 1000))
    records, gaps = ring.parse()
    assert any("moved for nothing" in p for p in inpage.gap_problems(records, gaps, PAGE))


def test_a_lost_record_shares_the_reservation_after_a_gap() -> None:
    # 24-byte PERF_RECORD_LOST + 1080-byte record do not fit 1096 bytes, the record alone
    # would: the gap is right, because the kernel reserves both together.
    ring = Ring(4)
    ring.in_page(sample(0, 3000))
    ring.in_page(lost(3), sample(1, 1080))
    records, gaps = ring.parse()
    assert [g.length for g in gaps] == [1096]
    j = inpage.judge(records, gaps, PAGE)
    assert j["lost"] == 3 and not j["gap_problems"] and not j["content_problems"]


def test_a_size_zero_header_at_a_page_boundary_is_torn() -> None:
    ring = Ring(4)
    ring.in_page(sample(0, PAGE))
    ring.put(bytes(16))
    ring.put(sample(1, 16))
    with pytest.raises(TornRecord, match="page boundary"):
        ring.parse()


def test_a_zero_fill_reaching_data_head_is_torn() -> None:
    ring = Ring(4)
    ring.in_page(sample(0, 3000))
    ring.put(bytes(PAGE - 3000))  # data_head published after the fill, before its record
    with pytest.raises(TornRecord, match="no record after it"):
        ring.parse()


def test_corrupt_content_and_a_hole_in_seq_are_reported() -> None:
    ring = Ring(4)
    ring.in_page(sample(0, 64))
    pos = ring.in_page(sample(1, 64))
    ring.in_page(sample(3, 64))  # seq 2 missing
    ring.data[pos + 40] ^= 0xFF
    records, gaps = ring.parse()
    problems = inpage.content_problems(records)
    assert problems == ["record seq 1 at 64: byte 40 of 64 differs",
                        "record at 128: seq 3, expected 2"]


def test_foreign_record_types_are_reported() -> None:
    ring = Ring(4)
    ring.put(struct.pack("<IHH", 3, 0, 16) + bytes(8))  # a COMM record has no place here
    records, gaps = ring.parse()
    assert inpage.content_problems(records) == ["record at 0: type 3, not SAMPLE or LOST"]


def test_oversize_requests_take_no_room_in_the_model() -> None:
    positions, gaps, end = inpage.layout([PAGE + 8, PAGE, PAGE + 8, 16], PAGE)
    assert positions == [0, PAGE] and not gaps and end == PAGE + 16


def test_the_data_area_must_be_whole_pages() -> None:
    with pytest.raises(ValueError):
        parse_records_in_page(bytes(100), 100, 0, 0, PAGE)
