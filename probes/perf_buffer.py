"""Reading a perf ring buffer (the mmap of 1 + 2^n pages) the way the ABI says to.

include/uapi/linux/perf_event.h, struct perf_event_mmap_page: the kernel publishes data_head;
user space reads it, issues a read barrier (rmb), reads the records between data_tail and
data_head, then a full barrier (mb) and stores data_tail. Records are struct perf_event_header
(u32 type, u16 misc, u16 size) plus payload, 8-byte aligned, and a record may wrap around the
end of the data area. parse_records() is pure so it is tested on the host (tests/unit).
Stdlib only.
"""
from __future__ import annotations

import ctypes
import mmap
import struct
from dataclasses import dataclass

import perf_abi as perf
from probelib import PAGE, Mapping

OFF_DATA_HEAD = perf.PerfEventMmapPage.data_head.offset
OFF_DATA_TAIL = perf.PerfEventMmapPage.data_tail.offset
OFF_DATA_OFFSET = perf.PerfEventMmapPage.data_offset.offset
OFF_DATA_SIZE = perf.PerfEventMmapPage.data_size.offset


@dataclass(frozen=True)
class Record:
    type: int
    misc: int
    size: int
    payload: bytes
    position: int  # the record's start, as a data_head-style byte count
    wrapped: bool  # the record crossed the end of the data area

    def u64(self, index: int) -> int:
        return struct.unpack_from("<Q", self.payload, index * 8)[0]


# struct sample_id (perf_event.h): appended to every non-SAMPLE record when attr.sample_id_all
# is set, with the fields sample_type selects, in this order.
SAMPLE_ID_FIELDS = ((perf.PERF_SAMPLE_TID, ("pid", "tid"), "<II"),
                    (perf.PERF_SAMPLE_TIME, ("time",), "<Q"),
                    (perf.PERF_SAMPLE_ID, ("id",), "<Q"),
                    (perf.PERF_SAMPLE_STREAM_ID, ("stream_id",), "<Q"),
                    (perf.PERF_SAMPLE_CPU, ("cpu", "res"), "<II"),
                    (perf.PERF_SAMPLE_IDENTIFIER, ("identifier",), "<Q"))


def sample_id(record: Record, sample_type: int) -> dict[str, int]:
    """The sample_id trailer of a non-SAMPLE record (attr.sample_id_all)."""
    present = [f for f in SAMPLE_ID_FIELDS if sample_type & f[0]]
    size = 8 * len(present)
    if size == 0:
        return {}
    if size > len(record.payload):
        raise TornRecord(f"record type {record.type} of {record.size} bytes has no room for a "
                         f"{size}-byte sample_id")
    out: dict[str, int] = {}
    off = len(record.payload) - size
    for _, names, fmt in present:
        out.update(zip(names, struct.unpack_from(fmt, record.payload, off), strict=True))
        off += 8
    return out


class TornRecord(Exception):
    """A header that cannot be a record: size 0, unaligned, or past data_head."""


def parse_records(data: bytes, data_size: int, start: int, end: int) -> list[Record]:
    """Records between positions `start` and `end` (data_tail, data_head) of a ring whose data
    area is `data` (data_size bytes). Positions count bytes since the buffer was created; the
    byte at position p lives at data[p % data_size]."""
    return _parse(data, data_size, start, end, None)[0]


def _parse(data: bytes, data_size: int, start: int, end: int, page_size: int | None
           ) -> tuple[list[Record], list[Gap]]:
    """The record walk of parse_records(); with `page_size`, also the zero fills of an
    in-page writer (see parse_records_in_page())."""
    records: list[Record] = []
    gaps: list[Gap] = []
    if end - start > data_size:
        # More unread bytes than the area holds: the writer went over records not yet read
        # (what a writable mapping forbids). Walking them would read the same bytes again
        # and again: on a kernel that does this, a reader that tries spins for minutes.
        raise TornRecord(f"data_head {end} is {end - start} bytes past data_tail {start}, more "
                         f"than the {data_size}-byte data area: unread records were overwritten")
    pos = start
    while pos < end:
        if end - pos < perf.HEADER_SIZE:
            raise TornRecord(f"{end - pos} bytes left at {pos}: less than a header")
        off = pos % data_size
        rtype, misc, size = struct.unpack("<IHH", _ring_bytes(data, data_size, off,
                                                              perf.HEADER_SIZE))
        if size == 0 and page_size is not None:
            room = page_size - pos % page_size
            if room == page_size:
                raise TornRecord(f"size-0 header at {pos}, a page boundary: no gap starts there")
            if pos + room >= end:
                raise TornRecord(f"zero fill at {pos} runs to {pos + room}, at or past "
                                 f"data_head {end}: no record after it")
            fill = bytes(data[off:off + room])  # a page never straddles the end of the area
            nonzero = next((i for i, b in enumerate(fill) if b), None)
            gaps.append(Gap(pos, room, nonzero))
            pos += room
            continue
        if size < perf.HEADER_SIZE or size % 8 or pos + size > end:
            raise TornRecord(f"record at {pos} has type {rtype} size {size} "
                             f"(data_head {end})")
        body = _ring_bytes(data, data_size, off, size)[perf.HEADER_SIZE:]
        records.append(Record(rtype, misc, size, body, pos, off + size > data_size))
        pos += size
    return records, gaps


