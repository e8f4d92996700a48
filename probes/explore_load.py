"""Load the explorer puts on the kernel while its actors run (issue 43): the writers a mapped
reader races in real use. Each load is one record (Load): its name, the paths it goes with,
what it does, and one round of it; `./lab explore --load NAME[@CPU],...` names them, and the
explorer starts each in a process of its own pinned to its CPU before a sequence's actors
start, and kills it once they are done, before the end state is judged (a load must not hold
what the end check removes). A load's rounds are counted: the throughput beside the figures.

The loads act on the sequence's own objects where the path has them by name (the tracefs
instance of trace-mmap: its trace_marker, its buffer_size_kb, its sub-buffer size, its
events); the perf paths' events are opened inside a sequence, so their loads are the same
kernel paths on events of their own (high-frequency software samples into a mapped buffer on
the CPU, map/unmap of an event's buffer on another CPU, the test PMU's AUX writer against the
AUX area's last munmap, a buffer's detach against SET_OUTPUT). A load's own failure (a write the
kernel refuses) is counted, not judged: the actors' end state and the kernel log judge.

Stdlib only; runnable by hand: python3 explore_load.py NAME INSTANCE [--cpu N] [--seconds S].
"""
from __future__ import annotations

import argparse
import json
import mmap
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

TRACE = ("trace-mmap",)
PERF = ("perf-ring", "perf-aux", "pinning")


@dataclass(frozen=True)
class Load:
    """One load: a round of it is `round(env, state, n)`; `start(env)` opens what the rounds
    use (its state), in the load's own process."""
    name: str
    paths: tuple[str, ...]
    doc: str
    start: Callable[[dict], dict]
    round: Callable[[dict, dict, int], bool]     # True: the kernel did what was asked
    # repro.py's form: lines run once, then a round's lines (`inst` the instance, `n` the
    # round); empty: a reproducer runs this file beside it (`python3 explore_load.py NAME`).
    py_start: tuple[str, ...] = ()
    py_round: tuple[str, ...] = ()
    py_paths: tuple[str, ...] = TRACE     # the paths the Python form is written for
    # What a sequence did when a race shrink found it needs this load (probe_explore.py
    # traits: the known issues' explore traits): the subbuf load's size flips under events.
    traits: tuple[str, ...] = ()
    # What the load leaves running besides its rounds, stopped when it stops (the detach
    # load's child): nothing of a load may act once the end state is judged.
    finish: Callable[[dict], None] | None = None


def _write(path: str, text: str) -> bool:
    import tracefs
    return tracefs.write_file(path, text) == "ok"


# --- trace-mmap ----------------------------------------------------------------------------

def _marker_start(env: dict) -> dict:
    return {"fd": os.open(f"{env['instance']}/trace_marker", os.O_WRONLY)}


def _marker_round(env: dict, st: dict, n: int) -> bool:
    try:
        os.write(st["fd"], f"ringlab-load {n}\n".encode())
        return True
    except OSError:
        return False


MAPPED_CPU = 0    # the CPU buffer the trace sequences write (actor 0 runs there) and map most


def _raw(env: dict) -> str:
    return f"{env['instance']}/per_cpu/cpu{MAPPED_CPU}/trace_pipe_raw"


def _reader_start(env: dict) -> dict:
    """CPU 0's trace_pipe_raw of the instance, read from the load's own CPU: the buffer actor 0
    writes and maps (round 3's reader read its own CPU's buffer, which the actors seldom
    mapped: 064 and 065 never met it)."""
    return {"fd": os.open(_raw(env), os.O_RDONLY | os.O_NONBLOCK),
            "page": os.sysconf("SC_PAGE_SIZE")}


def _reader_round(env: dict, st: dict, n: int) -> bool:
    """One consuming read(): ring_buffer_read_page() under reader_lock, beside an actor's
    GET_READER or first mmap of the same buffer on CPU 0 (race mutants 063-065's recipes,
    each shown by hand with a reader like it). Only with actors, whose steps are not judged:
    it takes events a reader of the model would count."""
    try:
        return bool(os.read(st["fd"], st["page"]))
    except OSError:
        return False    # EAGAIN: nothing to take


