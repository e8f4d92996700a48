#!/usr/bin/env python3
"""Capture perf ring buffers a real kernel wrote, as test data for the lab's record parser
(probes/perf_buffer.py; tests/unit/probes/test_perf_records_real.py reads what this writes).

Run by hand, as root, in a guest (`./lab boot --detach`, then e.g.
`./lab ssh -- 'cat > /tmp/capture.py' < capture.py` and `./lab ssh -- python3 /tmp/capture.py
/tmp/rings`). For each ring NAME it writes NAME.bin (the data area: data_size bytes from
data_offset) and NAME.json (the control page's data_head/data_tail/data_offset/data_size, the
event's attributes, and what this process knows of what the kernel should have written: its
pid and tid, the comms it set, the child it forked, the file it mapped, the lost count).

Self-contained and stdlib only on purpose: it shares no definition with probes/, so a mistake
in perf_abi.py's layouts cannot hide in both the data and the parser. Every constant is from
include/uapi/linux/perf_event.h (v6.12) unless it says otherwise.
"""
from __future__ import annotations

import ctypes
import fcntl
import json
import mmap
import os
import platform
import struct
import sys
import threading
import time

SYS_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}[platform.machine()]
PAGE = mmap.PAGESIZE

# enum perf_type_id, perf_sw_ids
PERF_TYPE_SOFTWARE = 1
PERF_COUNT_SW_CPU_CLOCK = 0
PERF_COUNT_SW_DUMMY = 9
# enum perf_event_sample_format
SAMPLE = {"IP": 1 << 0, "TID": 1 << 1, "TIME": 1 << 2, "ID": 1 << 6, "CPU": 1 << 7,
          "PERIOD": 1 << 8, "IDENTIFIER": 1 << 16}
# enum perf_event_read_format
PERF_FORMAT_ID = 1 << 2
PERF_FORMAT_LOST = 1 << 4
# struct perf_event_attr's bit fields, from bit 0 of the u64 after read_format
FLAGS = {"disabled": 0, "inherit": 1, "mmap": 8, "comm": 9, "task": 13, "sample_id_all": 18,
         "context_switch": 26}
# ioctls: _IO('$', 0), _IO('$', 1), _IOR('$', 7, __u64 *)
PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_DISABLE = 0x2401
PERF_EVENT_IOC_ID = 0x80082407
PERF_FLAG_FD_CLOEXEC = 1 << 3
PERF_ATTR_SIZE_VER0 = 64  # the fields up to config1 are all this script sets
# struct perf_event_mmap_page: data_head at 1024, then data_tail, data_offset, data_size
OFF_DATA_HEAD, OFF_DATA_TAIL, OFF_DATA_OFFSET, OFF_DATA_SIZE = 1024, 1032, 1040, 1048
PR_SET_NAME = 15  # include/uapi/linux/prctl.h

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def perf_event_open(type_: int, config: int, sample_period: int, sample_type: int,
                    read_format: int, flags: list[str], cpu: int = -1) -> int:
    """struct perf_event_attr: u32 type, u32 size, u64 config, u64 sample_period, u64
    sample_type, u64 read_format, u64 bit fields, u32 wakeup_events, u32 bp_type, u64 config1.
    This process (pid 0), on any CPU (-1) or only on `cpu`."""
    bits = sum(1 << FLAGS[f] for f in flags)
    raw = struct.pack("<IIQQQQQIIQ", type_, PERF_ATTR_SIZE_VER0, config, sample_period,
                      sample_type, read_format, bits, 0, 0, 0)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fd = libc.syscall(SYS_PERF_EVENT_OPEN, buf, 0, cpu, -1, PERF_FLAG_FD_CLOEXEC)
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"perf_event_open: {os.strerror(err)}")
    return int(fd)


