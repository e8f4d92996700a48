"""The guest-side sub-buffer parser (probes/trace_buffer.py) and the format-file readers
(probes/trace_abi.py): on pages a real kernel wrote (tests/unit/data) and on pages built byte
by byte for the event types a short run rarely produces."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

import trace_abi  # from probes/ (pytest's pythonpath): guest-side, stdlib only
import trace_buffer as tb

DATA = Path(__file__).resolve().parents[1] / "data"
HEADER = trace_abi.HeaderPage.parse((DATA / "header_page-6.18.txt").read_text())
PRINT = trace_abi.EventFormat.parse((DATA / "print-format-6.18.txt").read_text())


def head(type_len: int, delta: int = 0) -> bytes:
    return struct.pack("<I", type_len | (delta << 5))


def page(events: bytes, ts: int = 1000, flags: int = 0, size: int = 4096,
         tail: bytes = b"") -> bytes:
    body = events + tail
    return (struct.pack("<QQ", ts, len(events) | flags) + body).ljust(size, b"\0")


def data_event(payload: bytes, delta: int = 0) -> bytes:
    payload = payload.ljust((len(payload) + 3) // 4 * 4, b"\0")
    if len(payload) <= 112:
        return head(len(payload) // 4, delta) + payload
    return head(0, delta) + struct.pack("<I", len(payload) + 4) + payload


def test_format_files_give_the_offsets() -> None:
    assert (HEADER.timestamp_offset, HEADER.commit_offset, HEADER.commit_size,
            HEADER.data_offset) == (0, 8, 8, 16)
    assert PRINT.name == "print" and PRINT.id == 5
    assert PRINT.fields["buf"].offset == 16 and PRINT.fields["common_pid"].signed
    with pytest.raises(ValueError, match="no name"):
        trace_abi.EventFormat.parse("format:\n")
    with pytest.raises(ValueError, match="no field"):
        trace_abi.HeaderPage.parse("field: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n")


def test_meta_struct_is_the_uapi_layout() -> None:
    offsets = {name: getattr(trace_abi.TraceBufferMeta, name).offset
               for name, _ in trace_abi.TraceBufferMeta._fields_}
    assert offsets["reader_lost_events"] == 16 and offsets["reader_id"] == 24
    assert offsets["flags"] == 32 and offsets["read"] == 56 and offsets["Reserved2"] == 72
    assert trace_abi.TRACE_MMAP_IOCTL_GET_READER == 0x5220
    assert trace_abi.OLD_GET_READER == 0x5401  # TCGETS: why mainline renamed it


@pytest.mark.parametrize("kernel", ["6.12", "6.18"])
def test_real_pages_from_trace_pipe_raw(kernel: str) -> None:
    """Pages read() from a 16 KiB buffer after 200 marker writes on Debian 6.12.107 and on
    6.18.44: the overwritten ones counted on the first page (RB_MISSED_STORED), the newest
    kept, in order."""
    header = trace_abi.HeaderPage.parse((DATA / f"header_page-{kernel}.txt").read_text())
    fmt = trace_abi.EventFormat.parse((DATA / f"print-format-{kernel}.txt").read_text())
    raw = (DATA / f"trace_pipe_raw-{kernel}.bin").read_bytes()
    pages = [tb.parse_subbuf(raw[i:i + 4096], header) for i in range(0, len(raw), 4096)]
    lost = pages[0].lost
    assert pages[0].missed_events and lost and lost > 0
    assert not any(p.missed_events for p in pages[1:])
    decoder = tb.PrintDecoder(fmt)
    prints = [decoder.decode(e) for p in pages for e in p.events]
    texts = [p.text for p in prints]
    assert all(t.endswith("\n") for t in texts)  # tracing_mark_write() adds the newline
    assert [t.split()[0] for t in texts] == [f"m{i}" for i in range(lost, 200)]
    assert len({p.pid for p in prints}) == 1
    times = [p.ts for p in prints]
    assert times == sorted(times) and times[0] >= pages[0].timestamp
    # Sizes cover both encodings: up to 112 bytes of data inline, more with array[0].
    sizes = {len(e.payload) for p in pages for e in p.events}
    assert min(sizes) <= 112 < max(sizes)


def test_time_extend_stamp_and_padding() -> None:
    events = (data_event(b"a" * 8, delta=5)
              + head(tb.TYPE_TIME_EXTEND, 3) + struct.pack("<I", 2)     # + 3 | 2 << 27
              + data_event(b"b" * 8, delta=1)
              + head(tb.TYPE_PADDING, 7) + struct.pack("<I", 16) + b"\0" * 12  # discarded
              + head(tb.TYPE_TIME_STAMP, 9) + struct.pack("<I", 1)      # absolute 9 | 1 << 27
              + data_event(b"c" * 200, delta=2))
    sb = tb.parse_subbuf(page(events), HEADER)
    ts = [e.ts for e in sb.events]
    assert ts == [1005, 1005 + 3 + (2 << 27) + 1, 9 + (1 << 27) + 2]
    assert [len(e.payload) for e in sb.events] == [8, 8, 200]
    assert (sb.time_extends, sb.time_stamps, sb.paddings) == (1, 1, 1)
    assert sb.end == HEADER.data_offset + len(events)


def test_null_padding_ends_the_page_and_missed_flags() -> None:
    events = data_event(b"x" * 4) + head(tb.TYPE_PADDING, 0) + b"\0" * 20
    sb = tb.parse_subbuf(page(events, flags=tb.RB_MISSED_EVENTS | tb.RB_MISSED_STORED,
                              tail=struct.pack("<Q", 42)), HEADER)
    assert len(sb.events) == 1 and sb.paddings == 1
    assert sb.missed_events and sb.lost == 42
    assert sb.end == HEADER.data_offset + len(events)


def test_absolute_stamp_takes_the_top_bits_from_the_running_time() -> None:
    running = (0x08 << 56) | 5000
    # A smaller low part than the running time's means the 59-bit stamp wrapped.
    assert tb.fix_abs_ts(4000, running) == (0x08 << 56) + (1 << 59) + 4000
    assert tb.fix_abs_ts(6000, running) == (0x08 << 56) | 6000
    assert tb.fix_abs_ts(6000, 5000) == 6000


@pytest.mark.parametrize("bad, where", [
    (page(head(5) + b"\0" * 4)[:16] + struct.pack("<I", 9999), "shorter|runs past"),
    (struct.pack("<QQ", 0, 8) + head(7) + b"\0" * 4 + b"\0" * 100, "runs past the commit"),
    (struct.pack("<QQ", 0, 8) + head(0) + struct.pack("<I", 2) + b"\0" * 100, "array\\[0\\] = 2"),
    (struct.pack("<QQ", 0, 6) + b"\0" * 100, "runs past the commit"),
    (struct.pack("<QQ", 0, 5000) + b"\0" * 100, "runs past the sub-buffer"),
])
def test_malformed_pages_say_where(bad: bytes, where: str) -> None:
    with pytest.raises(tb.ParseError, match=where):
        tb.parse_subbuf(bad, HEADER)


@pytest.mark.parametrize("garble", [
    head(7) + b"\0" * 4,                        # runs past the commit
    head(0) + struct.pack("<I", 2),               # array[0] too small
    head(tb.TYPE_TIME_EXTEND),                    # its array[0] cut off
])
def test_a_tolerant_parse_keeps_the_events_before_the_garble(garble: bytes) -> None:
    good = data_event(b"a" * 8) + data_event(b"b" * 12)
    bad = page(good + garble)
    with pytest.raises(tb.ParseError):
        tb.parse_subbuf(bad, HEADER)
    sb = tb.parse_subbuf(bad, HEADER, tolerant=True)
    assert [e.payload for e in sb.events] == [b"a" * 8, b"b" * 12]
    assert sb.end == HEADER.data_offset + len(good)


def test_a_tolerant_parse_stops_at_the_end_of_a_short_buffer() -> None:
    events = data_event(b"a" * 8) + data_event(b"b" * 8)
    cut = page(events)[:HEADER.data_offset + len(events) - 2]
    sb = tb.parse_subbuf(cut, HEADER, tolerant=True)
    assert [e.payload for e in sb.events] == [b"a" * 8]


def test_print_decoder_ignores_other_events() -> None:
    decoder = tb.PrintDecoder(PRINT)
    other = tb.Event(16, 0, struct.pack("<HBBiQ", 7, 0, 0, 1, 0) + b"hi\0\0")
    mine = tb.Event(16, 0, struct.pack("<HBBiQ", 5, 0, 0, 42, 0) + b"hi\n\0")
    assert decoder.decode(other) is None
    assert decoder.decode(mine) == tb.Print(42, "hi\n", 0)
    assert decoder.decode(tb.Event(16, 0, b"\x05\0")) is None
