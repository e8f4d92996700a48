"""Probe the perf ring buffer: mapping rules, data path, back-pressure, overwrite, protection,
wakeups, SET_OUTPUT, unprivileged use, concurrency. Prints observations as one JSON document;
tests/kernel/test_perf_ring.py judges them against the ABI.

Run by hand in a guest: python3 probe_perf_ring.py CHECK   (python3 probe_perf_ring.py -h)
Known record counts come from the tracepoint syscalls:sys_enter_getppid with sample_period 1:
every os.getppid() is one PERF_RECORD_SAMPLE. Stdlib only.
"""
from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import resource
import select
import struct
import threading
import time
from itertools import pairwise
from typing import Any

import fault_inject
import perf_abi as perf
import probelib
from perf_events import (SAMPLE_SIZE, SAMPLE_TYPE, allowance_sizes, event_id, fire,
                         lost_count, open_counter, open_dummy, tracepoint_id, vm_pin_kb)
from perf_buffer import NO_PAGE_TABLES, RingBuffer, TornRecord, parse_records, sample_id
from probelib import (MAP_ANONYMOUS, MAP_FAILED, MAP_FIXED, MREMAP_DONTUNMAP, MREMAP_FIXED,
                      MREMAP_MAYMOVE, PAGE, PROT_NONE, child_outcome, libc)


def samples(records: list) -> list[tuple[int, int, int, int]]:
    """(id, pid, tid, time) of each PERF_RECORD_SAMPLE."""
    return [struct.unpack("<QIIQ", r.payload[:24]) for r in records
            if r.type == perf.PERF_RECORD_SAMPLE]


def map_result(fd: int, data_pages: int) -> str:
    """'ok' if the event's buffer maps with that many data pages (then unmapped), else the
    errno's name."""
    try:
        RingBuffer(fd, data_pages).close()
        return "ok"
    except OSError as e:
        return probelib.errname(e)


# --- checks -----------------------------------------------------------------------------

def check_lengths(args: list[str]) -> dict:
    """mmap of every length from 1 to 1+64 pages; MAP_PRIVATE; control page fields."""
    results, control = {}, {}
    for n in range(1, 66):
        fd = open_dummy()
        try:
            rb = RingBuffer(fd, n - 1)
        except OSError as e:
            results[n] = probelib.errname(e)
        else:
            results[n] = "ok"
            c = rb.control()
            control[n] = {"version": c.version, "size": c.size, "data_offset": c.data_offset,
                          "data_size": c.data_size}
            rb.close()
        os.close(fd)
    # MAP_PRIVATE of the control page alone too: where the pages are mapped up front
    # (remap_pfn_range(), 7.x) a private mapping of 2+ pages fails in mm's COW rule as well,
    # and only a 1-page one shows whether perf_mmap() itself refuses it.
    private = {pages: _map_private(pages) for pages in (2, 1)}
    fd = open_dummy()
    beyond = map_result(fd, beyond_the_page_array())
    os.close(fd)
    return {"page_size": PAGE, "results": results, "control": control,
            "map_private": private[2], "map_private_control_page": private[1],
            "reserved_offset": perf.RESERVED_OFFSET,
            "beyond_the_page_array": {"data_pages": beyond_the_page_array(), "result": beyond}}


def beyond_the_page_array() -> int:
    """Data pages (a power of two) whose 8-byte page pointers alone fill the largest buddy
    block, PAGE << MAX_PAGE_ORDER: with struct perf_buffer in front, rb_alloc() cannot
    allocate the array (kernel/events/ring_buffer.c rb_alloc(): `if (order_base_2(size) >
    PAGE_SHIFT + MAX_PAGE_ORDER) goto fail`). The orders are /proc/buddyinfo's columns.
    Refused before any page is allocated, so the 2 GiB mapping costs nothing."""
    with open("/proc/buddyinfo") as f:
        orders = len(f.readline().split("zone", 1)[1].split()[1:])
    return (PAGE << (orders - 1)) // 8


def _map_private(pages: int) -> str:
    """mmap(MAP_PRIVATE) of a fresh event's first `pages` pages: 'ok' or the errno's name."""
    fd = open_dummy()
    try:
        probelib.Mapping(fd, pages * PAGE, mmap.PROT_READ | mmap.PROT_WRITE,
                         mmap.MAP_PRIVATE).close()
        return "ok"
    except OSError as e:
        return probelib.errname(e)
    finally:
        os.close(fd)


def check_inherit(args: list[str]) -> dict:
    """perf_mmap() refuses an inherited per-task event counting on any CPU (cpu -1): every
    child would write into the one buffer. The same event bound to CPU 0, and one without
    inherit, map."""
    out = {}
    for name, flags, cpu in (("inherit_cpu_any", perf.ATTR_INHERIT, -1),
                             ("inherit_cpu_0", perf.ATTR_INHERIT, 0),
                             ("no_inherit_cpu_any", 0, -1)):
        fd = open_dummy(perf.ATTR_DISABLED | flags, pid=0, cpu=cpu)
        out[name] = map_result(fd, 1)
        os.close(fd)
    return out


def check_ioctl_beside_sched(args: list[str]) -> dict:
    """ioctl(PERF_EVENT_IOC_ID) from a forked child on the last CPU on an event of the parent
    that schedules in and out on CPU 0 (sleeping in a loop), for a few seconds: _perf_ioctl()
    reads event->state to refuse a revoked event while event_sched_in()/out() set it, both
    allowed at once (an ioctl takes no lock against the event's own scheduling). How many of
    each; a data race is the kernel log's, judged by the plugin."""
    seconds = float(args[0]) if args else 3.0
    last = max(os.sched_getaffinity(0))
    fd = open_dummy(0, pid=0, cpu=-1)      # enabled: it goes in and out with this task
    stop = time.monotonic() + seconds
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.sched_setaffinity(0, {last})
        n = 0
        while time.monotonic() < stop:
            fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ID, bytearray(8))
            n += 1
        os.write(w, str(n).encode())
        os._exit(0)
    os.close(w)
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0})
    sleeps = 0
    try:
        while time.monotonic() < stop:
            time.sleep(0.0005)
            sleeps += 1
    finally:
        os.sched_setaffinity(0, before)
        ioctls = int(os.read(r, 64) or b"0")
        os.close(r)
        os.waitpid(pid, 0)
        os.close(fd)
    return {"ioctls": ioctls, "sleeps": sleeps, "cpus": last + 1}