def _resize_round(env: dict, st: dict, n: int) -> bool:
    """buffer_size_kb flips between two sizes: ring_buffer_resize() against the mapping."""
    return _write(f"{env['instance']}/buffer_size_kb", f"{(8, 16)[n % 2]}\n")


def _subbuf_round(env: dict, st: dict, n: int) -> bool:
    """The sub-buffer size flips: ring_buffer_subbuf_order_set() against the mapping."""
    return _write(f"{env['instance']}/buffer_subbuf_size_kb", f"{(4, 8)[n % 2]}\n")


def _snapshot_start(env: dict) -> dict:
    """The instance's `snapshot` file, opened once: ENOENT without CONFIG_TRACER_SNAPSHOT, the
    load's one clear death."""
    try:
        return {"fd": os.open(f"{env['instance']}/snapshot", os.O_WRONLY)}
    except FileNotFoundError:
        raise RuntimeError("no snapshot file in the instance (CONFIG_TRACER_SNAPSHOT)") from None


def _snapshot_round(env: dict, st: dict, n: int) -> bool:
    """`echo 1 > snapshot` (the snapshot armed, allocated, swapped with the main buffer,
    disarmed) then `echo 0` (freed): each arm allocates again, the window in which
    tracing_arm_snapshot_locked() and get_snapshot_map() must exclude each other under
    snapshot_trigger_lock (trace_snapshot.c), race mutant 067's. A mapped instance answers
    EBUSY (a round not done)."""
    try:
        os.write(st["fd"], (b"1", b"0")[n % 2])
        return True
    except OSError:
        return False


def _snapshot_finish(st: dict) -> None:
    """The snapshot freed and its file closed: no snapshot buffer outlives the load, so the end
    state's resize and removal meet the instance as the actors left it."""
    try:
        os.write(st["fd"], b"0")
    except OSError:
        pass
    os.close(st["fd"])


def _events_start(env: dict) -> dict:
    """The instance records every scheduler event: the kernel writes on each context switch
    and wake-up, from interrupts too, on every CPU."""
    _write(f"{env['instance']}/events/sched/enable", "1\n")
    return {}


def _events_round(env: dict, st: dict, n: int) -> bool:
    time.sleep(0.001)   # a switch each time: the events are the kernel's, not this loop's
    return True


# --- perf ------------------------------------------------------------------------------------

ATTR_FREQ = 1 << 10          # attr.freq: sample_period is a frequency (include/uapi/linux/perf_event.h)


def _open_clock(cpu: int, freq: int) -> int:
    """A cpu-clock event sampling all of `cpu` at `freq` Hz, a wake-up each record."""
    import perf_abi as perf
    a = perf.attr(perf.PERF_TYPE_SOFTWARE, perf.PERF_COUNT_SW_CPU_CLOCK, ATTR_FREQ)
    a.sample_period = freq
    a.sample_type = perf.PERF_SAMPLE_IP | perf.PERF_SAMPLE_TID | perf.PERF_SAMPLE_TIME
    a.wakeup_events = 1
    return perf.perf_event_open(a, pid=-1, cpu=cpu)


def _samples_start(env: dict) -> dict:
    """A cpu-clock event sampling the actors' CPU at 1 kHz into a mapped 1+8 page buffer,
    drained from the load's own CPU by moving data_tail: perf_output_begin() in CPU 0's timer
    interrupt loads data_tail while the other CPU stores it (race mutant 070's recipe; round
    3's load sampled and drained on one CPU, where the two never overlap). Not faster: the
    perf paths' sessions turn perf's interrupt throttling off, and at 10 kHz a TCG guest with
    lockdep spent all its time in the sample interrupts (no progress in 6 min)."""
    page = os.sysconf("SC_PAGE_SIZE")
    fd = _open_clock(_other_cpu(), 1000)
    return {"fd": fd, "map": mmap.mmap(fd, 9 * page), "page": page}


def _samples_round(env: dict, st: dict, n: int) -> bool:
    m = st["map"]
    head = int.from_bytes(m[1024:1032], "little")        # data_head (perf_event_mmap_page)
    m[1032:1040] = head.to_bytes(8, "little")           # data_tail: all read
    time.sleep(0.0005)
    return True


