"""The perf_event ABI for probes: ctypes structures, constants and the syscall wrapper.

Every layout here is from include/uapi/linux/perf_event.h; offsets are asserted on import so a
wrong field fails loudly instead of probing the wrong bytes. Stdlib only: runs in the guest.
"""
from __future__ import annotations

import ctypes
import errno
import platform

from probelib import libc, libc_error

# include/uapi/linux/perf_event.h: enum perf_type_id
PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_TYPE_TRACEPOINT = 2
# enum perf_sw_ids
PERF_COUNT_SW_CPU_CLOCK = 0
PERF_COUNT_SW_DUMMY = 9
# perf_event_open flags (PERF_FLAG_*)
PERF_FLAG_FD_NO_GROUP = 1 << 0
PERF_FLAG_FD_OUTPUT = 1 << 1
PERF_FLAG_PID_CGROUP = 1 << 2
PERF_FLAG_FD_CLOEXEC = 1 << 3
# Not mainline: the SHMEM/detached-events RFC (seed 002) proposed PERF_FLAG_DETACHED = 1 << 4.
PERF_FLAG_DETACHED_RFC = 1 << 4
# ioctls: _IO('$', n) = 0x2400 + n; _IOR/_IOW add direction and size.
PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_DISABLE = 0x2401
PERF_EVENT_IOC_RESET = 0x2403
PERF_EVENT_IOC_SET_OUTPUT = 0x2405
PERF_EVENT_IOC_ID = 0x80082407  # _IOR('$', 7, __u64 *)
PERF_EVENT_IOC_PAUSE_OUTPUT = 0x40042409  # _IOW('$', 9, __u32)

# Bits of perf_event_attr's flag word (the u64 bitfield after read_format).
ATTR_DISABLED = 1 << 0
ATTR_INHERIT = 1 << 1
ATTR_EXCLUDE_KERNEL = 1 << 5
ATTR_EXCLUDE_HV = 1 << 6
ATTR_MMAP = 1 << 8
ATTR_COMM = 1 << 9
ATTR_TASK = 1 << 13
ATTR_WATERMARK = 1 << 14
ATTR_SAMPLE_ID_ALL = 1 << 18
ATTR_WRITE_BACKWARD = 1 << 27

# enum perf_event_sample_format
PERF_SAMPLE_IP = 1 << 0
PERF_SAMPLE_TID = 1 << 1
PERF_SAMPLE_TIME = 1 << 2
PERF_SAMPLE_ADDR = 1 << 3
PERF_SAMPLE_READ = 1 << 4
PERF_SAMPLE_ID = 1 << 6
PERF_SAMPLE_CPU = 1 << 7
PERF_SAMPLE_PERIOD = 1 << 8
PERF_SAMPLE_STREAM_ID = 1 << 9
PERF_SAMPLE_RAW = 1 << 10
PERF_SAMPLE_IDENTIFIER = 1 << 16

# enum perf_event_read_format
PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1
PERF_FORMAT_ID = 1 << 2
PERF_FORMAT_GROUP = 1 << 3
PERF_FORMAT_LOST = 1 << 4

# enum perf_event_type (record types in the ring buffer)
PERF_RECORD_MMAP = 1
PERF_RECORD_LOST = 2
PERF_RECORD_COMM = 3
PERF_RECORD_EXIT = 4
PERF_RECORD_THROTTLE = 5
PERF_RECORD_UNTHROTTLE = 6
PERF_RECORD_FORK = 7
PERF_RECORD_READ = 8
PERF_RECORD_SAMPLE = 9
PERF_RECORD_MMAP2 = 10
PERF_RECORD_AUX = 11
PERF_RECORD_LOST_SAMPLES = 13
PERF_RECORD_MAX = 22  # a type at or above this is not one the kernel writes (v6.12)

# struct perf_event_header: u32 type, u16 misc, u16 size
HEADER_SIZE = 8

