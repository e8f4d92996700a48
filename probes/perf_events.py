"""perf events the probes share: the getppid tracepoint with one sample per call, a dummy
software event, event ids, and this process's VmPin. Stdlib only: this runs in the guest."""
from __future__ import annotations

import fcntl
import os
import struct

import perf_abi as perf
import probelib
import tracefs

TRACEPOINT = "syscalls/sys_enter_getppid"
# The sample layout every check uses: IDENTIFIER | TID | TIME = u64 id, u32 pid, u32 tid,
# u64 time (perf_event.h, PERF_RECORD_SAMPLE field order): 8 + 24 bytes a record.
SAMPLE_TYPE = perf.PERF_SAMPLE_IDENTIFIER | perf.PERF_SAMPLE_TID | perf.PERF_SAMPLE_TIME
SAMPLE_SIZE = perf.HEADER_SIZE + 24


def tracepoint_id(name: str = TRACEPOINT) -> int:
    text = tracefs.read(f"events/{name}/id")
    if text is None:
        raise probelib.Skip(f"kernel has no tracepoint {name} under "
                            f"{' or '.join(tracefs.ROOTS)}")
    return int(text)


def open_counter(flags: int = perf.ATTR_DISABLED, wakeup: int = 0, pid: int = 0, cpu: int = -1,
                 group_fd: int = -1, sample_type: int = SAMPLE_TYPE) -> int:
    """The getppid tracepoint, one sample per call."""
    a = perf.attr(perf.PERF_TYPE_TRACEPOINT, tracepoint_id(), flags)
    a.sample_period = 1
    a.sample_type = sample_type
    a.wakeup_events = wakeup
    return perf.perf_event_open(a, pid, cpu, group_fd)


def open_dummy(flags: int = perf.ATTR_DISABLED, pid: int = 0, cpu: int = -1) -> int:
    return perf.perf_event_open(perf.attr(perf.PERF_TYPE_SOFTWARE, perf.PERF_COUNT_SW_DUMMY,
                                          flags), pid, cpu)


def fire(n: int) -> None:
    for _ in range(n):
        os.getppid()


def event_id(fd: int) -> int:
    buf = bytearray(8)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ID, buf)
    return struct.unpack("<Q", buf)[0]


def lost_count(records: list) -> int:
    """The sum of PERF_RECORD_LOST counts (u64 id, u64 lost) among parsed records."""
    return sum(r.u64(1) for r in records if r.type == perf.PERF_RECORD_LOST)


PMU_DEVICES = "/sys/bus/event_source/devices"


def test_pmu_type(name: str) -> int:
    """The perf type of the lab's test PMU `name` (kernels/modules/NAME, which the test
    loads); Skip with the reason when it is not loaded."""
    path = f"{PMU_DEVICES}/{name}/type"
    try:
        return int(open(path).read())
    except OSError as e:
        raise probelib.Skip(f"the test PMU {name} is not loaded (kernels/modules/{name}): "
                            f"{path}: {e.strerror}") from None


def module_refs(module: str) -> int | None:
    """A module's reference count (/sys/module/NAME/refcnt: each live event of a PMU the
    module provides holds one, perf_init_event() try_module_get()), None when not loaded."""
    try:
        with open(f"/sys/module/{module}/refcnt") as f:
            return int(f.read())
    except FileNotFoundError:
        return None


def vm_pin_kb(pid: int | str = "self") -> int:
    """VmPin of a process in kB (its mm's pinned_vm), -1 if it has none."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmPin:"):
            return int(line.split()[1])
    return -1


def allowance_sizes(pages: int) -> list[int]:
    """Mapping sizes (1 + 2^n pages, or 1) that add up to exactly `pages`, largest first."""
    sizes = []
    while pages > 1:
        size = 1 + (1 << ((pages - 1).bit_length() - 1))  # the largest 1 + 2^n <= pages
        sizes.append(size)
        pages -= size
    return sizes + [1] * pages