def _map_trace_meta(env: dict, st: dict, page: int) -> bool:
    """CPU 0's meta page mapped and unmapped through libc (Python's mmap.mmap() refuses a
    tracefs file, a regular file of size 0, before the kernel is asked), on one fd opened
    once: each map with no other mapping is the buffer's first (the id walk), and round 4's
    open and close each round held the load to 9 maps a second beside the actors."""
    from probelib import MAP_FAILED, libc
    if "trace_fd" not in st:
        st["trace_fd"] = os.open(_raw(env), os.O_RDONLY | os.O_NONBLOCK)
    addr = libc.mmap(None, page, mmap.PROT_READ, mmap.MAP_SHARED, st["trace_fd"], 0)
    if addr in (None, MAP_FAILED):
        return False
    libc.munmap(addr, page)
    return True


def _mapper_round(env: dict, st: dict, n: int) -> bool:
    """A buffer mapped and unmapped, on this load's CPU. trace-mmap: CPU 0's trace_pipe_raw,
    its first mapping each time (ring_buffer_map() assigns the sub-buffer ids and raises
    resize_disabled, the last munmap drops them) against the actors' reads and the resize
    loads (race mutants 064 and 066); perf: an event of its own, perf_mmap() and
    perf_mmap_close() allocating and freeing its buffer."""
    page = os.sysconf("SC_PAGE_SIZE")
    try:
        if "instance" in env:
            return _map_trace_meta(env, st, page)
        fd = st.get("fd")
        if fd is None:
            fd = st["fd"] = _open_clock(os.sched_getaffinity(0).pop(), 1000)
        mmap.mmap(fd, (1 + 2 ** (n % 3)) * page).close()
        return True
    except OSError:
        return False    # trace: EBUSY while a snapshot is armed, ENOMEM mid-resize


DRAIN_ROUNDS = 64      # GET_READERs on one mapping before the drainer maps again


def _drainer_round(env: dict, st: dict, n: int) -> bool:
    """A mapped reader of CPU 0's buffer as real consumers are: its meta page mapped, then
    GET_READER after GET_READER (each swaps in the next sub-buffer and fills the meta page),
    beside the reader load's read() and the marker writer: ring_buffer_map_get_reader()'s
    reader_lock section against rb_advance_reader() (race mutants 063 and 065's window, which
    an actor's few GET_READERs a sequence seldom meet). The mapping is dropped and made again
    every DRAIN_ROUNDS rounds, so resize and sub-buffer loads are not refused for good."""
    import fcntl
    from probelib import MAP_FAILED, libc
    from trace_abi import TRACE_MMAP_IOCTL_GET_READER
    page = os.sysconf("SC_PAGE_SIZE")
    if "fd" not in st:
        st["fd"] = os.open(_raw(env), os.O_RDONLY | os.O_NONBLOCK)
    if n % DRAIN_ROUNDS == 1 and st.get("addr"):
        libc.munmap(st.pop("addr"), page)
    if not st.get("addr"):
        addr = libc.mmap(None, page, mmap.PROT_READ, mmap.MAP_SHARED, st["fd"], 0)
        if addr in (None, MAP_FAILED):
            return False    # EBUSY while a snapshot is armed, ENOMEM mid-resize
        st["addr"] = addr
    try:
        fcntl.ioctl(st["fd"], TRACE_MMAP_IOCTL_GET_READER)
        return True
    except OSError:
        return False


def _other_cpu() -> int:
    """The CPU after this load's (its own on a 1-CPU guest): where the actors run."""
    return (os.sched_getaffinity(0).pop() + 1) % os.sysconf("SC_NPROCESSORS_ONLN")


AUX_PAGES, AUX_PERIOD_US = 16, 100      # ringlab_aux: attr.config1 is the tick in us (>= 100)
# ringlab_aux's config bits 56-63: each transaction held open 5 x 10 us, half of each tick, so
# the AUX area's last munmap on the other vCPU meets one in flight about one time in two
# (a single-threaded TCG guest switches vCPUs every ~3.6 ms; a bare transaction lasts a few us)
AUX_HOLD = 5 << 56
AUX_MAPPED_S = 0.008    # two TCG turns and more: the writer runs while the area is mapped