def check_sharing(args: list[str]) -> dict:
    """A second mmap of the same event: same size shares the buffer, another size is refused;
    once every mapping is gone a new size is accepted (seed 004)."""
    fd = open_counter()
    a = RingBuffer(fd, 2)
    b = RingBuffer(fd, 2)
    a.data_tail = 0x1234 * 8
    shared_tail = b.data_tail == 0x1234 * 8
    a.data_tail = 0
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    fire(5)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    same_head = a.data_head == b.data_head != 0
    # Both ways: a check of only a larger size passes a kernel that tests `<` for `!=`.
    other_size = {"larger": map_result(fd, 4), "smaller": map_result(fd, 1)}
    a.close()
    b.close()
    new_size_after_unmap = map_result(fd, 4)
    os.close(fd)
    return {"tail_written_in_one_seen_in_other": shared_tail, "same_data_head": same_head,
            "second_map_other_size": other_size, "new_size_after_all_unmapped":
            new_size_after_unmap}


def check_datapath(args: list[str]) -> dict:
    """2000 samples through a one-page data area, read in batches of 50 as they come: all
    parsed, none torn, ids and tids ours, data_head monotonic, records wrapping the end."""
    total, batch = 2000, 50
    # 40-byte records (CPU added) do not divide the data area: records must wrap its end.
    fd = open_counter(sample_type=SAMPLE_TYPE | perf.PERF_SAMPLE_CPU)
    my_id = event_id(fd)
    rb = RingBuffer(fd, 1)
    others: dict[int, int] = {}
    heads, seen, wrapped, torn = [], [], 0, None
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    try:
        for _ in range(total // batch):
            fire(batch)
            try:
                records = rb.read_new()
            except TornRecord as e:
                torn = str(e)
                break
            heads.append(rb.data_head)
            wrapped += sum(r.wrapped for r in records)
            for r in records:
                if r.type != perf.PERF_RECORD_SAMPLE:
                    others[r.type] = others.get(r.type, 0) + 1
            seen += samples(records)
    finally:
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    me = os.getpid()
    times = [s[3] for s in seen]
    result = {"fired": total, "samples": len(seen), "data_size": rb.data_size,
              "record_size": SAMPLE_SIZE + 8,
              "ours": sum(1 for s in seen if s[1] == me and s[2] == threading.get_native_id()),
              "id_matches": all(s[0] == my_id for s in seen), "other_record_types": others,
              "wrapped_records": wrapped, "torn": torn,
              "head_monotonic": all(x <= y for x, y in pairwise(heads)),
              "time_monotonic": all(x <= y for x, y in pairwise(times))}
    rb.close()
    os.close(fd)
    return result


def _overfill(rb: RingBuffer) -> int:
    """Samples enough to fill `rb`'s data area twice over: 1000 were 8 buffers of one 4 KiB
    page but half of one 64 KiB page, where nothing was ever dropped or overwritten."""
    return max(1000, 2 * rb.data_size // SAMPLE_SIZE)


def check_backpressure(args: list[str]) -> dict:
    """A writable mapping whose reader stops: the kernel must not overwrite unread records;
    it drops new ones and reports them in PERF_RECORD_LOST once there is room again."""
    # sample_id_all: the LOST record carries the sample_id trailer too (pid/tid, time, id).
    fd = open_counter(flags=perf.ATTR_DISABLED | perf.ATTR_SAMPLE_ID_ALL)
    my_id = event_id(fd)
    rb = RingBuffer(fd, 1)
    fired = _overfill(rb)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    fire(fired)
    first = rb.read_new()  # everything that fitted: the oldest records
    fire(1)  # room again: the kernel writes LOST, then this sample
    second = rb.read_new()
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    s1, s2 = samples(first), samples(second)
    t1 = [s[3] for s in s1]
    result: dict[str, Any] = {
        "fired": fired + 1, "capacity_records": rb.data_size // SAMPLE_SIZE,
        "samples_before_resume": len(s1), "lost_records": sum(
            r.type == perf.PERF_RECORD_LOST for r in first + second),
        "lost_count": lost_count(first + second), "samples_after_resume": len(s2),
        "kept_in_order": all(x <= y for x, y in pairwise(t1)),
        "lost_before_new_sample": [r.type for r in second][:1] == [perf.PERF_RECORD_LOST]}
    lost_recs = [r for r in first + second if r.type == perf.PERF_RECORD_LOST]
    if lost_recs:
        sid = sample_id(lost_recs[0], SAMPLE_TYPE)
        result["lost_sample_id"] = {"pid_is_ours": sid["pid"] == os.getpid(),
                                    "tid_is_ours": sid["tid"] == threading.get_native_id(),
                                    "identifier_is_the_event": sid["identifier"] == my_id,
                                    "id_field_is_the_event": lost_recs[0].u64(0) == my_id,
                                    "record_size": lost_recs[0].size}
    rb.close()
    os.close(fd)
    return result


def check_overwrite(args: list[str]) -> dict:
    """Read-only mapping: overwrite mode. Forward: data_head counts every record and the last
    record written ends at data_head; write_backward: the newest record starts at data_head."""
    out: dict[str, Any] = {}
    for mode, flags in (("forward", perf.ATTR_DISABLED),
                        ("backward", perf.ATTR_DISABLED | perf.ATTR_WRITE_BACKWARD)):
        fd = open_counter(flags)
        rb = RingBuffer(fd, 1, writable=False)
        fired = _overfill(rb)
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
        fire(fired)
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
        head = rb.data_head
        n = 10
        data = rb.data()
        if mode == "forward":
            recs = parse_records(data, rb.data_size, head - n * SAMPLE_SIZE, head)
        else:
            # Backward: data_head is a negative byte count; records follow it, newest first.
            recs = parse_records(data, rb.data_size, head, head + n * SAMPLE_SIZE)
        times = [s[3] for s in samples(recs)]
        out[mode] = {"data_head": head, "data_head_signed": head - (1 << 64)
                     if head >= 1 << 63 else head, "bytes_expected": fired * SAMPLE_SIZE,
                     "data_size": rb.data_size, "newest_times": times}
        rb.close()
        os.close(fd)
    return {"fired": fired, **out}


def check_pause(args: list[str]) -> dict:
    """PERF_EVENT_IOC_PAUSE_OUTPUT: EINVAL without a buffer; with one, writing stops and
    resumes, and what was dropped meanwhile is reported as lost."""
    fd = open_counter()
    try:
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_PAUSE_OUTPUT, 1)
        without_buffer = "ok"
    except OSError as e:
        without_buffer = probelib.errname(e)
    rb = RingBuffer(fd, 4)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    fire(10)
    h1 = rb.data_head
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_PAUSE_OUTPUT, 1)
    fire(10)
    h2 = rb.data_head
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_PAUSE_OUTPUT, 0)
    fire(10)
    h3 = rb.data_head
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    records = rb.read_new()
    rb.close()
    os.close(fd)
    return {"pause_without_buffer": without_buffer, "head_before_pause": h1,
            "head_after_paused_events": h2, "head_after_resume": h3,
            "samples": len(samples(records)), "lost_count": lost_count(records)}


