"""Report which ring-buffer paths this kernel offers, and how each was detected.

Also the kernel release and the page size. For each of the four paths (perf ring buffer, perf
AUX area, tracefs trace_pipe_raw mmap, SHMEM/detached events) it says whether it is there and
how that was decided.

Run by hand in a guest (as root): python3 probe_capabilities.py
Stdlib only.
"""
from __future__ import annotations

import mmap
import os

import perf_abi as perf
import probelib
import trace_abi
import tracefs
from perf_buffer import AuxArea, RingBuffer
from perf_events import PMU_DEVICES
from probelib import PAGE



def perf_ring() -> dict:
    """perf_event_open of a software dummy event, then mmap of 1+1 pages (control + data)."""
    how = "perf_event_open(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY) and mmap of 1+1 pages"
    try:
        paranoid = int(open("/proc/sys/kernel/perf_event_paranoid").read())
    except OSError:
        paranoid = None
    try:
        fd = perf.perf_event_open(perf.attr(perf.PERF_TYPE_SOFTWARE, perf.PERF_COUNT_SW_DUMMY))
    except OSError as e:
        return {"available": False, "how": how, "error": f"perf_event_open: {probelib.errname(e)}",
                "perf_event_paranoid": paranoid}
    try:
        buf = mmap.mmap(fd, 2 * PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    except OSError as e:
        os.close(fd)
        return {"available": False, "how": how, "error": f"mmap: {probelib.errname(e)}",
                "perf_event_paranoid": paranoid}
    page = perf.read_mmap_page(buf)
    buf.close()
    os.close(fd)
    return {"available": True, "how": how, "perf_event_paranoid": paranoid,
            "control_page": {"version": page.version, "size": page.size,
                             "data_offset": page.data_offset, "data_size": page.data_size}}


def _aux_mmap(pmu_type: int) -> str:
    """Open an event of the PMU and try an AUX mapping: 'aux', or why not (an errno name)."""
    fd, why = None, ""
    for pid, cpu in ((0, -1), (-1, 0)):
        try:
            fd = perf.perf_event_open(perf.attr(pmu_type, 0, perf.ATTR_DISABLED
                                                | perf.ATTR_EXCLUDE_KERNEL), pid, cpu)
            break
        except OSError as e:
            why = f"open: {probelib.errname(e)}"
    if fd is None:
        return why
    try:
        rb = RingBuffer(fd, 1)
    except OSError as e:
        os.close(fd)
        return f"data mmap: {probelib.errname(e)}"
    # ring-buffer ABI section 2: write aux_offset/aux_size, then mmap the AUX area there.
    try:
        AuxArea(fd, rb, 1).close()
        result = "aux"
    except OSError as e:
        result = f"aux mmap: {probelib.errname(e)}"
    rb.close()
    os.close(fd)
    return result


def perf_aux() -> dict:
    """Every PMU in /sys/bus/event_source/devices, tried for an AUX mapping."""
    base = PMU_DEVICES
    pmus = {}
    try:
        names = sorted(os.listdir(base))
    except OSError as e:
        return {"available": False, "how": f"listing {base}", "error": probelib.errname(e)}
    for name in names:
        try:
            pmu_type = int(open(f"{base}/{name}/type").read())
        except (OSError, ValueError):
            continue
        pmus[name] = _aux_mmap(pmu_type)
    capable = sorted(n for n, r in pmus.items() if r == "aux")
    return {"available": bool(capable), "pmus_with_aux": capable, "pmus": pmus,
            "how": "per PMU in /sys/bus/event_source/devices: open an event, mmap 1+1 pages, "
                   "set aux_offset/aux_size, mmap the AUX area (EOPNOTSUPP: no AUX)"}


def trace_mmap() -> dict:
    """mmap of per_cpu/cpu0/trace_pipe_raw, then which GET_READER ioctl the kernel answers."""
    path = tracefs.path("per_cpu/cpu0/trace_pipe_raw")
    how = f"mmap of {path} (PROT_READ, MAP_SHARED), then TRACE_MMAP_IOCTL_GET_READER"
    if not os.path.exists(path):
        return {"available": False, "abi": None, "how": how,
                "error": f"{path} does not exist (tracefs not mounted or no tracing)"}
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        return {"available": False, "abi": None, "how": how,
                "error": f"open {path}: {probelib.errname(e)}"}
    try:
        facts = trace_abi.mapping_facts(fd)
    finally:
        os.close(fd)
    if facts.map_error is not None:
        return {"available": False, "abi": None, "how": how,
                "error": f"kernel has no trace_pipe_raw mmap: {facts.map_error}"}
    return {"available": True, "abi": facts.answered, "how": how,
            "get_reader_errors": facts.errors,
            "meta": dict(zip(trace_abi.META_WORDS, facts.words, strict=True))}


def detached_events() -> dict:
    """The SHMEM/detached-events RFC (seed 002): PERF_FLAG_DETACHED and its filesystem."""
    how = ("perf_event_open(..., PERF_FLAG_DETACHED=0x10) with detached_nr_pages=1, and "
           "'perffs' in /proc/filesystems or /sys/kernel/perf")
    a = perf.attr(perf.PERF_TYPE_SOFTWARE, perf.PERF_COUNT_SW_DUMMY)
    # The RFC put u32 detached_nr_pages at attr offset 112 (mainline: aux_sample_size).
    a.aux_sample_size = 1
    try:
        fd = perf.perf_event_open(a, flags=perf.PERF_FLAG_FD_CLOEXEC
                                  | perf.PERF_FLAG_DETACHED_RFC)
        os.close(fd)
        flag = "accepted"
    except OSError as e:
        flag = probelib.errname(e)
    filesystems = open("/proc/filesystems").read().split()
    has_fs = "perffs" in filesystems or os.path.isdir("/sys/kernel/perf")
    available = flag == "accepted" or has_fs
    detail = f"PERF_FLAG_DETACHED: {flag}; perffs: {'present' if has_fs else 'absent'}"
    return {"available": available, "how": how, "detail": detail,
            **({} if available else {"error": f"kernel has no detached events ({detail})"})}


def main(argv: list[str]) -> int:
    probelib.parser("probe_capabilities", __doc__.strip().splitlines()[0]).parse_args(argv)
    u = os.uname()
    probelib.emit({
        "probe": "capabilities",
        "kernel": {"release": u.release, "version": u.version, "machine": u.machine},
        "page_size": PAGE,
        "cpus_online": os.sysconf("SC_NPROCESSORS_ONLN"),
        "euid": os.geteuid(),
        "paths": {"perf_ring": perf_ring(), "perf_aux": perf_aux(), "trace_mmap": trace_mmap(),
                  "detached_events": detached_events()},
    })
    return 0


if __name__ == "__main__":
    probelib.run(main)
