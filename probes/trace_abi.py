"""The tracefs ring-buffer mapping ABI: struct trace_buffer_meta, the ioctls, the format files.

Sources: include/uapi/linux/trace_mmap.h (v6.10+), kernel/trace/ring_buffer.c (the sub-buffer
format, described to user space by events/header_page and events/header_event),
../shared/reference/ring-buffer-abi.md section 4, seed 003 (the 2023 RFC this ABI grew from).
Stdlib only: this runs in the guest.
"""
from __future__ import annotations

import ctypes
import fcntl
import os
import re
from dataclasses import dataclass

import probelib
from probelib import PAGE, Mapping


def _IO(type_: str, nr: int) -> int:  # noqa: N802 - the kernel's name (asm-generic/ioctl.h)
    return (ord(type_) << 8) | nr


# trace_mmap.h: #define TRACE_MMAP_IOCTL_GET_READER _IO('R', 0x20) (mainline, v6.10).
TRACE_MMAP_IOCTL_GET_READER = _IO("R", 0x20)
# v6.10-rc and the 2023 RFC (seed 003) used _IO('T', 0x1), which is TCGETS: renamed before 6.10.
OLD_GET_READER = _IO("T", 0x1)
# Seed 003's second ioctl, gone from mainline.
RFC_UPDATE_META_PAGE = _IO("T", 0x2)


class TraceBufferMeta(ctypes.Structure):
    """struct trace_buffer_meta (trace_mmap.h), 80 bytes; `reader` is flattened."""
    _fields_ = [
        ("meta_page_size", ctypes.c_uint32),
        ("meta_struct_len", ctypes.c_uint32),
        ("subbuf_size", ctypes.c_uint32),
        ("nr_subbufs", ctypes.c_uint32),       # "including the reader"
        ("reader_lost_events", ctypes.c_uint64),  # "lost at the time of the reader swap"
        ("reader_id", ctypes.c_uint32),         # "ID range [0 : nr_subbufs - 1]"
        ("reader_read", ctypes.c_uint32),       # "bytes read on the reader subbuf"
        ("flags", ctypes.c_uint64),             # "0 until new features are supported"
        ("entries", ctypes.c_uint64),
        ("overrun", ctypes.c_uint64),
        ("read", ctypes.c_uint64),
        ("Reserved1", ctypes.c_uint64),         # "internal use only"
        ("Reserved2", ctypes.c_uint64),
    ]

    def as_dict(self) -> dict[str, int]:
        return {f[0]: getattr(self, f[0]) for f in self._fields_}


assert ctypes.sizeof(TraceBufferMeta) == 80


# --- format files ------------------------------------------------------------------------

@dataclass(frozen=True)
class Field:
    name: str
    offset: int
    size: int
    signed: bool


_FIELD = re.compile(r"field:\s*(?P<decl>[^;]+);\s*offset:(?P<off>\d+);\s*size:(?P<size>\d+);"
                    r"\s*signed:(?P<signed>-?\d+);")


def parse_fields(text: str) -> dict[str, Field]:
    """The `field:` lines of an events/*/format or events/header_page file, by field name."""
    fields: dict[str, Field] = {}
    for m in _FIELD.finditer(text):
        decl = m.group("decl").strip()
        name = re.sub(r"\[.*\]$", "", decl.split()[-1])
        fields.setdefault(name, Field(name, int(m.group("off")), int(m.group("size")),
                                      m.group("signed") != "0"))
    return fields


@dataclass(frozen=True)
class HeaderPage:
    """Where a sub-buffer's timestamp, commit word and data lie (events/header_page)."""
    timestamp_offset: int = 0
    commit_offset: int = 8
    commit_size: int = 8
    data_offset: int = 16

    @classmethod
    def parse(cls, text: str) -> HeaderPage:
        f = parse_fields(text)
        try:
            return cls(f["timestamp"].offset, f["commit"].offset, f["commit"].size,
                       f["data"].offset)
        except KeyError as e:
            raise ValueError(f"events/header_page has no field {e}") from None


@dataclass(frozen=True)
class EventFormat:
    """One event's id and field layout (events/SYSTEM/NAME/format)."""
    name: str
    id: int
    fields: dict[str, Field]

    @classmethod
    def parse(cls, text: str) -> EventFormat:
        name = re.search(r"^name:\s*(\S+)", text, re.M)
        id_ = re.search(r"^ID:\s*(\d+)", text, re.M)
        if not (name and id_):
            raise ValueError("not an event format file: no name: or ID: line")
        return cls(name.group(1), int(id_.group(1)), parse_fields(text))


# "ring-buffer: Add page statistics to the meta-page" (Vincent Donnefort, the pKVM tracing
# series; 7.2.13 include/uapi/linux/trace_mmap.h): Reserved1 and Reserved2 became pages_lost
# ("Number of pages overwritten by the writer") and pages_touched ("Number of pages written by
# the writer"), at the same offsets; sizeof(struct trace_buffer_meta) stays 80, so
# meta_struct_len does not tell the two apart.
META_PAGES_LOST = TraceBufferMeta.Reserved1.offset
META_PAGES_TOUCHED = TraceBufferMeta.Reserved2.offset
assert (META_PAGES_LOST, META_PAGES_TOUCHED) == (64, 72)


# --- which ABI a kernel speaks -----------------------------------------------------------

def detect_abi(root: str) -> dict:
    """Which mapping ABI the kernel speaks: 'mainline' (v6.10+, trace_mmap.h with GET_READER
    _IO('R',0x20)), 'v6.10-rc' (the same meta page, GET_READER _IO('T',0x1)), 'rfc' (seed
    003's ring_buffer_meta_page) or 'none' (trace_pipe_raw has no mmap)."""
    fd = os.open(f"{root}/per_cpu/cpu0/trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
    try:
        try:
            m = Mapping(fd, PAGE)
        except OSError as e:
            return {"abi": "none", "why": f"kernel has no trace_pipe_raw mmap: {probelib.errname(e)}"}
        try:
            try:
                fcntl.ioctl(fd, TRACE_MMAP_IOCTL_GET_READER)
                return {"abi": "mainline", "why": "GET_READER _IO('R',0x20) answers",
                        "meta_page_size": m.u32(0)}
            except OSError as e:
                mainline = probelib.errname(e)
            try:
                fcntl.ioctl(fd, OLD_GET_READER)
            except OSError as e:
                return {"abi": "unknown", "why": f"trace_pipe_raw maps but neither GET_READER "
                        f"answers: _IO('R',0x20) {mainline}, _IO('T',0x1) {probelib.errname(e)}"}
            first = m.u32(0)
            kind = "v6.10-rc" if first == PAGE else "rfc"
            return {"abi": kind, "why": f"only the pre-6.10 GET_READER _IO('T',0x1) answers "
                    f"(_IO('R',0x20): {mainline}); first meta word {first}"}
        finally:
            m.close()
    finally:
        os.close(fd)