# The syscall's number per `uname -m` (arch/x86/entry/syscalls/syscall_64.tbl; arm64 uses
# include/uapi/asm-generic/unistd.h). No default: another arch's number would call another
# syscall, so an arch not listed fails in perf_event_open() naming itself.
SYSCALL_NUMBERS = {"x86_64": 298, "aarch64": 241}
SYS_PERF_EVENT_OPEN = SYSCALL_NUMBERS.get(platform.machine())
PERF_ATTR_SIZE_VER8 = 136


class PerfEventAttr(ctypes.Structure):
    """struct perf_event_attr, PERF_ATTR_SIZE_VER8 (136 bytes)."""
    _fields_ = [
        ("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32), ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64), ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64), ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32), ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64), ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16), ("reserved_2", ctypes.c_uint16),
        ("aux_sample_size", ctypes.c_uint32), ("aux_action", ctypes.c_uint32),
        ("sig_data", ctypes.c_uint64), ("config3", ctypes.c_uint64),
    ]


assert ctypes.sizeof(PerfEventAttr) == PERF_ATTR_SIZE_VER8
assert PerfEventAttr.aux_watermark.offset == 104 and PerfEventAttr.aux_sample_size.offset == 112


class PerfEventMmapPage(ctypes.Structure):
    """The fields of struct perf_event_mmap_page the probes read (byte offsets from the header)."""
    _fields_ = [
        ("version", ctypes.c_uint32), ("compat_version", ctypes.c_uint32),
        ("lock", ctypes.c_uint32), ("index", ctypes.c_uint32), ("offset", ctypes.c_int64),
        ("time_enabled", ctypes.c_uint64), ("time_running", ctypes.c_uint64),
        ("capabilities", ctypes.c_uint64), ("pmc_width", ctypes.c_uint16),
        ("time_shift", ctypes.c_uint16), ("time_mult", ctypes.c_uint32),
        ("time_offset", ctypes.c_uint64), ("time_zero", ctypes.c_uint64),
        ("size", ctypes.c_uint32), ("reserved_1", ctypes.c_uint32),
        ("time_cycles", ctypes.c_uint64), ("time_mask", ctypes.c_uint64),
        ("reserved", ctypes.c_uint8 * (116 * 8)),
        ("data_head", ctypes.c_uint64), ("data_tail", ctypes.c_uint64),
        ("data_offset", ctypes.c_uint64), ("data_size", ctypes.c_uint64),
        ("aux_head", ctypes.c_uint64), ("aux_tail", ctypes.c_uint64),
        ("aux_offset", ctypes.c_uint64), ("aux_size", ctypes.c_uint64),
    ]


assert PerfEventMmapPage.size.offset == 72 and PerfEventMmapPage.data_head.offset == 1024
# offsetof(struct perf_event_mmap_page, __reserved): what perf_event_init_userpage() stores in
# `size`: the header up to and including time_mask, 96 bytes (__u8 __reserved[116*8]).
RESERVED_OFFSET = PerfEventMmapPage.reserved.offset
assert RESERVED_OFFSET == 96
assert PerfEventMmapPage.aux_size.offset == 1080


def attr(type_: int, config: int, flags: int = ATTR_DISABLED) -> PerfEventAttr:
    a = PerfEventAttr()
    a.type, a.size, a.config, a.flags = type_, ctypes.sizeof(PerfEventAttr), config, flags
    return a


def perf_event_open(a: PerfEventAttr, pid: int = 0, cpu: int = -1, group_fd: int = -1,
                    flags: int = PERF_FLAG_FD_CLOEXEC) -> int:
    """perf_event_open(2); raises OSError with the kernel's errno."""
    if SYS_PERF_EVENT_OPEN is None:
        raise OSError(errno.ENOSYS, f"no perf_event_open syscall number for {platform.machine()} "
                      "in probes/perf_abi.py SYSCALL_NUMBERS")
    fd = libc.syscall(SYS_PERF_EVENT_OPEN, ctypes.byref(a), pid, cpu, group_fd, flags)
    if fd < 0:
        raise libc_error()
    return fd


def read_mmap_page(buf) -> PerfEventMmapPage:
    """A copy of the control page at the start of a perf mmap (a mmap.mmap object)."""
    return PerfEventMmapPage.from_buffer_copy(buf[:ctypes.sizeof(PerfEventMmapPage)])
