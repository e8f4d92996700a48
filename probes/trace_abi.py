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
from dataclasses import dataclass, field

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

# The two GET_READER numbers a kernel may answer, newest first, by the names reports use.
GET_READERS = (("mainline _IO('R',0x20)", TRACE_MMAP_IOCTL_GET_READER),
               ("pre-6.10 _IO('T',0x1)", OLD_GET_READER))
META_WORDS = ("meta_page_size", "meta_struct_len", "subbuf_size", "nr_subbufs")


@dataclass
class MappingFacts:
    """What a page-long mmap of a trace_pipe_raw and the GET_READER ioctls on it showed."""
    map_error: str | None  # the errno's name if the kernel refused the mmap (no mapping ABI)
    words: tuple[int, ...] = ()  # the first four u32 of the meta page (META_WORDS), as mapped
    answered: str | None = None  # the first of GET_READERS that answered, None if none did
    errors: dict[str, str] = field(default_factory=dict)  # those tried before: their errnos
    first_after: int | None = None  # the meta page's first word after the one that answered


def mapping_facts(fd: int) -> MappingFacts:
    """Map the first page of trace_pipe_raw `fd`, read its first words, try GET_READERS in
    order until one answers."""
    try:
        m = Mapping(fd, PAGE)
    except OSError as e:
        return MappingFacts(probelib.errname(e))
    try:
        facts = MappingFacts(None, tuple(m.u32(i) for i in range(0, 16, 4)))
        for name, cmd in GET_READERS:
            try:
                fcntl.ioctl(fd, cmd)
            except OSError as e:
                facts.errors[name] = probelib.errname(e)
                continue
            facts.answered, facts.first_after = name, m.u32(0)
            break
        return facts
    finally:
        m.close()


def judge_abi(facts: MappingFacts, page: int = PAGE) -> dict:
    """Which mapping ABI the facts show: 'mainline' (v6.10+, trace_mmap.h with GET_READER
    _IO('R',0x20)), 'v6.10-rc' (the same meta page, GET_READER _IO('T',0x1)), 'rfc' (seed
    003's ring_buffer_meta_page), 'unknown' (it maps, no GET_READER answers) or 'none'
    (trace_pipe_raw has no mmap); and why."""
    (mainline, _), (old, _) = GET_READERS
    if facts.map_error is not None:
        return {"abi": "none", "why": f"kernel has no trace_pipe_raw mmap: {facts.map_error}"}
    if facts.answered == mainline:
        return {"abi": "mainline", "why": "GET_READER _IO('R',0x20) answers",
                "meta_page_size": facts.first_after}
    if facts.answered is None:
        return {"abi": "unknown", "why": f"trace_pipe_raw maps but neither GET_READER "
                f"answers: _IO('R',0x20) {facts.errors[mainline]}, _IO('T',0x1) "
                f"{facts.errors[old]}"}
    first = facts.first_after
    kind = "v6.10-rc" if first == page else "rfc"
    return {"abi": kind, "why": f"only the pre-6.10 GET_READER _IO('T',0x1) answers "
            f"(_IO('R',0x20): {facts.errors[mainline]}); first meta word {first}"}


def detect_abi(root: str) -> dict:
    """judge_abi() of cpu0's trace_pipe_raw under tracefs `root`."""
    fd = os.open(f"{root}/per_cpu/cpu0/trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
    try:
        return judge_abi(mapping_facts(fd))
    finally:
        os.close(fd)