class Ring:
    """The event's mmap: the control page and 2^n data pages, mapped writable so the kernel
    never overwrites records this process has not consumed (it counts them lost instead)."""

    def __init__(self, fd: int, data_pages: int) -> None:
        self.map = mmap.mmap(fd, (1 + data_pages) * PAGE, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)

    def u64(self, off: int) -> int:
        return int(struct.unpack_from("<Q", self.map, off)[0])

    @property
    def head(self) -> int:
        return self.u64(OFF_DATA_HEAD)

    @property
    def tail(self) -> int:
        return self.u64(OFF_DATA_TAIL)

    @tail.setter
    def tail(self, value: int) -> None:
        struct.pack_into("<Q", self.map, OFF_DATA_TAIL, value)

    def control(self) -> dict[str, int]:
        return {"data_head": self.head, "data_tail": self.tail,
                "data_offset": self.u64(OFF_DATA_OFFSET), "data_size": self.u64(OFF_DATA_SIZE)}

    def data(self) -> bytes:
        off, size = self.u64(OFF_DATA_OFFSET), self.u64(OFF_DATA_SIZE)
        return bytes(self.map[off:off + size])


def event_id(fd: int) -> int:
    out = bytearray(8)
    fcntl.ioctl(fd, PERF_EVENT_IOC_ID, out)
    return int(struct.unpack("<Q", out)[0])


def read_lost(fd: int) -> tuple[int, int]:
    """read() with read_format ID|LOST: u64 value, u64 id, u64 lost (struct read_format)."""
    value, _id, lost = struct.unpack("<QQQ", os.read(fd, 24))
    return value, lost


def spin_until(cond, limit_s: float = 20.0) -> None:
    """Burn this process's CPU (what cpu-clock samples) until cond() holds."""
    deadline = time.monotonic() + limit_s
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("the ring did not get where this capture needs it")


def save(out: str, name: str, fd: int, ring: Ring, meta: dict) -> None:
    value, lost = read_lost(fd)
    ctl = ring.control()
    meta.update(ctl, name=name, release=os.uname().release, machine=platform.machine(),
                page_size=PAGE, cpus=os.cpu_count(), pid=os.getpid(),
                tid=threading.get_native_id(), event_id=event_id(fd), count=value,
                lost_samples=lost)
    with open(os.path.join(out, f"{name}.bin"), "wb") as f:
        f.write(ring.data())
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{name}: head {ctl['data_head']} tail {ctl['data_tail']} size {ctl['data_size']} "
          f"lost {lost}")


def attr_meta(type_: int, config: int, period: int, sample: list[str], read_format: int,
              flags: list[str]) -> dict:
    return {"type": type_, "config": config, "sample_period": period,
            "sample_type": sum(SAMPLE[s] for s in sample), "sample_type_names": sample,
            "read_format": read_format, "flags": flags, "size": PERF_ATTR_SIZE_VER0}


def side_band(out: str) -> None:
    """A dummy software event (no samples) with comm, task, mmap and context_switch: the
    kernel writes COMM, FORK, EXIT, MMAP and SWITCH records, each with a sample_id trailer.
    inherit: the forked child's records come to this ring too. An inherited event is mapped
    only when bound to one CPU (perf_mmap(): cpu == -1 && inherit is EINVAL), so the event is
    on CPU 0 and this process (and so its child) runs there only."""
    sample = ["TID", "TIME", "ID", "CPU", "IDENTIFIER"]
    flags = ["disabled", "inherit", "mmap", "comm", "task", "sample_id_all", "context_switch"]
    read_format = PERF_FORMAT_ID | PERF_FORMAT_LOST
    attr = attr_meta(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY, 0, sample, read_format, flags)
    os.sched_setaffinity(0, {0})
    fd = perf_event_open(attr["type"], attr["config"], 0, attr["sample_type"], read_format, flags,
                         cpu=0)
    ring = Ring(fd, 1)
    fcntl.ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)
    comm = b"ringlab-capture"
    libc.prctl(PR_SET_NAME, comm, 0, 0, 0)  # PERF_RECORD_COMM, this process
    child_comm = b"ringlab-child"
    pid = os.fork()
    if pid == 0:  # PERF_RECORD_FORK (in the parent), then COMM and EXIT of the child
        libc.prctl(PR_SET_NAME, child_comm, 0, 0, 0)
        os._exit(0)
    os.waitpid(pid, 0)
    path = "/bin/true"
    with open(path, "rb") as f:  # PROT_EXEC: PERF_RECORD_MMAP of the file
        size = os.fstat(f.fileno()).st_size
        exe = mmap.mmap(f.fileno(), size, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_EXEC)
    exe.close()
    time.sleep(0.01)  # PERF_RECORD_SWITCH out and in
    fcntl.ioctl(fd, PERF_EVENT_IOC_DISABLE, 0)
    os.sched_setaffinity(0, range(os.cpu_count() or 1))
    save(out, "side-band", fd, ring, {
        "attr": attr, "event_cpu": 0, "data_pages": 1, "comm": comm.decode(), "child_pid": pid,
        "child_comm": child_comm.decode(), "mmap_file": os.path.realpath(path),
        "mmap_len": size, "how": "dummy event: prctl(PR_SET_NAME), fork a child that renames "
        "itself and exits, mmap PROT_EXEC of /bin/true, sleep 10 ms; ring never consumed"})
    ring.map.close()
    os.close(fd)