def _aux_start(env: dict) -> dict:
    """The test PMU's event on the other CPU, enabled, ticking every 100 us in hard irq
    (ringlab_aux's rl_tick(): perf_aux_output_begin() .. perf_aux_output_end(), held open
    50 us), its data area mapped once and its AUX area placed after it (race mutant 069's
    recipe)."""
    import perf_abi as perf
    from perf_events import test_pmu_type
    page = os.sysconf("SC_PAGE_SIZE")
    a = perf.attr(test_pmu_type("ringlab_aux"), 4096 | AUX_HOLD, flags=0)  # 4 KiB chunks, on
    a.config1 = AUX_PERIOD_US
    fd = perf.perf_event_open(a, pid=-1, cpu=_other_cpu())
    data = mmap.mmap(fd, 9 * page)
    ctl = perf.PerfEventMmapPage
    data[ctl.aux_offset.offset:ctl.aux_offset.offset + 8] = (9 * page).to_bytes(8, "little")
    data[ctl.aux_size.offset:ctl.aux_size.offset + 8] = (AUX_PAGES * page).to_bytes(8, "little")
    return {"fd": fd, "data": data, "page": page}


def _aux_round(env: dict, st: dict, n: int) -> bool:
    """The AUX area mapped read-only (overwrite: the writer never stops on a full area),
    kept for AUX_MAPPED_S, and unmapped while the other CPU writes into it: the last
    munmap's perf_pmu_output_stop() and rb_free_aux() against a transaction in flight. A
    writer begins a transaction only while the area is mapped, and a single-threaded TCG
    guest runs the other vCPU only every ~3.6 ms: an area unmapped at once was seldom
    written at all (races round 6: 7168 rounds, no transaction met)."""
    page = st["page"]
    try:
        aux = mmap.mmap(st["fd"], AUX_PAGES * page, prot=mmap.PROT_READ, offset=9 * page)
        time.sleep(AUX_MAPPED_S)
        aux.close()
        return True
    except OSError:
        return False


def _detach_start(env: dict) -> dict:
    """A dummy event of this load's own, and a child pinned to the other CPU that, without
    end, maps and unmaps the same event and asks PERF_EVENT_IOC_SET_OUTPUT(-1) of it: another
    mm's perf_mmap() and perf_event_set_output() read mmap_count and event->rb under
    mmap_mutex (race mutant 068's two recipes; by hand only the mapping child showed it,
    `refcount_t: addition on 0` then an oops, within seconds). A child, not a thread: a thread
    shares the mm (mmap_lock serialises its mmap with the munmap) and the GIL."""
    import fcntl
    import perf_abi as perf
    fd = perf.perf_event_open(perf.attr(perf.PERF_TYPE_SOFTWARE, perf.PERF_COUNT_SW_DUMMY))
    other, parent = _other_cpu(), os.getpid()
    page = os.sysconf("SC_PAGE_SIZE")
    child = os.fork()
    if child == 0:
        try:
            os.sched_setaffinity(0, {other})
            n = 0
            while n % 16 or os.getppid() == parent:     # a load killed outright leaves it
                n += 1                                    # to notice (a map waits on RCU)
                try:
                    mmap.mmap(fd, 2 * page, prot=mmap.PROT_READ).close()
                except OSError:
                    pass    # EBUSY while a buffer of another size is mapped
                try:
                    fcntl.ioctl(fd, perf.PERF_EVENT_IOC_SET_OUTPUT, -1)
                except OSError:
                    pass    # EINVAL while mapped (a buffer of its own): the check is the race
        finally:
            os._exit(0)
    return {"fd": fd, "page": page, "child": child}


def _detach_finish(st: dict) -> None:
    """The child killed and reaped, so its mapping is gone (exit_mmap() before the zombie)
    before the end check maps the user's allowance: left to notice its parent, it mapped on
    for up to 16 rounds, and its 2 pages charged to the user made the check's first mapping
    fail (round 3's `allowance` failures of every perf baseline: the lab's)."""
    import signal
    os.kill(st["child"], signal.SIGKILL)
    os.waitpid(st["child"], 0)


