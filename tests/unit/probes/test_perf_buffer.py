"""The guest-side perf record parser (probes/perf_buffer.py) on rings built byte by byte."""
from __future__ import annotations

import struct

import pytest

import perf_buffer  # noqa: E402  (guest-side module: stdlib only, imported by path)

SAMPLE = 9


def record(rtype: int, payload: bytes) -> bytes:
    return struct.pack("<IHH", rtype, 0, 8 + len(payload)) + payload


def ring_with(records: list[bytes], data_size: int, start: int) -> tuple[bytearray, int]:
    """A data area with `records` written from position `start`, wrapping as the kernel does."""
    data = bytearray(b"\xee" * data_size)
    pos = start
    for rec in records:
        for i, byte in enumerate(rec):
            data[(pos + i) % data_size] = byte
        pos += len(rec)
    return data, pos


def test_records_in_order() -> None:
    recs = [record(SAMPLE, struct.pack("<QQ", i, i * 10)) for i in range(5)]
    data, end = ring_with(recs, 4096, 0)
    out = perf_buffer.parse_records(bytes(data), 4096, 0, end)
    assert [r.u64(0) for r in out] == [0, 1, 2, 3, 4]
    assert all(r.size == 24 and not r.wrapped for r in out)


def test_record_wrapping_the_end_of_the_data_area() -> None:
    size = 128
    recs = [record(SAMPLE, struct.pack("<QQQ", 7, 8, 9))] * 3  # 32-byte records
    # Start 16 bytes before the end: the first record wraps after its first 16 bytes.
    data, end = ring_with(recs, size, 1000 * size - 16)
    out = perf_buffer.parse_records(bytes(data), size, 1000 * size - 16, end)
    assert len(out) == 3
    assert out[0].wrapped and not out[1].wrapped
    assert [r.u64(2) for r in out] == [9, 9, 9]


def test_header_wrapping_the_end() -> None:
    recs = [record(SAMPLE, struct.pack("<Q", 42))]  # 16 bytes
    data, end = ring_with(recs, 64, 60)  # the header itself is split 4 + 4
    out = perf_buffer.parse_records(bytes(data), 64, 60, end)
    assert out[0].u64(0) == 42 and out[0].wrapped


@pytest.mark.parametrize("size", [0, 12, 4096])
def test_torn_header_is_reported_not_looped_on(size: int) -> None:
    data = bytearray(128)
    struct.pack_into("<IHH", data, 0, SAMPLE, 0, size % 65536)
    with pytest.raises(perf_buffer.TornRecord):
        perf_buffer.parse_records(bytes(data), 128, 0, 64)


def test_a_writer_that_lapped_the_reader_is_torn_at_once() -> None:
    # A kernel that overwrites unread records of a writable mapping moves data_head more than
    # the data area past data_tail; the walk must stop there, not lap the same bytes (a
    # probe on such a kernel once spun 161 s doing that).
    recs = [record(SAMPLE, struct.pack("<QQ", i, i)) for i in range(2)]  # 24-byte records
    data, _ = ring_with(recs, 64, 0)
    with pytest.raises(perf_buffer.TornRecord, match="unread records were overwritten"):
        perf_buffer.parse_records(bytes(data), 64, 0, 64 * 100_000)
    assert len(perf_buffer.parse_records(bytes(data), 64, 0, 48)) == 2  # a full area is fine


def test_less_than_a_header_left() -> None:
    data, _ = ring_with([record(SAMPLE, b"\0" * 8)], 64, 0)
    with pytest.raises(perf_buffer.TornRecord, match="less than a header"):
        perf_buffer.parse_records(bytes(data), 64, 0, 4)


def test_lost_record_fields() -> None:
    rec = record(2, struct.pack("<QQ", 5, 873))
    data, end = ring_with([rec], 64, 0)
    (lost,) = perf_buffer.parse_records(bytes(data), 64, 0, end)
    assert (lost.type, lost.u64(0), lost.u64(1)) == (2, 5, 873)


def test_sample_id_trailer() -> None:
    # LOST with sample_id_all and sample_type TID | TIME | IDENTIFIER.
    sample_type = (1 << 1) | (1 << 2) | (1 << 16)
    rec = record(2, struct.pack("<QQIIQQ", 5, 873, 100, 101, 123456, 5))
    data, end = ring_with([rec], 128, 0)
    (lost,) = perf_buffer.parse_records(bytes(data), 128, 0, end)
    sid = perf_buffer.sample_id(lost, sample_type)
    assert sid == {"pid": 100, "tid": 101, "time": 123456, "identifier": 5}
    assert lost.size == 48


def test_sample_id_that_does_not_fit_is_torn() -> None:
    rec = record(2, struct.pack("<Q", 1))
    data, end = ring_with([rec], 64, 0)
    (r,) = perf_buffer.parse_records(bytes(data), 64, 0, end)
    with pytest.raises(perf_buffer.TornRecord, match="no room"):
        perf_buffer.sample_id(r, (1 << 1) | (1 << 2) | (1 << 16))