def check_protection(args: list[str]) -> dict:
    """A store into a data page faults; a forked child does not inherit the mapping."""
    def store_into_data_page() -> str:
        fd = open_dummy()
        rb = RingBuffer(fd, 1)
        ctypes.c_uint64.from_address(rb.base + PAGE).value = 1
        return "store succeeded"

    def store_into_read_data_page() -> str:
        # A load maps the page read-only first, so the store takes the write-protect fault
        # through ->page_mkwrite (perf_mmap_fault with FAULT_FLAG_MKWRITE), not ->fault.
        fd = open_dummy()
        rb = RingBuffer(fd, 1)
        word = ctypes.c_uint64.from_address(rb.base + PAGE)
        _ = word.value
        word.value = 1
        return "store succeeded"

    def store_into_control_page() -> str:
        fd = open_dummy()
        rb = RingBuffer(fd, 1)
        rb.data_tail = 8
        return "store succeeded"

    fd = open_dummy()
    rb = RingBuffer(fd, 1)
    start = rb.base

    def child_maps() -> str:
        with open("/proc/self/maps") as f:
            return str(any(int(line.split("-")[0], 16) == start for line in f))

    in_parent = child_maps()
    result = {"data_page_store": child_outcome(store_into_data_page),
              "read_data_page_store": child_outcome(store_into_read_data_page),
              "control_page_store": child_outcome(store_into_control_page),
              "mapping_in_parent": in_parent == "True",
              "mapping_in_forked_child": child_outcome(child_maps)["output"] == "True"}
    rb.close()
    os.close(fd)
    return result