def _detach_round(env: dict, st: dict, n: int) -> bool:
    """The event's buffer mapped and its last munmap: perf_mmap_close() detaching the buffer
    (ring_buffer_attach(event, NULL)) against the other CPU's SET_OUTPUT(-1)."""
    try:
        mmap.mmap(st["fd"], 2 * st["page"], prot=mmap.PROT_READ).close()
        return True
    except OSError:
        return False


LOADS: dict[str, Load] = {load.name: load for load in (
    Load("marker", TRACE, "trace_marker writes into the instance, numbered 'ringlab-load N'",
         _marker_start, _marker_round,
         ("fd = os.open(f'{inst}/trace_marker', os.O_WRONLY)",),
         ("os.write(fd, f'ringlab-load {n}\\n'.encode())",)),
    Load("reader", TRACE, "read() of CPU 0's trace_pipe_raw in a loop from its CPU, consuming",
         _reader_start, _reader_round,
         ("rfd = os.open(f'{inst}/per_cpu/cpu0/trace_pipe_raw', os.O_RDONLY | os.O_NONBLOCK)",),
         ("os.read(rfd, 4096)",)),
    Load("resize", TRACE, "buffer_size_kb flips 8 <-> 16 KiB", lambda env: {}, _resize_round,
         (), ("open(f'{inst}/buffer_size_kb', 'w').write(('8', '16')[n % 2])",)),
    Load("subbuf", TRACE, "buffer_subbuf_size_kb flips 4 <-> 8 KiB", lambda env: {},
         _subbuf_round, (),
         ("open(f'{inst}/buffer_subbuf_size_kb', 'w').write(('4', '8')[n % 2])",),
         traits=("subbuf-changed-with-events",)),
    Load("snapshot", TRACE, "the instance's snapshot armed (echo 1: allocated and swapped) and "
         "freed (echo 0) in turn", _snapshot_start, _snapshot_round,
         ("sfd = os.open(f'{inst}/snapshot', os.O_WRONLY)",),
         ("os.write(sfd, (b'1', b'0')[n % 2])",), finish=_snapshot_finish),
    Load("events", TRACE, "the instance records the sched events", _events_start,
         _events_round, ("open(f'{inst}/events/sched/enable', 'w').write('1')",),
         ("time.sleep(0.001)",)),
    Load("samples", PERF, "a 1 kHz cpu-clock event sampling the other CPU into a mapped buffer "
         "this CPU drains",
         _samples_start, _samples_round),
    Load("mapper", TRACE + PERF, "a buffer mapped and unmapped in a loop (trace-mmap: CPU 0's; "
         "perf: an event's own)", lambda env: {}, _mapper_round,
         ("_f = os.open(f'{inst}/per_cpu/cpu0/trace_pipe_raw', os.O_RDONLY)",),
         ("_a = libc.mmap(None, PAGE, mmap.PROT_READ, mmap.MAP_SHARED, _f, 0)",
          "_a != MAP_FAILED and libc.munmap(_a, PAGE)")),
    Load("drainer", TRACE, "CPU 0's buffer mapped and drained, GET_READER in a loop (mapped "
         "again every 64)", lambda env: {}, _drainer_round,
         ("_f = os.open(f'{inst}/per_cpu/cpu0/trace_pipe_raw', os.O_RDONLY)",
          "_a = libc.mmap(None, PAGE, mmap.PROT_READ, mmap.MAP_SHARED, _f, 0)"),
         ("fcntl.ioctl(_f, 0x5220)",)),
    Load("aux", PERF, "the test PMU writing AUX chunks every 100 us on the other CPU, its AUX "
         "area mapped and unmapped under it", _aux_start, _aux_round),
    Load("detach", PERF, "an event's last munmap against mmap and SET_OUTPUT(-1) of it from a "
         "child on the other CPU", _detach_start, _detach_round, finish=_detach_finish),
)}


def split(spec: str) -> list[tuple[str, str]]:
    """`NAME[@CPU],...` -> [(name, cpu as written, '' if none)]: the one reading of a spec,
    for the guest (parse()) and the host (it checks names and picks each path's loads)."""
    return [(name.strip(), cpu.strip()) for item in spec.split(",") if item.strip()
            for name, _, cpu in [item.partition("@")]]


