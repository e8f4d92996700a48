"""Probe how mapped ring buffers are pinned and charged: perf data buffers, the AUX validation
path, tracefs mappings; perf_event_mlock_kb, RLIMIT_MEMLOCK, CAP_IPC_LOCK; concurrent stress;
memory pressure; the SHMEM-backed detached events of seed 002. Prints observations as one JSON
document; tests/kernel/test_pinning.py judges them against the charging rule of
kernel/events/core.c perf_mmap() (../shared/reference/ring-buffer-abi.md section 3).

`script` runs a list of operations in a child process (so its VmPin starts at 0) and records,
after each, the result and VmPin; the test replays the same list through a model of the rule.
Operations (PAGES counts the control page: 1 + 2^n):
  mlock=KB          write /proc/sys/kernel/perf_event_mlock_kb
  rlimit=KB         RLIMIT_MEMLOCK (soft and hard)
  as=root|user|user+ipc_lock
                    become root, the unprivileged `lab` user, or `lab` with only CAP_IPC_LOCK
                    (real and effective uid 1000; the saved uid stays 0 so the script can
                    come back to write sysctls)
  map=PAGES         open a software event and mmap PAGES pages (kept)
  unmap=I           munmap the I-th map (and close its fd unless closed already)
  close=I           close the I-th map's fd, keeping the mapping
  aux=I:PAGES       try an AUX mmap of PAGES pages on the I-th map (a software event: refused)
  pmu-map=PAGES     map= on an event of the lab's test PMU (kernels/modules/ringlab_aux, which
                    has an AUX area): per task, user space only, so `lab` may open it
  pmu-aux=I:PAGES   map an AUX area of PAGES pages on the I-th map (a pmu-map), kept until
                    unmap=I, which unmaps it first
  remap=I           map the I-th map's buffer once more (same fd, same size), kept until
                    unmap=I: one buffer mapped twice, charged once
  pmu-aux-again=I   map the I-th map's AUX area once more, kept until unmap=I
  fork-map=PAGES    a child maps PAGES pages and exits without munmap
  tracefs-map, tracefs-unmap   map/unmap cpu0's trace_pipe_raw of our instance (root only)

Run by hand in a guest: python3 probe_pinning.py CHECK [ARGS]   (-h). Stdlib only.
"""
from __future__ import annotations

import ctypes
import fcntl
import json
import mmap
import os
import resource
import signal
import time
from contextlib import contextmanager, suppress
from collections.abc import Iterator

import perf_abi as perf
import probelib
import trace_abi
import tracefs
from perf_buffer import AuxArea, RingBuffer, parse_records
from perf_events import (SAMPLE_SIZE, allowance_sizes, fire, open_counter, open_dummy,
                         test_pmu_type, vm_pin_kb)
from probelib import PAGE, Mapping, libc