def _vma_ops(addr: int, length: int, grown: list[tuple[int, int]]) -> dict:
    """Each way to split a 1 + 2 page buffer VMA at its last page, to grow it by a page (in
    place, or moving: where it went is appended to `grown`) and to move it keeping the old
    range (MREMAP_DONTUNMAP), as a callable returning whether the call succeeded."""
    last = ctypes.c_void_p(addr + length - PAGE)

    def grow(flags: int, by: int = PAGE) -> bool:
        new = libc.mremap(ctypes.c_void_p(addr), length, length + by, flags, None)
        if new in (None, MAP_FAILED):
            return False
        grown.append((new, length + by))
        return True

    return {
        "growing_mremap": lambda: grow(0),
        "growing_mremap_maymove": lambda: grow(MREMAP_MAYMOVE),
        "dontunmap_move": lambda: grow(MREMAP_MAYMOVE | MREMAP_DONTUNMAP, 0),
        "partial_munmap": lambda: libc.munmap(last, PAGE) == 0,
        "shrinking_mremap": lambda: libc.mremap(ctypes.c_void_p(addr), length, length - PAGE,
                                                 0, None) not in (None, MAP_FAILED),
        "map_fixed_over_part": lambda: libc.mmap(
            last, PAGE, mmap.PROT_READ, mmap.MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
        not in (None, MAP_FAILED),
        "mprotect_part": lambda: libc.mprotect(last, PAGE, mmap.PROT_READ) == 0,
    }


def _try_on_fresh_buffer(operation: str) -> dict:
    """One split or growth attempt on a fresh buffer: the call's result, the VMAs of the
    range after it, the control page if it is still mapped, and, once every part is
    unmapped, whether the event maps again with another size (the buffer was released:
    seed 004) and VmPin."""
    length = 3 * PAGE
    pin_before = vm_pin_kb()
    fd = open_dummy()
    m = probelib.Mapping(fd, length, mmap.PROT_READ | mmap.PROT_WRITE)
    addr = m.addr
    before = probelib.vmas_in(addr, length)
    ctypes.set_errno(0)
    grown: list[tuple[int, int]] = []
    out: dict[str, Any] = {
        "result": probelib.errno_result(_vma_ops(addr, length, grown)[operation]()),
        "vmas_before": before, "vmas_after": probelib.vmas_in(addr, length)}
    after = out["vmas_after"]
    if after and after[0][0] == 0 and after[0][2].startswith("r") and after[0][2][3] == "s":
        out["data_size_after"] = ctypes.c_uint64.from_address(
            addr + perf.PerfEventMmapPage.data_size.offset).value
    libc.munmap(ctypes.c_void_p(addr), length)
    for new, new_length in grown:
        libc.munmap(ctypes.c_void_p(new), new_length)
    out["new_size_after_unmap"] = map_result(fd, 4)
    os.close(fd)
    out["vm_pin_kb_after"] = vm_pin_kb()
    out["vm_pin_kb_before"] = pin_before
    return out


def check_vma(args: list[str]) -> dict:
    """Splitting the buffer's VMA (partial munmap, shrinking mremap, MAP_FIXED over a part,
    mprotect of a part) and growing it, observed with their side effects; and moving it
    whole (mremap to a new address). The splits and growths run with perf_event_mlock_kb 0
    (as root, when it may write it), so that every page of a buffer is charged to pinned_vm:
    a charge a refused split kept (the buffer never released) shows in VmPin."""
    mlock = "/proc/sys/kernel/perf_event_mlock_kb"
    saved = open(mlock).read().strip()
    try:
        with open(mlock, "w") as f:
            f.write("0")
        pinned_all = True
    except OSError:
        pinned_all = False
    try:
        out: dict[str, Any] = {op: _try_on_fresh_buffer(op) for op in _vma_ops(0, 0, [])}
    finally:
        if pinned_all:
            with open(mlock, "w") as f:
                f.write(saved)
    out["mlock_kb_0"] = pinned_all
    length = 3 * PAGE
    fd = open_dummy()
    addr = probelib.Mapping(fd, length, mmap.PROT_READ | mmap.PROT_WRITE).addr
    # Reserve a target, then move the whole buffer there.
    target = libc.mmap(None, length, PROT_NONE, mmap.MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    moved = libc.mremap(ctypes.c_void_p(addr), length, length, MREMAP_MAYMOVE | MREMAP_FIXED,
                         ctypes.c_void_p(target))
    ok = moved not in (None, MAP_FAILED)
    out["whole_mremap"] = probelib.errno_result(ok)
    if ok:
        out["control_page_after_move"] = {
            "data_offset": ctypes.c_uint64.from_address(moved + 1040).value,
            "data_size": ctypes.c_uint64.from_address(moved + 1048).value}
        libc.munmap(ctypes.c_void_p(moved), length)
    else:
        libc.munmap(ctypes.c_void_p(addr), length)
        libc.munmap(ctypes.c_void_p(target), length)
    os.close(fd)
    return {"release": os.uname().release, **out}


def map_the_allowance() -> dict:
    """Map exactly this user's perf_event_mlock_kb x online CPUs in buffers, then one page
    more; report each result and VmPin. With nothing of this user charged before, the fill
    all goes to user->locked_vm (VmPin 0) and the page more past it (perf_mmap())."""
    page_kb = PAGE // 1024
    limit = int(open("/proc/sys/kernel/perf_event_mlock_kb").read()) // page_kb \
        * os.sysconf("SC_NPROCESSORS_ONLN")
    held, fill = [], []
    flags = perf.ATTR_DISABLED | perf.ATTR_EXCLUDE_KERNEL | perf.ATTR_EXCLUDE_HV
    for size in allowance_sizes(limit) + [1]:
        fd = open_dummy(flags)
        try:
            held.append((fd, RingBuffer(fd, size - 1)))
            result = "ok"
        except OSError as e:
            os.close(fd)
            result = probelib.errname(e)
        fill.append({"pages": size, "result": result, "vm_pin_kb": vm_pin_kb()})
    for fd, rb in held:
        rb.close()
        os.close(fd)
    return {"allowance_pages": limit, "fill": fill[:-1], "page_more": fill[-1]}


def check_leak(args: list[str]) -> dict:
    """ROUNDS rounds of open, mmap 1+8 pages, close and munmap in both orders; then the
    user's whole allowance, exactly (map_the_allowance()), before and after the rounds: a
    locked_vm charge the rounds leaked would leave less after than before. Unprivileged,
    RLIMIT_MEMLOCK is set to 0 first, so that what does not fit the allowance is EPERM (perf_mmap(): pinned_vm + extra > RLIMIT_MEMLOCK without
    CAP_IPC_LOCK) instead of going to VmPin."""
    rounds = int(args[0]) if args else 300
    if os.geteuid() != 0:
        resource.setrlimit(resource.RLIMIT_MEMLOCK,
                           (0, resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]))
    start_pin = vm_pin_kb()
    before = map_the_allowance()  # the baseline: what earlier work left charged shows here
    flags = perf.ATTR_DISABLED | perf.ATTR_EXCLUDE_KERNEL | perf.ATTR_EXCLUDE_HV
    failure = None
    for i in range(rounds):
        try:
            fd = open_dummy(flags)
        except OSError as e:
            failure = {"round": i, "step": "perf_event_open", "errno": probelib.errname(e)}
            break
        try:
            rb = RingBuffer(fd, 8)
        except OSError as e:
            os.close(fd)
            failure = {"round": i, "step": "mmap", "errno": probelib.errname(e)}
            break
        if i % 2:
            os.close(fd)
            rb.close()
        else:
            rb.close()
            os.close(fd)
    return {"rounds": rounds, "euid": os.geteuid(), "vm_pin_kb_start": start_pin,
            "vm_pin_kb_end": vm_pin_kb(), "failure": failure,
            "rlimit_memlock": resource.getrlimit(resource.RLIMIT_MEMLOCK)[0],
            "page_kb": PAGE // 1024, "before": before, **map_the_allowance()}


PERF_COUNT_SW_PAGE_FAULTS = 2  # include/uapi/linux/perf_event.h, enum perf_sw_ids


def _open_fault_sampler() -> int:
    """A software event sampling every page fault of this task in user space (what any user
    may open at perf_event_paranoid 2): touching N fresh pages writes at least N samples."""
    a = perf.attr(perf.PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS,
                  perf.ATTR_DISABLED | perf.ATTR_EXCLUDE_KERNEL | perf.ATTR_EXCLUDE_HV)
    a.sample_period, a.sample_type = 1, SAMPLE_TYPE
    return perf.perf_event_open(a, 0, -1)


def _good_map(fd: int, data_pages: int) -> dict:
    """The good mapping: its result and, if it maps, what its control page says."""
    try:
        rb = RingBuffer(fd, data_pages)
    except OSError as e:
        return {"result": probelib.errname(e)}
    c = rb.control()
    rb.close()
    return {"result": "ok", "data_offset": c.data_offset, "data_size": c.data_size}


def _samples_written(rb: RingBuffer, fd: int, pages: int = 16) -> int:
    """Samples the event writes into `rb` while this task faults in `pages` fresh pages."""
    anon = libc.mmap(None, pages * PAGE, mmap.PROT_READ | mmap.PROT_WRITE,
                      mmap.MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    for i in range(pages):
        ctypes.c_uint8.from_address(anon + i * PAGE).value = 1
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    libc.munmap(ctypes.c_void_p(anon), pages * PAGE)
    return len(samples(rb.read_new()))


def check_refusals_undone(args: list[str]) -> dict:
    """Every refusal of perf_mmap() the suite provokes, on one event, each followed by the
    good mapping again: a refused mmap must leave the event, the buffer and the charges as
    they were. Refused with nothing mapped: 1+3 pages (EINVAL), MAP_PRIVATE (EINVAL), a size
    past the user's allowance plus RLIMIT_MEMLOCK (EPERM unprivileged: perf_mmap()'s
    locked > lock_limit); refused while mapped: another size (EINVAL). Afterwards the event
    still writes samples into its buffer, VmPin is back, the user's whole allowance maps as
    before (map_the_allowance()), and once unmapped the event maps with a new size (the buffer
    was released: seed 004). RLIMIT_MEMLOCK is lowered to 64 pages first."""
    # RLIMIT_MEMLOCK 64 pages: the good mapping fits it even if earlier work left this
    # user's whole allowance charged (user_struct outlives a test), the big one does not.
    rlimit_pages = 64
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft == resource.RLIM_INFINITY or soft > rlimit_pages * PAGE:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (rlimit_pages * PAGE, hard))
    rlimit_pages = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0] // PAGE
    page_kb = PAGE // 1024
    allowance = int(open("/proc/sys/kernel/perf_event_mlock_kb").read()) // page_kb \
        * os.sysconf("SC_NPROCESSORS_ONLN")
    too_big = 1
    while too_big + 1 <= allowance + rlimit_pages:  # past the allowance and the rlimit
        too_big *= 2
    before = map_the_allowance()
    pin_start = vm_pin_kb()
    fd = _open_fault_sampler()
    good = 2
    out: dict[str, Any] = {"euid": os.geteuid(), "allowance_pages": allowance,
                           "rlimit_memlock_pages": rlimit_pages, "too_big_pages": 1 + too_big,
                           "first": _good_map(fd, good)}

    def private() -> None:
        probelib.Mapping(fd, (1 + good) * PAGE, mmap.PROT_READ | mmap.PROT_WRITE,
                         mmap.MAP_PRIVATE).close()

    refusals: dict[str, dict] = {}
    for name, attempt in (("three_data_pages", lambda: RingBuffer(fd, 3).close()),
                          ("map_private", private),
                          ("past_the_allowance", lambda: RingBuffer(fd, too_big).close())):
        refusals[name] = {"result": probelib.outcome(attempt), "vm_pin_kb": vm_pin_kb(),
                          "maps_after": _good_map(fd, good)}
    rb = RingBuffer(fd, good)
    # Not mapped a second time to see it whole (a second mapping is a charge of its own on
    # some kernels: known issue perf-mmap-second-mapping-charged): its control page instead.
    result = probelib.outcome(lambda: RingBuffer(fd, 2 * good).close())
    c = rb.control()
    refusals["other_size_while_mapped"] = {
        "result": result, "vm_pin_kb": vm_pin_kb(),
        "maps_after": {"result": "ok", "data_offset": c.data_offset, "data_size": c.data_size}}
    out["refusals"] = refusals
    out["samples_after"] = _samples_written(rb, fd)
    rb.close()
    out["new_size_after_unmap"] = map_result(fd, 2 * good)
    os.close(fd)
    out["vm_pin_kb"] = [pin_start, vm_pin_kb()]
    out["allowance_before"] = before
    out["allowance_after"] = map_the_allowance()
    return out


def _pollin_within(fd: int, timeout_ms: int) -> bool:
    p = select.poll()
    p.register(fd, select.POLLIN)
    return any(ev & select.POLLIN for _, ev in p.poll(timeout_ms))


def _watermark_crossing(wakeup_watermark: int, crossing: int
                        ) -> tuple[tuple[int, bool], tuple[int, bool]]:
    """(data_head, POLLIN) with the samples just short of `crossing` bytes, then just past
    it, on an 8-page buffer whose event has this wakeup_watermark."""
    fd = open_counter(flags=perf.ATTR_DISABLED | perf.ATTR_WATERMARK, wakeup=wakeup_watermark)
    rb = RingBuffer(fd, 8)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    fire(crossing // SAMPLE_SIZE - 1)
    before = (rb.data_head, _pollin_within(fd, 0))
    fire(2)
    after = (rb.data_head, _pollin_within(fd, 1000))
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    rb.close()
    os.close(fd)
    return before, after


def check_wakeups(args: list[str]) -> dict:
    """wakeup_events=5: no POLLIN after 4 samples, POLLIN after the 5th. watermark 1024 bytes:
    none below it, POLLIN past it; watermark 0: the same at half the data area. POLLHUP once
    the monitored task exits."""
    out: dict[str, Any] = {}
    fd = open_counter(wakeup=5)
    rb = RingBuffer(fd, 8)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    fire(4)
    out["events_before"] = _pollin_within(fd, 0)
    fire(1)
    out["events_at"] = _pollin_within(fd, 1000)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    rb.close()
    os.close(fd)

    for prefix, wakeup_watermark, crossing in (
            ("watermark", 1024, 1024),
            # wakeup_watermark 0: half the data area (ring_buffer_init()).
            ("default", 0, 8 * PAGE // 2)):
        before, after = _watermark_crossing(wakeup_watermark, crossing)
        out[f"{prefix}_bytes_before"], out[f"{prefix}_before"] = before
        out[f"{prefix}_bytes_after"], out[f"{prefix}_after"] = after
    out["default_watermark"] = 8 * PAGE // 2

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    fd = open_dummy(perf.ATTR_EXCLUDE_KERNEL, pid=pid)
    rb = RingBuffer(fd, 1)
    p = select.poll()
    p.register(fd, select.POLLIN | select.POLLHUP)
    out["hup_while_alive"] = any(ev & select.POLLHUP for _, ev in p.poll(0))
    os.close(w)  # the child exits
    os.waitpid(pid, 0)
    out["hup_after_exit"] = any(ev & select.POLLHUP for _, ev in p.poll(2000))
    rb.close()
    os.close(fd)
    return out


def check_set_output(args: list[str]) -> dict:
    """PERF_EVENT_IOC_SET_OUTPUT routes a second event's records into the first one's buffer."""
    fd1, fd2 = open_counter(), open_counter()
    id1, id2 = event_id(fd1), event_id(fd2)
    rb = RingBuffer(fd1, 8)
    try:
        fcntl.ioctl(fd2, perf.PERF_EVENT_IOC_SET_OUTPUT, fd1)
        set_output = "ok"
    except OSError as e:
        set_output = probelib.errname(e)
    for fd in (fd1, fd2):
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    fire(10)
    for fd in (fd1, fd2):
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    ids = [s[0] for s in samples(rb.read_new())]
    # Only now (it changes the redirection on some kernels): may the redirected event be
    # mapped itself? v6.12 maps the shared buffer and detaches the event again on munmap;
    # since d06bf78e55d5 perf_mmap_rb() answers EBUSY. Reported here; check set-output-mmap
    # observes which and judges it (test_mmap_of_a_redirected_never_mapped_event).
    map_redirected = map_result(fd2, 8)
    rb.close()
    os.close(fd2)
    os.close(fd1)
    return {"set_output": set_output, "mmap_of_redirected_event": map_redirected,
            "from_first": ids.count(id1), "from_second": ids.count(id2),
            "from_neither": len(ids) - ids.count(id1) - ids.count(id2), "fired": 10}


def _smaps_kb(addr: int, field: str) -> int | None:
    """A `Field:   N kB` line of /proc/self/smaps for the VMA holding addr."""
    value = probelib.smaps_field(addr, field)
    return None if value is None else int(value.split()[0])


def _minor_faults_touching(addr: int, pages: int) -> int:
    """Minor faults this thread takes loading one byte of each of `pages` pages at addr."""
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for i in range(pages):
        _ = ctypes.c_uint8.from_address(addr + i * PAGE).value
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before


def _proc_mem_read(addr: int, size: int) -> dict:
    """pread() of /proc/self/mem at addr (access_remote_vm(), through GUP): 'ok' and whether
    it gave the bytes the mapping shows, or the errno."""
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        got = os.pread(fd, size, addr)
    except OSError as e:
        return {"result": probelib.errname(e)}
    finally:
        os.close(fd)
    return {"result": "ok", "bytes": len(got), "same_as_mapping": got == ctypes.string_at(addr,
                                                                                       size)}


def check_pfnmap(args: list[str]) -> dict:
    """How the buffer is mapped: smaps VmFlags (`pf` = VM_PFNMAP), the minor faults of a
    first load from each page, Rss after it, /proc/self/mem reads of the control and a data
    page, and stores into the control page and a data page (in children)."""
    data_pages = 16
    pages = 1 + data_pages
    # The loop's own faults, measured on an anonymous mapping touched once before: what a
    # first pass over the buffer takes beyond this is the buffer's.
    anon = libc.mmap(None, pages * PAGE, mmap.PROT_READ | mmap.PROT_WRITE,
                      mmap.MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    ctypes.memset(anon, 1, pages * PAGE)
    _minor_faults_touching(anon, pages)
    baseline = _minor_faults_touching(anon, pages)
    libc.munmap(ctypes.c_void_p(anon), pages * PAGE)
    fd = open_dummy()
    rb = RingBuffer(fd, data_pages)
    out: dict[str, Any] = {"page_size": PAGE, "pages": pages,
                           "vm_flags": probelib.vm_flags(rb.base),
                           "rss_kb_before_touch": _smaps_kb(rb.base, "Rss")}
    out["first_touch_minor_faults"] = _minor_faults_touching(rb.base, pages)
    out["loop_minor_faults_baseline"] = baseline
    out["rss_kb_after_touch"] = _smaps_kb(rb.base, "Rss")
    out["proc_mem_control_page"] = _proc_mem_read(rb.base, 64)
    out["proc_mem_data_page"] = _proc_mem_read(rb.base + PAGE, 64)

    def store(offset: int) -> str:
        # A buffer of the child's own: VM_DONTCOPY kept the parent's out of the fork.
        child_fd = open_dummy()
        child_rb = RingBuffer(child_fd, data_pages)
        ctypes.c_uint64.from_address(child_rb.base + offset).value = 8
        return "store succeeded"

    out["control_page_store"] = child_outcome(lambda: store(perf.PerfEventMmapPage.data_tail.offset))
    out["data_page_store"] = child_outcome(lambda: store(PAGE))
    out["last_data_page_store"] = child_outcome(lambda: store(data_pages * PAGE))
    rb.close()
    os.close(fd)
    return out


def check_set_output_mmap(args: list[str]) -> dict:
    """mmap of an event that PERF_EVENT_IOC_SET_OUTPUT redirected into another event's buffer
    and that was never mapped itself: with another size, then with the same size; what the
    mapping (if any) shares, and whose samples reach the buffer afterwards, and after its
    munmap."""
    fd1, fd2 = open_counter(), open_counter()
    id1, id2 = event_id(fd1), event_id(fd2)
    rb = RingBuffer(fd1, 8)
    fcntl.ioctl(fd2, perf.PERF_EVENT_IOC_SET_OUTPUT, fd1)
    out: dict[str, Any] = {"other_size": map_result(fd2, 4)}
    for fd in (fd1, fd2):
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)

    def burst(n: int = 10) -> dict:
        fire(n)
        ids = [s[0] for s in samples(rb.read_new())]
        return {"from_first": ids.count(id1), "from_second": ids.count(id2),
                "from_neither": len(ids) - ids.count(id1) - ids.count(id2)}

    try:
        second = RingBuffer(fd2, 8)
    except OSError as e:
        out["same_size"] = probelib.errname(e)
        out["after_refusal"] = burst()
    else:
        out["same_size"] = "ok"
        rb.data_tail = 0x55 * 8
        out["tail_written_in_first_seen_in_second"] = second.data_tail == 0x55 * 8
        rb.data_tail = 0
        out["while_mapped"] = burst()
        out["same_data_head"] = second.data_head == rb.data_head
        second.close()
        out["after_munmap"] = burst()
    for fd in (fd1, fd2):
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    out["first_still_maps"] = map_result(fd1, 8)
    rb.close()
    os.close(fd2)
    os.close(fd1)
    out["fired_per_burst"] = 10
    return out


def check_unprivileged(args: list[str]) -> dict:
    """What a user without privileges may do (Documentation/admin-guide/perf-security.rst)."""
    user = perf.ATTR_DISABLED | perf.ATTR_EXCLUDE_KERNEL | perf.ATTR_EXCLUDE_HV
    out: dict[str, Any] = {
        "euid": os.geteuid(),
        "perf_event_paranoid": int(open("/proc/sys/kernel/perf_event_paranoid").read())}
    cases = {"self_user_only": (user, 0, -1), "self_with_kernel": (perf.ATTR_DISABLED, 0, -1),
             "cpu_wide_user_only": (user, -1, 0), "pid_1_user_only": (user, 1, -1)}
    for name, (flags, pid, cpu) in cases.items():
        try:
            fd = open_dummy(flags, pid, cpu)
        except OSError as e:
            out[name] = probelib.errname(e)
            continue
        mapped = map_result(fd, 1)
        out[name] = mapped if mapped == "ok" else f"mmap: {mapped}"
        os.close(fd)
    return out


def check_concurrency(args: list[str]) -> dict:
    """4 producer threads for ~2 s while one reader drains: every sample of ours is read once
    or counted lost. Per-CPU system-wide events (root), a buffer per CPU: per-task events
    cannot be shared across threads (SET_OUTPUT needs the same task; an inherited per-task
    event cannot be mmapped: perf_mmap() refuses inherit with cpu == -1)."""
    threads_n, seconds = 4, float(args[0]) if args else 2.0
    cpus = sorted(os.sched_getaffinity(0))
    fds = []
    for c in cpus:
        # PERF_FORMAT_LOST (v6.0): read() gives the event's count and every sample it lost,
        # including drops not yet reported by a PERF_RECORD_LOST (the kernel writes that
        # record only at its next successful output).
        a = perf.attr(perf.PERF_TYPE_TRACEPOINT, tracepoint_id(), perf.ATTR_DISABLED)
        a.sample_period, a.sample_type = 1, SAMPLE_TYPE
        a.read_format = perf.PERF_FORMAT_LOST
        fds.append(perf.perf_event_open(a, -1, c))
    rbs = [RingBuffer(fd, 4) for fd in fds]
    produced: dict[int, int] = {}
    stop = threading.Event()
    start = threading.Barrier(threads_n + 1)

    def producer() -> None:
        n = 0
        start.wait()
        while not stop.is_set():
            os.getppid()
            n += 1
        produced[threading.get_native_id()] = n

    for fd in fds:
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    workers = [threading.Thread(target=producer) for _ in range(threads_n)]
    for t in workers:
        t.start()
    start.wait()
    deadline = time.monotonic() + seconds
    seen: list[tuple] = []
    lost_n, torn, drains = 0, None, 0

    def drain() -> None:
        nonlocal lost_n, torn, drains
        for i, rb in enumerate(rbs):
            try:
                recs = rb.read_new()
            except TornRecord as e:
                torn = str(e)
                return
            # (id, pid, tid, time, buffer, position): a sample read twice is the same
            # position of the same buffer read again
            seen.extend((*samples([r])[0], i, r.position) for r in recs
                        if r.type == perf.PERF_RECORD_SAMPLE)
            lost_n += lost_count(recs)
        drains += 1

    while time.monotonic() < deadline and torn is None:
        drain()
        time.sleep(0.001)
    stop.set()
    for t in workers:
        t.join()
    for fd in fds:
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    if torn is None:
        drain()
    counted = lost_total = 0
    for fd in fds:
        value, lost_samples = struct.unpack("<QQ", os.read(fd, 16))
        counted += value
        lost_total += lost_samples
    for rb, fd in zip(rbs, fds, strict=True):
        rb.close()
        os.close(fd)
    me = os.getpid()
    ours = [s for s in seen if s[1] == me]
    # By position, not (tid, time): a guest whose TSC the clocksource watchdog marked unstable
    # (a loaded host under TCG) runs sched_clock on jiffies, and two samples of one thread
    # then share a time (CI 2026-12-05: 6485 "read twice" on 6.12.117, none by position).
    keys = [(s[4], s[5]) for s in ours]
    return {"threads": threads_n, "cpus": len(cpus), "produced": sum(produced.values()),
            "read": len(ours), "read_other_processes": len(seen) - len(ours),
            "lost_records_sum": lost_n, "lost_counted": lost_total, "event_count": counted,
            "duplicates": len(keys) - len(set(keys)), "torn": torn, "drains": drains,
            "same_thread_and_time": len(ours) - len({(x[2], x[3]) for x in ours}),
            "from_producers": sum(1 for s in ours if s[2] in produced)}


def check_throughput(args: list[str]) -> dict:
    """Benchmark: records/s read through the mapping vs counter reads/s through read()."""
    total = int(args[0]) if args else 20000
    fd = open_counter()
    rb = RingBuffer(fd, 64)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    parse_s, got = 0.0, 0
    batch = rb.data_size // SAMPLE_SIZE // 2
    for _ in range(total // batch):
        fire(batch)
        t = time.perf_counter()
        got += len(samples(rb.read_new()))
        parse_s += time.perf_counter() - t
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    rb.close()
    os.close(fd)
    # The same events counted by a group (tracepoint leader + task clock), read with read().
    a = perf.attr(perf.PERF_TYPE_TRACEPOINT, tracepoint_id(), perf.ATTR_DISABLED)
    a.read_format = perf.PERF_FORMAT_GROUP
    leader = perf.perf_event_open(a)
    b = perf.attr(perf.PERF_TYPE_SOFTWARE, 1, 0)  # PERF_COUNT_SW_TASK_CLOCK
    member = perf.perf_event_open(b, group_fd=leader)
    fcntl.ioctl(leader, perf.PERF_EVENT_IOC_ENABLE)
    fire(1000)
    reads = 5000
    t = time.perf_counter()
    for _ in range(reads):
        data = os.read(leader, 64)
    read_s = time.perf_counter() - t
    counted = struct.unpack_from("<QQ", data)[1]
    os.close(member)
    os.close(leader)
    return {"records": got, "mmap_records_per_s": got / parse_s if parse_s else None,
            "read_calls": reads, "read_calls_per_s": reads / read_s,
            "group_counted": counted}


def _writes_into(rb: RingBuffer, fd: int, n: int = 3) -> int:
    """Samples of the getppid event found in `rb` after n calls: the buffer is the event's."""
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
    fire(n)
    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
    return len(samples(rb.read_new()))


def check_alloc_failures(args: list[str]) -> dict:
    """[DATA_PAGES]: mmap() of an event's buffer with its 1st, 2nd, ... allocation failing
    (fault_inject.sweep: slab and page allocations, the page tables of the mapping included),
    as the first mapping (rb_alloc(), map_range()) and as a second mapping of a mapped buffer
    (perf_mmap_close() on the way out). After each attempt, injection off: what a refused call
    left must not show. The event maps again with the size asked, its samples reach that
    mapping (the first mapping's too, for the second: the same data_head); once all is
    closed VmPin is back; the user's allowance is measured before, between and after the
    sweeps (map_the_allowance(): a charge a refusal kept would shrink it)."""
    data_pages = int(args[0]) if args else 4
    fault_inject.prepare()
    pin_start = vm_pin_kb()
    before = map_the_allowance()

    def first_setup() -> dict:
        return {"fd": open_counter()}

    def second_setup() -> dict:
        fd = open_counter()
        return {"fd": fd, "first": RingBuffer(fd, data_pages)}

    def call(state: dict) -> None:
        # Mapped where this process has no page table yet, so that map_range() allocates
        # some (remap_pfn_range()) and its failure is swept too.
        state["rb"] = RingBuffer(state["fd"], data_pages, at=NO_PAGE_TABLES)

    def judge(state: dict, outcome: str) -> dict:
        fd = state["fd"]
        seen: dict[str, Any] = {}
        rb = state.get("rb")
        if rb is None:
            try:
                rb = RingBuffer(fd, data_pages)
                seen["maps_after"] = "ok"
            except OSError as e:
                seen["maps_after"] = probelib.errname(e)
        if rb is not None:
            seen["data_size"] = rb.data_size // PAGE
            seen["samples"] = _writes_into(rb, fd)
            if "first" in state:  # both map the one buffer: the same data_head
                seen["same_buffer"] = state["first"].data_head == rb.data_head
            rb.close()
        if "first" in state:
            state["first"].close()
        os.close(fd)
        seen["vm_pin_kb"] = vm_pin_kb()
        return seen

    first = fault_inject.summary(fault_inject.sweep(first_setup, call, judge))
    between = map_the_allowance()
    second = fault_inject.summary(fault_inject.sweep(second_setup, call, judge))
    return {"data_pages": data_pages, "page_kb": PAGE // 1024, "vm_pin_kb": pin_start,
            "first": first, "second": second, "allowance": {
                "before": before, "after_first": between, "after_second": map_the_allowance()}}


CHECKS = probelib.check_table(globals())


def main(argv: list[str]) -> int:
    return probelib.check_main(argv, "perf_ring", "Probe the perf ring buffer; prints one JSON "
                               "document of observations for CHECK.", CHECKS,
                               "rounds, seconds, ...")


if __name__ == "__main__":
    probelib.run(main)