def _ring_bytes(data: bytes, data_size: int, off: int, n: int) -> bytes:
    if off + n <= data_size:
        return bytes(data[off:off + n])
    return bytes(data[off:]) + bytes(data[:n - (data_size - off)])


# An address 32 TiB up, far from anything a process maps (x86-64 and arm64 user space reach
# 128 TiB at least): every table between the top level and the PTEs is made by the mapping,
# and freed by its munmap (free_pgtables()). A mapping made there has its map_range()'s page
# table allocations swept by fault_inject too.
NO_PAGE_TABLES = 1 << 45


class RingBuffer:
    """An mmap of a perf event's ring buffer: control page plus 2^n data pages."""

    def __init__(self, fd: int, data_pages: int, writable: bool = True,
                 at: int | None = None) -> None:
        self.page = PAGE
        self.length = (1 + data_pages) * self.page
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        self.map = Mapping(fd, self.length, prot, at=at)
        self.base = self.map.addr

    def _u64(self, off: int) -> ctypes.c_uint64:
        return ctypes.c_uint64.from_address(self.base + off)

    @property
    def data_head(self) -> int:
        # An aligned 8-byte load is atomic on x86-64; the ctypes call boundary orders it
        # before the reads that follow it (the rmb of the ABI).
        return self._u64(OFF_DATA_HEAD).value

    @property
    def data_tail(self) -> int:
        return self._u64(OFF_DATA_TAIL).value

    @data_tail.setter
    def data_tail(self, value: int) -> None:
        self._u64(OFF_DATA_TAIL).value = value

    @property
    def data_offset(self) -> int:
        return self._u64(OFF_DATA_OFFSET).value

    @property
    def data_size(self) -> int:
        return self._u64(OFF_DATA_SIZE).value

    def control(self) -> perf.PerfEventMmapPage:
        return perf.PerfEventMmapPage.from_buffer_copy(
            ctypes.string_at(self.base, ctypes.sizeof(perf.PerfEventMmapPage)))

    def data(self) -> bytes:
        return ctypes.string_at(self.base + self.data_offset, self.data_size)

    def read_new(self) -> list[Record]:
        """Records from data_tail to data_head; then data_tail = data_head (consumed)."""
        head = self.data_head
        records = parse_records(self.data(), self.data_size, self.data_tail, head)
        self.data_tail = head
        return records

    def close(self) -> None:
        self.map.close()


class AuxArea:
    """The AUX area of an event whose data buffer is mapped: aux_offset/aux_size are written
    into the control page, then mmap at aux_offset (perf_mmap(): vm_pgoff != 0)."""

    def __init__(self, fd: int, rb: RingBuffer, pages: int, writable: bool = True,
                 offset: int | None = None) -> None:
        self.ctl = perf.PerfEventMmapPage.from_address(rb.base)
        self.offset = rb.length if offset is None else offset
        self.size = pages * PAGE
        self.ctl.aux_offset, self.ctl.aux_size = self.offset, self.size
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        self.map = Mapping(fd, self.size, prot, offset=self.offset)

    @property
    def head(self) -> int:
        return ctypes.c_uint64.from_address(ctypes.addressof(self.ctl) +
                                            perf.PerfEventMmapPage.aux_head.offset).value

    @property
    def tail(self) -> int:
        return self.ctl.aux_tail

    @tail.setter
    def tail(self, value: int) -> None:
        self.ctl.aux_tail = value

    def word_at(self, pos: int) -> int:
        return self.map.u64(pos % self.size)

    def bad_words(self, start: int, length: int) -> list[int]:
        """Absolute positions in [start, start+length) whose u64 is not the position."""
        data = self.map.read(0, self.size)
        bad = []
        for pos in range(start - start % 8, start + length, 8):
            off = pos % self.size
            if struct.unpack_from("<Q", data, off)[0] != pos:
                bad.append(pos)
                if len(bad) > 8:
                    break
        return bad

    def close(self) -> None:
        self.map.close()


# --- rings written with perf_output_begin_forward_in_page() (seed 001, kernels/series/inpage) --

@dataclass(frozen=True)
class Gap:
    """The rest of a page that an in-page writer skipped: `length` bytes from `position` (a
    data_head-style count) to the next page boundary. `nonzero` is the offset in the gap of its
    first byte that is not 0, None if the kernel zero-filled all of it as the seed promises."""
    position: int
    length: int
    nonzero: int | None


def parse_records_in_page(data: bytes, data_size: int, start: int, end: int,
                          page_size: int) -> tuple[list[Record], list[Gap]]:
    """parse_records() for a ring written with perf_output_begin_forward_in_page(), which
    never lets a reservation cross a page of the data area: when the next one does not fit in
    the rest of the page, the kernel reserves that rest too, fills it with zeros and starts
    the record on the next page (seed 001 changelog; __perf_output_begin(), stay_in_page).

    So here, and only here, a header whose size is 0 is not torn: it marks that zero fill,
    and reading goes on at the next page boundary. It is torn at a page boundary (any request
    up to a page fits an empty page, so no gap starts there) and when data_head is inside the
    gap (the fill and the record after it are one reservation, published together). Every
    other rule is parse_records()'s. Returns the records and the gaps, in ring order."""
    if data_size % page_size:
        raise ValueError(f"data area of {data_size} bytes is not whole {page_size}-byte pages")
    return _parse(data, data_size, start, end, page_size)
