"""Parse the ring buffer's sub-buffer format, as trace_pipe_raw read() and its mmap give it.

A sub-buffer is a header (u64 timestamp, a commit word = bytes of data, plus flags) and events.
Each event starts with a u32: type_len in the low 5 bits, time_delta in the high 27
(events/header_event; kernel/trace/ring_buffer.c, struct ring_buffer_event):
  type_len 1..28  data of type_len * 4 bytes follows the header
  type_len 0      array[0] = length of the data + 4 (itself), data follows array[0]
  29 padding      time_delta 0: the rest of the sub-buffer is unused; else array[0] + 4 bytes
                  of a discarded event
  30 time extend  time_delta | array[0] << 27 added to the running time
  31 time stamp   an absolute time (the top 5 bits restored from the running time)
Data events add time_delta to the running time; paddings add nothing (rb_update_read_stamp).
Little-endian layout (x86, arm64): the bitfield order of header_event differs on big-endian.
Stdlib only: this runs in the guest and is unit-tested on the host.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from trace_abi import EventFormat, HeaderPage

TYPE_DATA_MAX = 28
TYPE_PADDING = 29
TYPE_TIME_EXTEND = 30
TYPE_TIME_STAMP = 31
TS_SHIFT = 27
# ring_buffer.c: an absolute time stamp keeps 59 bits; rb_fix_abs_ts() restores the rest.
TS_MSB = 0xF8 << 56
# The commit word's flags, set on sub-buffers handed to a reader (ring_buffer.c; libtraceevent
# kbuffer-parse.c uses the same masks).
RB_MISSED_EVENTS = 1 << 31
RB_MISSED_STORED = 1 << 30
COMMIT_MASK = (1 << 27) - 1


class ParseError(ValueError):
    """The sub-buffer does not follow the format; says where."""


@dataclass(frozen=True)
class Event:
    offset: int          # of the event header within the sub-buffer
    ts: int              # absolute time, in the buffer's trace_clock units
    payload: bytes       # the event's data (common fields first), 4-byte padded


@dataclass
class SubBuffer:
    timestamp: int
    commit: int                  # bytes of data (flags masked off)
    missed_events: bool
    lost: int | None             # the count stored after the data, when RB_MISSED_STORED
    events: list[Event] = field(default_factory=list)
    end: int = 0                 # offset just past the last complete event
    paddings: int = 0
    time_extends: int = 0
    time_stamps: int = 0


def fix_abs_ts(abs_ts: int, running: int) -> int:
    """rb_fix_abs_ts(): take the top bits from the running time; a wrap adds 1 << 59."""
    if running & TS_MSB:
        abs_ts |= running & TS_MSB
        if abs_ts < running:
            abs_ts += 1 << 59
    return abs_ts


def parse_subbuf(buf: bytes | memoryview, header: HeaderPage = HeaderPage(),
                 tolerant: bool = False) -> SubBuffer:
    """Every event of one sub-buffer, with absolute times; ParseError on a malformed one, or
    with `tolerant` the events before where it stops making sense (`end`): the explorer's
    tally judges what a reader took even from a sub-buffer a broken kernel garbled."""
    if len(buf) < header.data_offset:
        raise ParseError(f"sub-buffer of {len(buf)} bytes is shorter than its header")
    ts = int.from_bytes(buf[header.timestamp_offset:header.timestamp_offset + 8], "little")
    word = int.from_bytes(buf[header.commit_offset:header.commit_offset + header.commit_size],
                          "little")
    commit = word & COMMIT_MASK
    data = header.data_offset
    end = data + commit
    if end > len(buf):
        if not tolerant:
            raise ParseError(f"commit {commit} runs past the sub-buffer ({len(buf)} bytes)")
        end = len(buf)
    lost = None
    if word & RB_MISSED_STORED:
        size = header.commit_size
        lost = int.from_bytes(buf[end:end + size], "little")
    sb = SubBuffer(ts, commit, bool(word & RB_MISSED_EVENTS), lost, end=data)
    pos = data
    try:
        _events(buf, sb, pos, end)
    except ParseError:
        if not tolerant:
            raise
    return sb


def _events(buf: bytes | memoryview, sb: SubBuffer, pos: int, end: int) -> None:
    """The events from pos to end into sb; sb.end is past the last complete one."""
    ts = sb.timestamp
    while pos < end:
        sb.end = pos
        if pos + 4 > end:
            raise ParseError(f"event header at {pos} runs past the commit ({end})")
        (head,) = struct.unpack_from("<I", buf, pos)
        type_len, delta = head & 0x1F, head >> 5
        if type_len == TYPE_PADDING:
            if delta == 0:           # rb_null_event(): the rest is unused
                sb.paddings += 1
                pos = end
                break
            size = 4 + _u32(buf, pos + 4, end)
            sb.paddings += 1
        elif type_len == TYPE_TIME_EXTEND:
            size = 8
            ts += delta | (_u32(buf, pos + 4, end) << TS_SHIFT)
            sb.time_extends += 1
        elif type_len == TYPE_TIME_STAMP:
            size = 8
            ts = fix_abs_ts(delta | (_u32(buf, pos + 4, end) << TS_SHIFT), ts)
            sb.time_stamps += 1
        else:
            data = pos + 4
            size = 4 + type_len * 4
            if type_len == 0:
                length = _u32(buf, pos + 4, end)
                if length < 4:
                    raise ParseError(f"event at {pos}: type_len 0 with array[0] = {length} < 4")
                data, size = pos + 8, 4 + length
            ts += delta
        if pos + size > end:
            raise ParseError(f"event at {pos} (type_len {type_len}, {size} bytes) runs past "
                             f"the commit ({end})")
        if type_len <= TYPE_DATA_MAX:
            sb.events.append(Event(pos, ts, bytes(buf[data:pos + size])))
        pos += size
    sb.end = pos


def _u32(buf: bytes | memoryview, pos: int, end: int) -> int:
    if pos + 4 > end:
        raise ParseError(f"event at {pos - 4}: its array[0] runs past the commit ({end})")
    return struct.unpack_from("<I", buf, pos)[0]


@dataclass(frozen=True)
class Print:
    """One ftrace `print` event: what a trace_marker write records."""
    pid: int
    text: str
    ts: int


class PrintDecoder:
    """Decodes `print` events by the layout events/ftrace/print/format gives."""

    def __init__(self, fmt: EventFormat) -> None:
        self.id = fmt.id
        self.type = fmt.fields["common_type"]
        self.pid = fmt.fields["common_pid"]
        self.buf = fmt.fields["buf"]

    def decode(self, event: Event) -> Print | None:
        """The print event's pid and text, or None for another event type."""
        p = event.payload
        if len(p) < self.buf.offset:
            return None
        if int.from_bytes(p[self.type.offset:self.type.offset + self.type.size],
                          "little") != self.id:
            return None
        pid = int.from_bytes(p[self.pid.offset:self.pid.offset + self.pid.size], "little",
                             signed=True)
        text = p[self.buf.offset:].split(b"\0", 1)[0].decode("utf-8", "replace")
        return Print(pid, text, event.ts)
