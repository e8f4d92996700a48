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
from probelib import Mapping

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
    out = []
    pos = start
    while pos < end:
        if end - pos < perf.HEADER_SIZE:
            raise TornRecord(f"{end - pos} bytes left at {pos}: less than a header")
        off = pos % data_size
        head = _ring_bytes(data, data_size, off, perf.HEADER_SIZE)
        rtype, misc, size = struct.unpack("<IHH", head)
        if size < perf.HEADER_SIZE or size % 8 or pos + size > end:
            raise TornRecord(f"record at {pos} has type {rtype} size {size} "
                             f"(data_head {end})")
        body = _ring_bytes(data, data_size, off, size)[perf.HEADER_SIZE:]
        out.append(Record(rtype, misc, size, body, pos, off + size > data_size))
        pos += size
    return out


def _ring_bytes(data: bytes, data_size: int, off: int, n: int) -> bytes:
    if off + n <= data_size:
        return bytes(data[off:off + n])
    return bytes(data[off:]) + bytes(data[:n - (data_size - off)])


class RingBuffer:
    """An mmap of a perf event's ring buffer: control page plus 2^n data pages."""

    def __init__(self, fd: int, data_pages: int, writable: bool = True) -> None:
        self.page = mmap.PAGESIZE
        self.length = (1 + data_pages) * self.page
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        self.map = Mapping(fd, self.length, prot)
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