MLOCK = "/proc/sys/kernel/perf_event_mlock_kb"
PARANOID = "/proc/sys/kernel/perf_event_paranoid"
LAB_UID = LAB_GID = 1000
CAP_IPC_LOCK = 14                       # include/uapi/linux/capability.h
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
PERF_FLAG_DETACHED = 1 << 4             # seed 002 (not mainline)
SW_FLAGS = perf.ATTR_DISABLED | perf.ATTR_EXCLUDE_KERNEL | perf.ATTR_EXCLUDE_HV


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def set_effective_caps(caps: tuple[int, ...]) -> None:
    """capset(2): exactly `caps` effective (they must be permitted)."""
    hdr, data = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if libc.capget(ctypes.byref(hdr), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    data[0].effective = data[1].effective = 0
    for cap in caps:
        data[cap // 32].effective |= 1 << (cap % 32)
    if libc.capset(ctypes.byref(hdr), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


IDENTITIES = ("root", "user", "user+ipc_lock")


def become(who: str) -> None:
    """root, user or user+ipc_lock. The saved uid stays 0, so a script can come back to root
    to write sysctls; the kernel's checks see the real uid's user (perf_mmap(): current_user())
    and the effective capabilities (capable())."""
    if who not in IDENTITIES:
        raise ValueError(f"as={who}: expected one of {', '.join(IDENTITIES)}")
    if os.geteuid() != 0:
        os.seteuid(0)  # back to root: the effective set is the permitted one again
    if who == "root":
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
        return
    os.setresgid(LAB_GID, LAB_GID, 0)
    os.setresuid(LAB_UID, LAB_UID, 0)  # effective capabilities cleared, permitted kept
    if who == "user+ipc_lock":
        set_effective_caps((CAP_IPC_LOCK,))


@contextmanager
def sysctls(**values: str) -> Iterator[dict[str, str]]:
    """Set perf sysctls for the duration; put back what was there."""
    paths = {"mlock": MLOCK, "paranoid": PARANOID}
    saved = {k: open(paths[k]).read().strip() for k in paths}
    try:
        for k, v in values.items():
            with open(paths[k], "w") as f:
                f.write(v)
        yield saved
    finally:
        for k, v in saved.items():
            with open(paths[k], "w") as f:
                f.write(v)


# --- script --------------------------------------------------------------------------------

class Script:
    """The operations of one `script` check, run in a child process."""

    def __init__(self, instance: str | None) -> None:
        self.who = "root"
        self.maps: list[tuple[int, RingBuffer | None, bool]] = []  # (fd, ring, fd closed)
        self.aux: dict[int, Mapping] = {}  # the AUX area of map I
        self.again: dict[int, list[Mapping]] = {}  # more mappings of map I's buffer or AUX
        self.instance = instance
        self.trace: tuple[int, Mapping] | None = None

    def run(self, ops: list[str]) -> dict:
        rlimit_kb = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0] // 1024
        mlock_kb = int(open(MLOCK).read())
        charged = {"root": already_charged("root"), "lab": already_charged("user")}
        steps = []
        for op in ops:
            name, _, arg = op.partition("=")
            try:
                result = getattr(self, "op_" + name.replace("-", "_"))(arg)
            except OSError as e:
                result = probelib.errname(e)
            steps.append({"op": op, "result": result, "vm_pin_kb": vm_pin_kb()})
        for i in range(len(self.maps)):  # leave nothing mapped behind
            self.op_unmap(str(i))
        return {"steps": steps, "ncpus": os.sysconf("SC_NPROCESSORS_ONLN"),
                "charged_before": charged,
                "rlimit_memlock_kb_start": rlimit_kb, "mlock_kb_start": mlock_kb,
                "page_size": PAGE, "vm_pin_kb_end": vm_pin_kb()}

    def op_mlock(self, kb: str) -> str:
        """As root for the write, then back to whoever the script was."""
        who = self.who
        become("root")
        try:
            with open(MLOCK, "w") as f:
                f.write(kb)
        finally:
            become(who)
        return "ok"

    def op_rlimit(self, kb: str) -> str:
        """The soft limit (what perf_mmap() reads); the hard one only grows, and only for
        root (lowering it would make a later rlimit= back up fail as the user)."""
        soft, hard = int(kb) * 1024, resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
        if hard != resource.RLIM_INFINITY and soft > hard:
            hard = soft
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (soft, hard))
        return "ok"

    def op_as(self, who: str) -> str:
        become(who)
        self.who = who
        return "ok"

    def op_map(self, pages: str, open_event=lambda: open_dummy(SW_FLAGS)) -> str:
        fd = open_event()
        try:
            rb = RingBuffer(fd, int(pages) - 1)
        except OSError:
            os.close(fd)
            self.maps.append((-1, None, True))
            raise
        self.maps.append((fd, rb, False))
        return "ok"

    def op_pmu_map(self, pages: str) -> str:
        return self.op_map(pages, open_test_pmu_task)

    def _map_aux(self, arg: str) -> tuple[int, Mapping] | None:
        """The AUX area of map I ("I:PAGES"): aux_offset/aux_size written to its control page,
        then the mmap at that offset (perf_mmap(): pgoff != 0); None if map I is not mapped."""
        index, _, pages = arg.partition(":")
        fd, rb, _ = self.maps[int(index)]
        if rb is None:
            return None
        return int(index), AuxArea(fd, rb, int(pages)).map

    def op_pmu_aux(self, arg: str) -> str:
        """A real AUX area on map I, kept until map I is unmapped (charged as perf_mmap()'s
        `accounting:` says, then rb_alloc_aux())."""
        mapped = self._map_aux(arg)
        if mapped is None:
            return "not mapped"
        self.aux[mapped[0]] = mapped[1]
        return "ok"

    def op_pmu_aux_split(self, arg: str) -> str:
        """op_pmu_aux, then munmap of the AUX area's first page: a split that
        perf_mmap_may_split() refuses (EINVAL, b024d7b56c77) and older kernels let through.
        Either way the charge must all come back once every part is unmapped; before the fix
        the part left keeps an offset perf_mmap_close() no longer takes for the AUX area."""
        mapped = self._map_aux(arg)
        if mapped is None:
            return "not mapped"
        index, aux = mapped
        self.aux[index] = aux
        split = probelib.errno_result(libc.munmap(ctypes.c_void_p(aux.addr), PAGE) == 0)
        return "ok" if split in ("ok", "EINVAL") else f"split of the AUX area: {split}"

    def op_unmap(self, index: str) -> str:
        i = int(index)
        fd, rb, closed = self.maps[i]
        if rb is None:
            return "not mapped"
        for again in self.again.pop(i, []):
            again.close()
        if i in self.aux:
            self.aux.pop(i).close()
        rb.close()
        if not closed:
            os.close(fd)
        self.maps[i] = (fd, None, True)
        return "ok"

    def op_remap(self, index: str) -> str:
        """The buffer of map I mapped a second time: perf_mmap() finds event->rb mapped and
        only takes a reference (rb->mmap_count), charging nothing more; perf_mmap_close()
        gives the charge back once, at the last munmap."""
        i = int(index)
        fd, rb, closed = self.maps[i]
        if rb is None or closed:
            return "not mapped" if rb is None else "fd closed"
        self.again.setdefault(i, []).append(
            Mapping(fd, rb.length, mmap.PROT_READ | mmap.PROT_WRITE))
        return "ok"

    def op_pmu_aux_again(self, index: str) -> str:
        """The AUX area of map I mapped a second time (same offset and size): a reference
        (rb->aux_mmap_count), no second charge."""
        i = int(index)
        fd, rb, closed = self.maps[i]
        if rb is None or i not in self.aux or closed:
            return "not mapped" if rb is None or i not in self.aux else "fd closed"
        self.again.setdefault(i, []).append(
            Mapping(fd, self.aux[i].length, mmap.PROT_READ | mmap.PROT_WRITE, offset=rb.length))
        return "ok"

    def op_close(self, index: str) -> str:
        fd, rb, closed = self.maps[int(index)]
        if not closed:
            os.close(fd)
        self.maps[int(index)] = (fd, rb, True)
        return "ok"

    def op_aux(self, arg: str) -> str:
        """The AUX area of map I, mapped and at once unmapped."""
        mapped = self._map_aux(arg)
        if mapped is None:
            return "not mapped"
        mapped[1].close()
        return "ok"

    def op_fork_map(self, pages: str) -> str:
        out = probelib.in_child(_map_and_exit, int(pages))
        return out.get("result", out.get("error", "?"))

    def op_tracefs_map(self, _: str) -> str:
        fd = os.open(f"{self.instance}/per_cpu/cpu0/trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
        self.trace = (fd, Mapping(fd, PAGE))
        return "ok"

    def op_tracefs_unmap(self, _: str) -> str:
        if self.trace is None:
            return "not mapped"
        fd, m = self.trace
        m.close()
        os.close(fd)
        self.trace = None
        return "ok"


def already_charged(who: str) -> int:
    """Pages of `who`'s locked_vm allowance charged before the script (user_struct is per uid
    and lives as long as the guest: what an earlier test left charged, a leak among it). The
    whole allowance, perf_event_mlock_kb x CPUs, mapped as `who` with RLIMIT_MEMLOCK at its
    hard limit: what does not fit any more goes to VmPin. Measured in a child, as root after."""
    def measure() -> dict:
        become(who)
        page_kb = PAGE // 1024
        limit = int(open(MLOCK).read()) // page_kb * os.sysconf("SC_NPROCESSORS_ONLN")
        held = []
        try:
            for size in allowance_sizes(limit):
                fd = open_dummy(SW_FLAGS)
                held.append((fd, RingBuffer(fd, size - 1)))
            return {"pages": vm_pin_kb() // page_kb}
        finally:
            for fd, rb in held:
                rb.close()
                os.close(fd)
    out = probelib.in_child(measure)
    if "pages" not in out:
        raise RuntimeError(f"measuring what {who} had charged before the script failed: {out}")
    return int(out["pages"])


# --- mlock-gift: perf's allowance beside io_uring's RLIMIT_MEMLOCK ------------------------

NR_IO_URING_SETUP, NR_IO_URING_REGISTER = 425, 427   # the same on every arch (unified table)
IORING_REGISTER_BUFFERS, IORING_UNREGISTER_BUFFERS = 0, 1
IO_URING_DISABLED = "/proc/sys/kernel/io_uring_disabled"
GIFT_UID = 4242        # a uid no other check uses: its user_struct starts with nothing charged
GIFT_RLIMIT_PAGES = 64
GIFT_PERF_PAGES = 1 + 16   # within perf_event_mlock_kb x CPUs on any guest


class Uring:
    """An io_uring whose only use is IORING_REGISTER_BUFFERS: io_uring charges registered
    pages to the user's locked_vm against RLIMIT_MEMLOCK (io_uring/rsrc.c io_account_mem())."""

    def __init__(self) -> None:
        params = ctypes.create_string_buffer(120)   # struct io_uring_params, zeroed
        self.fd = libc.syscall(NR_IO_URING_SETUP, 4, params)
        if self.fd < 0:
            raise probelib.libc_error()

    def fits(self, pages: int) -> str:
        """Register `pages` of fresh anonymous memory (no THP: a folio is charged whole) and
        unregister them: 'ok' or the errno's name (ENOMEM: over RLIMIT_MEMLOCK)."""
        m = Mapping(-1, pages * PAGE, mmap.PROT_READ | mmap.PROT_WRITE,
                    mmap.MAP_PRIVATE | probelib.MAP_ANONYMOUS)
        try:
            libc.madvise(m.addr, m.length, mmap.MADV_NOHUGEPAGE)
            ctypes.memset(m.addr, 1, m.length)
            iov = (ctypes.c_uint64 * 2)(m.addr, m.length)
            if libc.syscall(NR_IO_URING_REGISTER, self.fd, IORING_REGISTER_BUFFERS,
                            ctypes.byref(iov), 1) != 0:
                return probelib.errname(ctypes.get_errno())
            libc.syscall(NR_IO_URING_REGISTER, self.fd, IORING_UNREGISTER_BUFFERS, None, 0)
            return "ok"
        finally:
            m.close()

    def headroom(self, most: int) -> int:
        """The most pages (0..most) one registration may pin now."""
        lo, hi = 0, most
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.fits(mid) == "ok" else (lo, mid - 1)
        return lo

    def close(self) -> None:
        os.close(self.fd)


def _gift(rlimit_pages: int) -> dict:
    """In a child, as GIFT_UID without capabilities: io_uring's headroom under RLIMIT_MEMLOCK
    with nothing mapped, with a perf buffer within perf_event_mlock_kb mapped, and with that
    buffer mapped twice; then, io_uring's pages registered up to the limit, whether a perf
    mapping of 1+1 pages still fits its own allowance."""
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (rlimit_pages * PAGE,) * 2)
    os.setgroups([])
    os.setresgid(GIFT_UID, GIFT_UID, GIFT_UID)
    os.setresuid(GIFT_UID, GIFT_UID, GIFT_UID)
    try:
        ring = Uring()
    except OSError as e:
        return {"io_uring": probelib.errname(e)}
    out: dict = {"headroom_unmapped": ring.headroom(rlimit_pages)}
    fd = open_dummy(SW_FLAGS)
    rb = RingBuffer(fd, GIFT_PERF_PAGES - 1)
    out["vm_pin_kb_perf"] = vm_pin_kb()
    out["headroom_perf_mapped"] = ring.headroom(rlimit_pages)
    again = Mapping(fd, rb.length, mmap.PROT_READ | mmap.PROT_WRITE)
    out["headroom_perf_mapped_twice"] = ring.headroom(rlimit_pages)
    again.close()
    rb.close()
    os.close(fd)
    out["headroom_after_unmap"] = ring.headroom(rlimit_pages)
    ring.close()
    return out


def _gift_reverse(rlimit_pages: int) -> dict:
    """io_uring first, to RLIMIT_MEMLOCK, then a 1+1-page perf mapping with
    perf_event_mlock_kb small (set by the caller): does perf's allowance still hold it?"""
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (rlimit_pages * PAGE,) * 2)
    os.setgroups([])
    os.setresgid(GIFT_UID + 1, GIFT_UID + 1, GIFT_UID + 1)
    os.setresuid(GIFT_UID + 1, GIFT_UID + 1, GIFT_UID + 1)
    ring = Uring()
    m = Mapping(-1, rlimit_pages * PAGE, mmap.PROT_READ | mmap.PROT_WRITE,
                mmap.MAP_PRIVATE | probelib.MAP_ANONYMOUS)
    libc.madvise(m.addr, m.length, mmap.MADV_NOHUGEPAGE)
    ctypes.memset(m.addr, 1, m.length)
    iov = (ctypes.c_uint64 * 2)(m.addr, m.length)
    reg = libc.syscall(NR_IO_URING_REGISTER, ring.fd, IORING_REGISTER_BUFFERS, ctypes.byref(iov), 1)
    out = {"registered": "ok" if reg == 0 else probelib.errname(ctypes.get_errno())}
    fd = open_dummy(SW_FLAGS)
    out["perf_map_after"] = probelib.outcome(lambda: RingBuffer(fd, 1).close())
    os.close(fd)
    ring.close()
    m.close()
    return out


def check_mlock_gift(args: list[str]) -> dict:
    """perf_event_mlock_kb's allowance and io_uring's RLIMIT_MEMLOCK (7.2.13 "perf: Track
    the perf mlock gift separately": perf's pages within its allowance go to user->perf_mlock,
    no longer to the user->locked_vm io_uring checks; 6.12: both in locked_vm)."""
    disabled = open(IO_URING_DISABLED).read().strip() if os.path.exists(IO_URING_DISABLED) \
        else "0"
    try:
        if disabled != "0":
            with open(IO_URING_DISABLED, "w") as f:
                f.write("0")
        with sysctls(paranoid="2"):
            gift = probelib.in_child(_gift, GIFT_RLIMIT_PAGES)
            out: dict = {"rlimit_pages": GIFT_RLIMIT_PAGES, "perf_pages": GIFT_PERF_PAGES,
                         "gift": gift}
        with sysctls(paranoid="2", mlock="8"):
            out["reverse"] = probelib.in_child(_gift_reverse, GIFT_RLIMIT_PAGES)
    finally:
        if disabled != "0":
            with open(IO_URING_DISABLED, "w") as f:
                f.write(disabled)
    if gift.get("io_uring") == "ENOSYS":
        raise probelib.Skip("the kernel has no io_uring (CONFIG_IO_URING off): "
                            "io_uring_setup() ENOSYS")
    return out


def open_test_pmu_task() -> int:
    """An event of the test PMU on this task, any CPU, user space only: what perf_event_open()
    lets `lab` open at perf_event_paranoid 2."""
    return perf.perf_event_open(perf.attr(test_pmu_type("ringlab_aux"), 4096, SW_FLAGS), 0, -1)


def _map_and_exit(pages: int) -> dict:
    fd = open_dummy(SW_FLAGS)
    RingBuffer(fd, pages - 1)  # never unmapped: the exit must return the charge
    return {"result": "ok", "vm_pin_kb": vm_pin_kb()}


@contextmanager
def own_instance() -> Iterator[str]:
    """A tracing instance of this process's (its path), for tracefs-map and pressure."""
    with tracefs.instance(f"ringlab-pin-{os.getpid()}", tracefs.Instance) as inst:
        yield inst.path


def check_script(args: list[str]) -> dict:
    """ARGS: paranoid=N then the operations (module docstring). The sysctls are put back."""
    paranoid = "2"
    if args and args[0].startswith("paranoid="):
        paranoid, args = args[0].split("=", 1)[1], args[1:]
    with sysctls(paranoid=paranoid) as saved, own_instance() as inst:
        out = probelib.in_child(Script(inst).run, args)
    return {"paranoid": int(paranoid), "saved_sysctls": saved, **out}


# --- stress --------------------------------------------------------------------------------

def _stress_worker(seconds: float, seed: int) -> dict:
    """Map, unmap and close in changing orders until the deadline; some rounds leave the
    mapping to exit(), some fork a child that maps and gets SIGKILLed."""
    become("user")
    rounds = errors = 0
    deadline = time.monotonic() + seconds
    held: list[tuple[int, RingBuffer]] = []
    x = seed
    while time.monotonic() < deadline:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        pages = 1 + (1 << (x % 6))
        try:
            fd = open_dummy(SW_FLAGS)
            rb = RingBuffer(fd, pages - 1)
        except OSError:
            errors += 1
            with suppress(NameError, OSError):
                os.close(fd)
            continue
        rounds += 1
        if x % 3 == 0:
            os.close(fd)
            rb.close()
        elif x % 3 == 1:
            rb.close()
            os.close(fd)
        else:
            held.append((fd, rb))
            if len(held) > 4:
                old_fd, old = held.pop(0)
                old.close()
                os.close(old_fd)
    return {"rounds": rounds, "errors": errors, "held_at_exit": len(held),
            "vm_pin_kb": vm_pin_kb()}


def check_stress(args: list[str]) -> dict:
    """PROCS processes as `lab` map and unmap for SECONDS with a small perf_event_mlock_kb (so
    both locked_vm and pinned_vm are charged); some get SIGKILLed mid-run. ARGS: SECONDS
    PROCS. Afterwards the user's allowance must be whole again (the test's script check)."""
    seconds = float(args[0]) if args else 5
    procs = int(args[1]) if len(args) > 1 else 6
    with sysctls(paranoid="2", mlock="64"):
        pids = {}
        for i in range(procs):
            pid, r = probelib.start_in_child(_stress_worker, seconds, 7919 * (i + 1))
            pids[pid] = r
        time.sleep(seconds / 2)
        killed = list(pids)[::3]
        for pid in killed:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        results = []
        for pid, r in pids.items():
            data, _ = probelib.reap_child(pid, r)
            if data:
                results.append(json.loads(data))
    return {"procs": procs, "killed": len(killed), "workers": results,
            "rounds": sum(w.get("rounds", 0) for w in results),
            "worker_errors": [w["error"] for w in results if "error" in w],
            "prober_vm_pin_kb": vm_pin_kb()}


# --- memory pressure ----------------------------------------------------------------------

def _meminfo() -> dict[str, int]:
    out = {}
    for line in open("/proc/meminfo"):
        key, _, rest = line.partition(":")
        out[key] = int(rest.split()[0])
    return out


def _hog(keep_free_kb: int, hold_s: float) -> dict:
    """Allocate and touch anonymous memory until MemAvailable is down to keep_free_kb, then
    compact and drop caches while holding it. Marked first for the OOM killer."""
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")
    chunks, got = [], 0
    step = 8 << 20
    while _meminfo()["MemAvailable"] > keep_free_kb + step // 1024:
        m = mmap.mmap(-1, step, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        for off in range(0, step, PAGE):
            m[off] = 1
        chunks.append(m)
        got += step
    with suppress(OSError):
        open("/proc/sys/vm/compact_memory", "w").write("1")
    with suppress(OSError):
        open("/proc/sys/vm/drop_caches", "w").write("3")
    time.sleep(hold_s)
    return {"hog_mb": got >> 20, "mem_available_kb": _meminfo()["MemAvailable"]}


def check_pressure(args: list[str]) -> dict:
    """A perf buffer and a tracefs buffer, both mapped and holding known data, through a memory
    hog that leaves the guest nearly nothing, page compaction and dropped caches: the bytes
    seen through each mapping are the same after, and both buffers keep working."""
    data_pages = 256
    out: dict = {"mem_total_kb": _meminfo()["MemTotal"]}
    with sysctls(paranoid="2"), own_instance() as inst:
        fd = open_counter()
        rb = RingBuffer(fd, data_pages)
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
        fire(3000)
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
        # The data area only: the control page's times may move while the event is off.
        perf_before = rb.map.read(PAGE, rb.length - PAGE)
        with open(f"{inst}/buffer_size_kb", "w") as f:
            f.write("256")
        os.sched_setaffinity(0, {0})
        marker = os.open(f"{inst}/trace_marker", os.O_WRONLY)
        for i in range(500):
            os.write(marker, f"pressure-{i:05d}".encode())
        tfd = os.open(f"{inst}/per_cpu/cpu0/trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
        first = Mapping(tfd, PAGE)
        msize = first.u32(0)  # trace_buffer_meta.meta_page_size
        first.close()
        tmeta = Mapping(tfd, msize)
        sub, nr = tmeta.u32(8), tmeta.u32(12)
        tdata = Mapping(tfd, sub * nr, offset=msize)
        trace_before = tdata.read(0, sub * nr)
        out["hog"] = probelib.in_child(_hog, 24 * 1024, 2.0)
        out["perf_bytes_unchanged"] = rb.map.read(PAGE, rb.length - PAGE) == perf_before
        out["trace_bytes_unchanged"] = tdata.read(0, sub * nr) == trace_before
        records = parse_records(rb.map.read(rb.data_offset, rb.data_size), rb.data_size, 0,
                                rb.data_head)
        out["samples_before"] = sum(1 for r in records if r.type == perf.PERF_RECORD_SAMPLE)
        head = rb.data_head
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_ENABLE)
        fire(100)
        fcntl.ioctl(fd, perf.PERF_EVENT_IOC_DISABLE)
        out["head_advanced_by"] = rb.data_head - head
        out["sample_size"] = SAMPLE_SIZE
        os.write(marker, b"after-pressure")
        fcntl.ioctl(tfd, trace_abi.TRACE_MMAP_IOCTL_GET_READER)
        out["trace_get_reader_after"] = "ok"
        out["trace_entries"] = trace_abi.TraceBufferMeta.from_buffer_copy(
            tmeta.read(0, ctypes.sizeof(trace_abi.TraceBufferMeta))).entries
        tdata.close()
        tmeta.close()
        os.close(tfd)
        os.close(marker)
        rb.close()
        os.close(fd)
    return out


# --- SHMEM-backed detached events (seed 002) ---------------------------------------------

def check_detached(args: list[str]) -> dict:
    """Detect the seed's interface: the PERF_FLAG_DETACHED open flag (mainline: EINVAL), the
    perffs filesystem at /sys/kernel/perf, or per-event files under tracefs perf/."""
    a = perf.attr(perf.PERF_TYPE_SOFTWARE, perf.PERF_COUNT_SW_DUMMY, SW_FLAGS)
    try:
        fd = perf.perf_event_open(a, 0, -1, -1, PERF_FLAG_DETACHED | perf.PERF_FLAG_FD_CLOEXEC)
        os.close(fd)
        flag = "accepted"
    except OSError as e:
        flag = probelib.errname(e)
    perffs = os.path.isdir("/sys/kernel/perf") and any(
        line.split()[2] == "perffs" for line in open("/proc/mounts") if len(line.split()) > 2)
    tracefs_perf = os.path.isdir(tracefs.path("perf"))
    out = {"detached_flag": flag, "perffs": perffs, "tracefs_perf_dir": tracefs_perf}
    if flag != "accepted" and not perffs and not tracefs_perf:
        out["skip"] = (f"kernel has no SHMEM-backed detached events (seed 002): "
                       f"PERF_FLAG_DETACHED: {flag}; perffs: absent; tracefs perf/: absent")
    return out


CHECKS = probelib.check_table(globals())


def _gate(check: str) -> None:
    if os.geteuid() != 0:
        raise probelib.Skip("probe_pinning runs as root (it sets sysctls and changes identity)")


def main(argv: list[str]) -> int:
    return probelib.check_main(argv, "pinning", "Probe pinning and accounting of mapped ring "
                               "buffers; prints one JSON document of observations for CHECK.",
                               CHECKS, "script operations, seconds, processes", _gate)


if __name__ == "__main__":
    probelib.run(main)