def samples(out: str) -> None:
    """cpu-clock samples every 100 us of this process's CPU time, read as a reader does
    (data_tail = data_head) until data_head is past 1.75 data areas; not read from there, so
    the unread records run across the end of the area and back to its start."""
    sample = ["IP", "TID", "TIME", "CPU", "PERIOD"]
    read_format = PERF_FORMAT_ID | PERF_FORMAT_LOST
    period = 100_000
    attr = attr_meta(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, period, sample, read_format,
                     ["disabled"])
    fd = perf_event_open(attr["type"], attr["config"], period, attr["sample_type"],
                         read_format, attr["flags"])
    data_pages = 2
    ring = Ring(fd, data_pages)
    size = data_pages * PAGE
    fcntl.ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)

    def consumed_to_three_quarters() -> bool:
        head = ring.head
        ring.tail = head  # read, as far as the kernel can tell
        return head >= size + size * 3 // 4

    spin_until(consumed_to_three_quarters)
    spin_until(lambda: ring.head >= 2 * size + size // 4)
    fcntl.ioctl(fd, PERF_EVENT_IOC_DISABLE, 0)
    save(out, "samples", fd, ring, {
        "attr": attr, "data_pages": data_pages, "how": "cpu-clock, period 100000 ns; "
        "data_tail kept at data_head until data_head >= 1.75 * data_size, then left; "
        "disabled once data_head >= 2.25 * data_size"})
    ring.map.close()
    os.close(fd)


def lost(out: str) -> None:
    """cpu-clock samples into one data page never read until it is full and more samples
    were lost; then all of it is consumed (data_tail = data_head) and the next record the
    kernel writes is PERF_RECORD_LOST with the count. Disabled soon after, while the ring has
    room, so no loss goes unreported."""
    sample = ["TID", "TIME", "CPU", "IDENTIFIER"]
    flags = ["disabled", "sample_id_all"]
    read_format = PERF_FORMAT_ID | PERF_FORMAT_LOST
    period = 100_000
    attr = attr_meta(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, period, sample, read_format,
                     flags)
    fd = perf_event_open(attr["type"], attr["config"], period, attr["sample_type"],
                         read_format, flags)
    ring = Ring(fd, 1)
    fcntl.ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)
    spin_until(lambda: read_lost(fd)[1] >= 20)
    full_head = ring.head
    ring.tail = full_head
    spin_until(lambda: ring.head >= full_head + 512)
    fcntl.ioctl(fd, PERF_EVENT_IOC_DISABLE, 0)
    save(out, "lost", fd, ring, {
        "attr": attr, "data_pages": 1, "full_head": full_head, "how": "cpu-clock, period "
        "100000 ns, one data page left unread until 20+ samples were lost; then data_tail = "
        "data_head (full_head) and disabled once data_head >= full_head + 512"})
    ring.map.close()
    os.close(fd)


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    side_band(out)
    samples(out)
    lost(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