def parse(spec: str, path: str, ncpus: int) -> list[tuple[str, int]]:
    """`NAME[@CPU],...` -> [(name, cpu)]: a load without a CPU takes the last one (the actors
    start on the first). ValueError naming the culprit for a load this path has not, or a CPU
    the guest has not."""
    out = []
    for name, cpu in split(spec):
        part = f"{name}@{cpu}" if cpu else name
        if name not in LOADS:
            raise ValueError(f"load {name!r}: not one of {', '.join(LOADS)}")
        if path not in LOADS[name].paths:
            raise ValueError(f"load {name!r} goes with {', '.join(LOADS[name].paths)}, "
                             f"not {path}")
        c = int(cpu) if cpu else ncpus - 1
        if not 0 <= c < ncpus:
            raise ValueError(f"load {part!r}: CPU {c} (the guest has {ncpus})")
        out.append((name, c))
    return out


SLOT = 128      # a load's bytes in Running's shared page: rounds, ok, and why it died


class Running:
    """The loads of one sequence, each in a process of its own pinned to its CPU, counting its
    rounds in a shared page. A load stops when the pipe from its parent closes: the parent
    may have dropped root since (the perf worlds run as the sequence's user) and could not
    signal a root child, and a parent that dies takes its loads with it."""

    def __init__(self, loads: list[tuple[str, int]], env: dict) -> None:
        self.loads = loads
        self.counts = mmap.mmap(-1, SLOT * max(1, len(loads)))
        self.pids: list[int] = []
        stop_r, self.stop_w = os.pipe()
        for i, (name, cpu) in enumerate(loads):
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    os.close(self.stop_w)
                    os.set_blocking(stop_r, False)
                    if os.getresuid()[2] == 0 and os.geteuid() != 0:
                        # a world that dropped to the sequence's user keeps root saved:
                        # loads act as root (the aux load's event is per CPU)
                        os.setresgid(0, 0, 0)
                        os.setresuid(0, 0, 0)
                    os.sched_setaffinity(0, {cpu})
                    self._loop(i, LOADS[name], env, stop_r)
                except BaseException as e:  # noqa: BLE001 - said in its counts, not raised
                    code = 1
                    said = f"{type(e).__name__}: {e}".encode()[:SLOT - 17]
                    self.counts[SLOT * i + 16:SLOT * i + 16 + len(said)] = said
                os._exit(code)
            self.pids.append(pid)
        os.close(stop_r)

    def _loop(self, i: int, load: Load, env: dict, stop: int) -> None:
        st = load.start(env)
        n = ok = 0
        while True:
            try:
                if os.read(stop, 1) == b"":
                    if load.finish is not None:
                        load.finish(st)
                    return      # the parent closed the pipe (or died)
            except BlockingIOError:
                pass
            n += 1
            ok += load.round(env, st, n)
            self.counts[SLOT * i:SLOT * i + 16] = n.to_bytes(8, "little") + ok.to_bytes(8, "little")

    def stop(self) -> dict[str, dict]:
        """Stop every load and wait for it; each load's rounds, the ones the kernel did, and
        whether it died (a load's own error, e.g. one that cannot start: the lab's, said with
        its reason so a run with a dead load is not read as a kernel that held)."""
        os.close(self.stop_w)
        died = {}
        for i, pid in enumerate(self.pids):
            died[i] = os.waitpid(pid, 0)[1] != 0
        out: dict[str, dict] = {}
        for i, (name, cpu) in enumerate(self.loads):
            raw = self.counts[SLOT * i:SLOT * i + SLOT]
            out[f"{name}@{cpu}"] = {"rounds": int.from_bytes(raw[:8], "little"),
                                    "ok": int.from_bytes(raw[8:16], "little"),
                                    "died": int(died[i])}
            if died[i]:
                out[f"{name}@{cpu}"]["error"] = raw[16:].rstrip(b"\0").decode(errors="replace")
        self.counts.close()
        return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="Run one load by hand and print its rounds.")
    ap.add_argument("name", choices=sorted(LOADS))
    ap.add_argument("instance", nargs="?", default="/sys/kernel/tracing",
                    help="the tracefs instance (trace loads)")
    ap.add_argument("--cpu", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args(argv)
    r = Running([(a.name, a.cpu)], {"instance": a.instance})
    time.sleep(a.seconds)
    print(json.dumps(r.stop()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
