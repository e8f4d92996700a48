"""The trace-mmap path for probe_explore.py: a tracing instance's per-CPU ring buffers mapped
into user space (include/uapi/linux/trace_mmap.h), with the writes that must be refused while
they are mapped.

TraceModel is pure (unit tested on the host); TraceWorld makes the calls, as root, in a fresh
instance per sequence, pinned to CPU 0 (so trace_marker writes land in CPU 0's buffer). The
rules, from kernel/trace/ring_buffer.c (ring_buffer_map(), __rb_map_vma(), ring_buffer_resize(),
ring_buffer_subbuf_order_set(), ring_buffer_map_get_reader()) and kernel/trace/trace.c,
trace_snapshot.c (tracing_buffers_mmap(), tracing_buffers_may_split(),
tracing_arm_snapshot_locked()):
- a mapping is read-only, shared, never executable: PROT_WRITE on an O_RDONLY fd is the VFS's
  EACCES, on an O_RDWR fd or a private mapping the driver's EPERM; PROT_EXEC and MAP_PRIVATE:
  EPERM; VM_MAYWRITE is cleared, so mprotect(PROT_WRITE) later is EACCES (whatever the fd);
- a mapping is at most the meta page and every sub-buffer (one sub-buffer more: EINVAL) and
  starts on a sub-buffer boundary (pgoff 1 with sub-buffers of more than a page: EINVAL);
- no split (munmap of a part, mremap shrink: EINVAL), no growth (mremap grow: EFAULT,
  VM_DONTEXPAND), no MREMAP_DONTUNMAP (EINVAL); a move keeps the mapping;
- an ioctl other than GET_READER (and 0, the wake-up): ENOTTY (trace_mmap.h has no other);
- while any CPU buffer of the instance is mapped: buffer_size_kb EBUSY, a new
  buffer_subbuf_size_kb EBUSY (the same size: nothing to do, 0), a snapshot (echo 1 >
  snapshot) EBUSY; after the last munmap all of them work again;
- a snapshot trigger armed (registered on an event) and a mapping exclude each other: EBUSY
  either way (get_snapshot_map(), tracing_arm_snapshot_locked());
- a boot-time persistent buffer user space may not map is ENODEV: one at a fixed address
  (memmap=; 6.12 every boot-mapped one, TRACE_ARRAY_FL_BOOT) and a backup copy (7.x);
- TRACE_MMAP_IOCTL_GET_READER: ENODEV on a CPU not mapped, else 0; after it the meta page's
  `entries` counts every event written to that CPU, and `subbuf_size` is the one in use;
- a mapping is VM_DONTCOPY: a child of fork() has it only after MADV_DOFORK (which 7.x
  refuses);
- every trace_marker write is numbered ("ringlab N"): each event a reader takes (read() of
  trace_pipe_raw, the reader sub-buffer through a mapping after GET_READER) is taken once,
  in order, and none is skipped beyond what the kernel counts lost (Tally);
- at the end, with everything unmapped and closed: the buffer resizes and the instance is
  removed (rmdir), and no splat.
Stdlib only.
"""
from __future__ import annotations

import fcntl
import mmap
import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import trace_abi
from trace_buffer import COMMIT_MASK, RB_MISSED_EVENTS, parse_subbuf
from explore_ops import (Args, Model, Op, Region, Step, World, close_forms, mapping_env, polled,
                         ref_id, table)

BUFFER_KB = (8, 32, 128)
SUBBUF_KB = (4, 8)
WRITES = (1, 10, 60, 1000)     # 1000: more than an 8 KiB buffer holds (overrun)
MARKER = "ringlab {}\n"          # the n-th trace_marker write of the sequence
WRAP_WRITE_MAX = 2000         # a write goes round a ring of up to this many events (~0.1 s)
READ_BYTES = 1 << 16        # more than a sub-buffer: a read() takes a whole page
DRAIN_MAX = 64              # GET_READERs a drain makes at the most (a ring has fewer sub-buffers)
# Bytes a trace_marker event of MARKER takes at the most in a sub-buffer (print_entry and its
# text, the event header, a time extend): the events of a sequence that wrote fewer than
# subbuf_size / EVENT_BOUND all fit in the first sub-buffer.
EVENT_BOUND = 64
# ...and at the least (the 26-byte print_entry and a 4-byte header, aligned: 32), so that a
# sequence that wrote more than CAPACITY_SLACK times the ring's bytes / EVENT_FLOOR since the
# last reader swap has certainly overwritten events (the instance's default `overwrite` mode).
EVENT_FLOOR = 28
CAPACITY_SLACK = 1.5
SUBBUF_HEADER = 16          # struct buffer_data_page before the data: rb_subbuf_capacity()
COMMIT_OFFSET = 8           # struct buffer_data_page: u64 time_stamp, local_t commit
UNKNOWN_IOCTL = 0x5221      # _IO('R', 0x21): GET_READER's neighbour, which no kernel defines
# The instance file a step writes.
TRACEFS_FILE = {"resize": "buffer_size_kb", "subbuf": "buffer_subbuf_size_kb",
                "percent": "buffer_percent",
                "snapshot": "snapshot"}


@dataclass
class TraceVma:
    fd: int
    cpu: int
    whole: bool               # meta page and every sub-buffer, or the meta page only
    has_meta: bool = True     # from pgoff 0 (not "off": the first sub-buffer only)
    live: bool = True
    copies_on_fork: bool = False

    @property
    def splittable(self) -> bool:
        return self.whole


@dataclass
class TraceModel(Model):
    path: str
    setup: dict
    fds: dict[int, int] = field(default_factory=dict)          # id: cpu
    writable_fds: set[int] = field(default_factory=set)        # opened O_RDWR
    vmas: dict[int, TraceVma] = field(default_factory=dict)
    buffer_kb: int = 0
    subbuf_kb: int = 0
    written: int | None = 0   # events written to CPU 0 since the instance began; None: unknown
    since: int | None = 0     # ...since CPU 0's reader last swapped (GET_READER, read())
    overran: bool | None = False  # CPU 0's ring certainly overwrote events (None: unknown)
    missed: bool | None = None    # the last GET_READER's sub-buffer certainly follows a loss
    # A reader of CPU 0 took events: its page may be the one the writer is on, so the next
    # GET_READER may only take the rest of it, without a swap (and the missed-events flag
    # waits for the swap after). Never false again: the model does not follow the pages.
    caught_up: bool = False
    refused: bool = False     # a mapping was refused since the last one taken
    meta_fresh: bool = False  # a GET_READER on CPU 0 was the last step
    percent: int = 50         # tr->buffer_percent: how full a poll() waits for (0: not empty)
    armed: bool = False       # a snapshot trigger is registered (tr->snapshot held by it)
    sized: bool = False       # the last step wrote buffer_subbuf_size_kb (taken or refused)
    took: int | None = None   # the last step took events: through this fd or mapping
    traits: set[str] = field(default_factory=set)
    opening: list[dict] = field(default_factory=list)   # the opening steps still to come

    def __post_init__(self) -> None:
        self.buffer_kb = self.setup["buffer_kb"]
        self.subbuf_kb = self.setup["subbuf_kb"]

    def wrapped(self) -> bool:
        """Since the reader last swapped, CPU 0's writer went round the whole ring: events were
        overwritten (ring_buffer_resize() sizes the ring: at least 2 sub-buffers of
        subbuf_size - 16 bytes a buffer_size_kb, and the reader's own)."""
        return self.since is not None and self.since >= self.events_to_wrap()

    def events_to_wrap(self) -> int:
        """Events after which the writer has certainly gone round CPU 0's ring."""
        sub = self.subbuf_kb * 1024
        pages = max(2, -(-self.buffer_kb * 1024 // (sub - SUBBUF_HEADER))) + 1
        return int(pages * sub * CAPACITY_SLACK) // EVENT_FLOOR + 1

    def mapped(self, cpu: int | None = None) -> int:
        return sum(v.live and (cpu is None or v.cpu == cpu) for v in self.vmas.values())

    def cpu_of(self, ref: object) -> int | None:
        """The CPU of an open trace_pipe_raw "@ID" names, or None."""
        i = ref_id(ref)
        return self.fds.get(i) if i is not None else None

    def vma(self, ref: object) -> TraceVma | None:
        i = ref_id(ref)
        v = self.vmas.get(i) if i is not None else None
        return v if v is not None and v.live else None

    def live_vmas(self) -> list[tuple[int, TraceVma]]:
        return [(s, v) for s, v in self.vmas.items() if v.live]

    def open_files(self) -> int:
        return len(self.fds)

    def unmap(self, sid: int) -> None:
        self.vmas[sid].live = False

    def choose(self, rng: random.Random, sid: int) -> dict | None:
        """Half the sequences open as a consumer of CPU 0 does (open, mmap of all of its
        buffer; Hypothesis's @initialize rules): the reader and the writer then have the
        rest of the sequence to go round the ring (mutant 042 needs about six steps of it)."""
        if sid == 0:
            self.opening = list(OPENING) if rng.random() < 0.5 else []
        if self.opening:
            step = self.opening.pop(0)
            if self.valid(dict(step, id=sid)):
                return step
            self.opening = []
        return super().choose(rng, sid)

    def apply(self, step: dict, result: str) -> None:
        self.meta_fresh = False     # only the step right after GET_READER reads it fresh
        self.sized = step["op"] == "subbuf"
        self.took = None
        if step["op"] == "mmap":
            self.refused = result != "ok"
            cpu = self.cpu_of(step["args"]["fd"])
            if self.refused and cpu is not None and not self.mapped(cpu):
                self.traits.add("refused-first-map")   # known issue trace-mmap-first-map-*
        super().apply(step, result)

    def observe(self) -> dict:
        """For a live mapping of CPU 0: the sub-buffer size in use; right after GET_READER,
        every event written, and (while all of them fit in one sub-buffer, so the reader
        sub-buffer holds them all) every one read and none overrun; and through a mapping of
        the whole buffer, that the sub-buffer reader.id names is the one GET_READER consumed
        (its commit is reader.read: the reader was advanced over the whole sub-buffer).
        Right after a write of buffer_subbuf_size_kb, the file reads the size in use: a
        refused one (EBUSY while mapped) left it as it was. Right after a reader took events,
        none twice and none skipped that the kernel did not count lost (Tally)."""
        out: dict = {}
        if self.sized:
            out["tracefs@0"] = {"buffer_subbuf_size_kb": self.subbuf_kb}
        if self.took is not None:
            out[f"events@{self.took}"] = {"twice": 0, "unaccounted": 0}
        live = [s for s, v in sorted(self.vmas.items()) if v.live and v.cpu == 0 and v.has_meta]
        if not live:
            return out
        want: dict = {"subbuf_size": self.subbuf_kb * 1024}
        out[f"meta@{live[0]}"] = want
        few = self.written is not None and self.written <= self.subbuf_kb * 1024 // EVENT_BOUND
        if self.meta_fresh and self.written is not None:
            want["entries"] = self.written
            if few:
                want.update(read=self.written, overrun=0)
        if self.meta_fresh and self.overran:
            want["overran"] = True
        whole = [s for s in live if self.vmas[s].whole]
        if self.meta_fresh and whole:
            sub = out[f"subbuf@{whole[0]}"] = {"reader_commit_is_read": True}
            if self.missed or few:
                sub["missed"] = bool(self.missed)
        return out

    def release(self) -> None:
        for v in self.vmas.values():
            v.live = False
        self.fds.clear()

    def end(self) -> dict:
        return {"resize": "ok", "rmdir": "ok"}


@dataclass
class Tally:
    """Which numbered events the sequence's readers took: each must be new (`twice` counts
    one taken again) and in order, and the numbers skipped (`missing`) are at most what the
    kernel counts lost (overrun, commit overrun, dropped events in per_cpu/cpu0/stats).
    `forgot`: events written before a step that may take or drop them unseen (GET_READER
    with no mapping of the sub-buffers to read, a new size, a new sub-buffer size, a
    snapshot). The reproducers keep the same tally (reproducer.py, c/trace.h)."""
    marks: int = 0          # events written
    forgot: int = 0
    last: int = 0           # the newest one taken
    twice: int = 0
    missing: int = 0
    lost_base: int = 0          # what the stats counted lost when the tally last forgot
    read_since: bool = False    # read() took events since the last GET_READER

    def seen(self, n: int, strict: bool) -> None:
        """A reader took event n; `strict`: it cannot have been taken before."""
        if n <= self.forgot:
            return
        if n <= self.last:
            self.twice += strict
            return
        self.missing += n - max(self.last, self.forgot) - 1
        self.last = n

    def took(self, sb: bytes, start: int, strict: bool) -> None:
        """The numbered events of one sub-buffer from offset `start`, up to where it stops
        making sense if it does (what was taken is judged). The reproducers walk it alike."""
        for e in parse_subbuf(sb, tolerant=True).events:
            at = e.payload.find(b"ringlab ")
            if at >= 0 and e.offset >= start:
                self.seen(int(e.payload[at + 8:].split(b"\n", 1)[0]), strict)

    def read(self, data: bytes) -> None:
        """What one read() of trace_pipe_raw gave: a sub-buffer, all of it taken now."""
        if data:
            self.read_since = True
            self.took(data, SUBBUF_HEADER, True)

    def take(self, fd: int, addr: int) -> bool:
        """GET_READER on fd, then the reader sub-buffer through the whole mapping at addr:
        on the same one as before the call, from where the meta page said the reader was
        (reader.read: what GET_READER consumed), else all of it (libtracefs's reader does the
        same; a new mapping numbers the sub-buffers anew). After a read() the meta page is
        stale (read() swaps reader pages unsaid, and the same id may come back as another
        page: 6.12-7.3, round 10): all of it then, its events not strictly new. Whether it
        showed anything new."""
        import ctypes
        meta = trace_abi.TraceBufferMeta.from_address(addr)
        before = (meta.reader_id, meta.reader_read)
        fcntl.ioctl(fd, trace_abi.TRACE_MMAP_IOCTL_GET_READER)
        rid, size = meta.reader_id, meta.subbuf_size
        buf = ctypes.string_at(addr + meta.meta_page_size + rid * size, size)
        start = SUBBUF_HEADER + (before[1] if rid == before[0] and not self.read_since else 0)
        self.took(buf, start, not self.read_since)
        self.read_since = False
        return (rid, meta.reader_read) != before

    def forget(self, stats: dict[str, str]) -> None:
        """The events written so far are judged no more: a step may have taken or dropped
        them unseen. What was skipped before goes too, and the losses are counted from the
        CPU's stats as they are now (`stats`, read after the step): a snapshot swaps the
        buffer whose stats counted them out, a resize keeps its counts (7.2.13, round 10)."""
        self.forgot, self.missing, self.lost_base = self.marks, 0, lost_of(stats)

    def unaccounted(self, stats: dict[str, str]) -> int:
        """Events skipped beyond what the CPU's stats (tracefs.cpu_stats()) count lost since
        the tally last forgot."""
        return max(0, self.missing - (lost_of(stats) - self.lost_base))


def lost_of(stats: dict[str, str]) -> int:
    """Events per_cpu/cpuN/stats counts lost: overrun, commit overrun, dropped events."""
    return sum(int(stats.get(k, 0)) for k in ("overrun", "commit overrun", "dropped events"))


# --- the operations: each one's draw, rule, model update, call and reproducer forms --------

def _has_fd(m: TraceModel, a: Args) -> bool:
    return m.cpu_of(a["fd"]) is not None


def _per_fd(weight: float) -> object:
    return lambda m, rng: [(weight, {"fd": f"@{s}"}) for s in m.fds]


def _apply_open(m: TraceModel, sid: int, a: Args) -> None:
    m.fds[sid] = a["cpu"]
    if a["mode"] == "rw":
        m.writable_fds.add(sid)


def _call_open(w: TraceWorld, sid: int, a: Args) -> str:
    w.fds[sid] = os.open(f"{w.inst}/per_cpu/cpu{a['cpu']}/trace_pipe_raw",
                         (os.O_RDWR if a["mode"] == "rw" else os.O_RDONLY) | os.O_NONBLOCK)
    return "ok"


def _py_open(s: Step) -> list[str]:
    mode = "os.O_RDWR" if s["mode"] == "rw" else "os.O_RDONLY"
    return [f"fd[{s.id}] = os.open(f'{{inst}}/per_cpu/cpu{s['cpu']}/trace_pipe_raw', "
            f"{mode} | os.O_NONBLOCK)", "got = 'ok'"]


def _c_open(s: Step) -> list[str]:
    mode = "O_RDWR" if s["mode"] == "rw" else "O_RDONLY"
    return [f'snprintf(path, sizeof(path), "%s/per_cpu/cpu{s["cpu"]}/trace_pipe_raw", inst);',
            f"fd[{s.id}] = open(path, {mode} | O_NONBLOCK);", f"got = res(fd[{s.id}] >= 0);"]


OPEN = Op(
    "open", ("cpu", "mode"), defaults=(("mode", "r"),),
    draw=lambda m, rng: [(3 if len(m.fds) < 2 else 0.5, {
        "cpu": rng.choice([c for c in (0, 1) if c < m.setup["ncpus"]]),
        "mode": "rw" if rng.random() < 0.3 else "r"})],
    pre=lambda m, a: a["mode"] in ("r", "rw"),
    expect=lambda m, a: frozenset({"ok"}),
    apply=_apply_open, call=_call_open, py=_py_open, c=_c_open,
    simpler=lambda a: [dict(a, mode="r")] if a["mode"] != "r" else [],
    rule="open() of the instance's per_cpu/cpuN/trace_pipe_raw, O_RDONLY or O_RDWR")


def _apply_close(m: TraceModel, sid: int, a: Args) -> None:
    del m.fds[ref_id(a["fd"]) or 0]
    if m.mapped():
        m.traits.add("closed-while-mapped")


def _call_close(w: TraceWorld, sid: int, a: Args) -> str:
    os.close(w.fds.pop(ref_id(a["fd"]) or 0))
    return "ok"


CLOSE = Op(
    "close", ("fd",), refs=("fd",),
    draw=_per_fd(0.7),  # type: ignore[arg-type]
    pre=_has_fd, expect=lambda m, a: frozenset({"ok"}),
    apply=_apply_close, call=_call_close,
    py=close_forms("fd")[0], c=close_forms("fd")[1],
    rule="the file goes; its mappings stay and keep the buffer mapped")


def _draw_mmap(m: TraceModel, rng: random.Random) -> list[tuple[float, Args]]:
    out: list[tuple[float, Args]] = []
    for s in m.fds:
        prot = rng.choice(("rw", "rx")) if rng.random() < 0.15 else "r"
        share = "private" if rng.random() < 0.1 else "shared"
        what = rng.choice(("past", "off")) if rng.random() < 0.15 else \
            rng.choice(("all", "meta"))
        out.append((4, {"fd": f"@{s}", "what": what, "prot": prot, "share": share}))
    return out


def _expect_mmap(m: TraceModel, a: Args) -> frozenset[str]:
    prot, share = a["prot"], a["share"]
    if prot == "rw" and share == "shared" and ref_id(a["fd"]) not in m.writable_fds:
        return frozenset({"EACCES"})
    if m.armed:         # get_snapshot_map() comes before ring_buffer_map()'s own checks
        return frozenset({"EBUSY"})
    if share != "shared" or prot != "r":
        return frozenset({"EPERM"})
    if a["what"] == "past":
        return frozenset({"EINVAL"})
    if a["what"] == "off" and m.subbuf_kb * 1024 > m.setup.get("page_size", 4096):
        return frozenset({"EINVAL"})
    return frozenset({"ok"})


def _apply_mmap(m: TraceModel, sid: int, a: Args) -> None:
    cpu = m.cpu_of(a["fd"])
    assert cpu is not None
    if m.mapped(cpu):
        m.traits.add("mapped-again")
    m.vmas[sid] = TraceVma(ref_id(a["fd"]) or 0, cpu, a["what"] == "all",
                           has_meta=a["what"] != "off")


def _map(fd: int, length: int, prot: int, flags: int, offset: int = 0) -> int:
    from probelib import libc, libc_error, mapped
    addr = libc.mmap(None, length, prot, flags, fd, offset)
    if not mapped(addr):
        raise libc_error()
    return addr


def _call_mmap(w: TraceWorld, sid: int, a: Args) -> str:
    """The meta page; or (what == "all") the meta page first, then meta page and every
    sub-buffer as its fields say (trace_mmap.h), then the first mapping undone ("past":
    one sub-buffer more); or ("off") one page at page offset 1."""
    import ctypes
    from probelib import libc
    fd, what = w.fd(a["fd"]), a["what"]
    p = mmap.PROT_READ | {"rw": mmap.PROT_WRITE, "rx": mmap.PROT_EXEC}.get(a["prot"], 0)
    flags = mmap.MAP_SHARED if a["share"] == "shared" else mmap.MAP_PRIVATE
    if what == "off":
        w.vmas[sid] = Region(_map(fd, w.page, p, flags, w.page), w.page)
        return "ok"
    addr = _map(fd, w.page, p, flags)
    length = w.page
    if what in ("all", "past"):
        meta = trace_abi.TraceBufferMeta.from_address(addr)
        whole = meta.meta_page_size + (meta.nr_subbufs + (what == "past")) * meta.subbuf_size
        try:
            new = _map(fd, whole, p, flags)
        finally:
            libc.munmap(ctypes.c_void_p(addr), w.page)
        addr, length = new, whole
    w.vmas[sid] = Region(addr, length)
    return "ok"


def _py_mmap(s: Step) -> list[str]:
    prot = {"rw": 3, "rx": 5}.get(s["prot"], 1)
    flags = 1 if s["share"] == "shared" else 2
    offset = "PAGE" if s["what"] == "off" else "0"     # "off": the first sub-buffer's page
    lines = [f"addr = libc.mmap(None, PAGE, {prot}, {flags}, fd[{s.ref('fd')}], {offset})",
             "got = res(mapping(addr))", "length = PAGE"]
    if s["what"] in ("all", "past"):
        # meta_page_size + nr_subbufs * subbuf_size (one more for "past"), mapped in its place
        more = " + 1" if s["what"] == "past" else ""
        lines += ["if got == 'ok':",
                  "    msz, _, sub, nsub = struct.unpack_from('<IIII', "
                  "ctypes.string_at(addr, 16))",
                  f"    length = msz + (nsub{more}) * sub",
                  f"    new = libc.mmap(None, length, {prot}, {flags}, fd[{s.ref('fd')}], 0)",
                  "    libc.munmap(addr, PAGE)",
                  "    addr, got = new, res(mapping(new))"]
    return lines + [f"if got == 'ok': m[{s.id}] = (addr, length)"]


def _c_mmap(s: Step) -> list[str]:
    i = s.id
    prot = {"rw": "PROT_READ | PROT_WRITE", "rx": "PROT_READ | PROT_EXEC"}.get(s["prot"],
                                                                             "PROT_READ")
    flags = "MAP_SHARED" if s["share"] == "shared" else "MAP_PRIVATE"
    offset = "page" if s["what"] == "off" else "0"
    lines = [f"a = mmap(NULL, page, {prot}, {flags}, fd[{s.ref('fd')}], {offset});",
             "got = res(a != MAP_FAILED);",
             f"if (a != MAP_FAILED) {{ addr[{i}] = a; len[{i}] = page; }}"]
    if s["what"] in ("all", "past"):
        # the meta page read for the buffer's size, then the whole buffer (one sub-buffer
        # past it for "past") mapped in its place
        more = " + 1" if s["what"] == "past" else ""
        lines += ["if (a != MAP_FAILED) {",
                  "\tstruct trace_buffer_meta *meta = (struct trace_buffer_meta *)a;",
                  "",
                  f"\tlen[{i}] = meta->meta_page_size + "
                  f"(size_t)(meta->nr_subbufs{more}) * meta->subbuf_size;",
                  f"\taddr[{i}] = mmap(NULL, len[{i}], {prot}, {flags}, fd[{s.ref('fd')}], 0);",
                  "\tmunmap(a, page);",
                  f"\tgot = res(addr[{i}] != MAP_FAILED);",
                  f"\tif (addr[{i}] == MAP_FAILED) addr[{i}] = NULL;", "}"]
    return lines


MMAP = Op(
    "mmap", ("fd", "what", "prot", "share"), refs=("fd",),
    draw=_draw_mmap, pre=_has_fd, expect=_expect_mmap, apply=_apply_mmap, call=_call_mmap,
    py=_py_mmap, c=_c_mmap,
    simpler=lambda a: [dict(a, what="meta")] if a["what"] != "meta" else [],
    rule="read-only, shared, not executable: PROT_WRITE on an O_RDONLY fd EACCES (VFS), on an "
         "O_RDWR fd EPERM, PROT_EXEC and private EPERM; at most meta page + every sub-buffer "
         "(one more: EINVAL); on a sub-buffer boundary (page offset 1 with sub-buffers of 2 "
         "pages: EINVAL) (__rb_map_vma())")


def _call_mprotect(w: TraceWorld, sid: int, a: Args) -> str:
    import ctypes
    from probelib import errno_result, libc
    r = w.region(a["vma"])
    return errno_result(libc.mprotect(ctypes.c_void_p(r.addr), r.length,
                                      mmap.PROT_READ | mmap.PROT_WRITE) == 0)


MPROTECT = Op(
    "mprotect", ("vma",), refs=("vma",),
    draw=lambda m, rng: [(0.3, {"vma": f"@{s}"}) for s, _ in m.live_vmas()],
    pre=lambda m, a: m.vma(a["vma"]) is not None,
    expect=lambda m, a: frozenset({"EACCES"}), apply=lambda m, sid, a: None,
    call=_call_mprotect,
    py=lambda s: [f"got = res(libc.mprotect(*m[{s.ref('vma')}], 3) == 0)  # PROT_READ|WRITE"],
    c=lambda s: [f"got = res(mprotect(addr[{s.ref('vma')}], len[{s.ref('vma')}], "
                 "PROT_READ | PROT_WRITE) == 0);"],
    rule="mprotect(PROT_WRITE) on a mapping: EACCES (VM_MAYWRITE cleared, whatever the fd's "
         "mode) (__rb_map_vma())")


def _call_ioctl(w: TraceWorld, sid: int, a: Args) -> str:
    fcntl.ioctl(w.fd(a["fd"]), UNKNOWN_IOCTL)
    return "ok"


IOCTL = Op(
    "ioctl", ("fd",), refs=("fd",),
    draw=_per_fd(0.2),  # type: ignore[arg-type]
    pre=_has_fd, expect=lambda m, a: frozenset({"ENOTTY"}), apply=lambda m, sid, a: None,
    call=_call_ioctl,
    py=lambda s: [f"fcntl.ioctl(fd[{s.ref('fd')}], {UNKNOWN_IOCTL:#x})  # _IO('R', 0x21): "
                  "no such ioctl", "got = 'ok'"],
    c=lambda s: [f"got = res(ioctl(fd[{s.ref('fd')}], _IO('R', 0x21)) == 0);"
                 "\t/* no such ioctl */"],
    rule="an ioctl other than GET_READER (and 0, the wake-up): ENOTTY "
         "(tracing_buffers_ioctl())")


def _apply_get_reader(m: TraceModel, sid: int, a: Args) -> None:
    m.meta_fresh = m.cpu_of(a["fd"]) == 0
    m.took = ref_id(a["via"])
    if m.meta_fresh:
        # a swap after the loss carries RB_MISSED_EVENTS; the first GET_READER of a fresh
        # buffer swaps (its reader page is empty), a later one may not
        m.missed = m.wrapped() if not m.caught_up else (False if not m.wrapped() else None)
        m.caught_up = True
        if m.since is not None:
            m.since = 0


def _whole_cpu0(m: TraceModel) -> int | None:
    """A live mapping of all of CPU 0's buffer: where a reader reads the sub-buffers."""
    return next((s for s, v in m.live_vmas() if v.whole and v.cpu == 0), None)


def _draw_get_reader(m: TraceModel, rng: random.Random) -> list[tuple[float, Args]]:
    """3x once CPU 0's writer went round the ring: the swap that must carry RB_MISSED_EVENTS
    (mutant 040 went undrawn in 60 s at the flat weight). On CPU 0, the reader sub-buffer is
    read through a mapping of the whole buffer where there is one."""
    via = _whole_cpu0(m)
    return [(6 if m.fds[s] == 0 and m.wrapped() else 2,
             {"fd": f"@{s}", "via": f"@{via}" if m.fds[s] == 0 and via is not None else None})
            for s in m.fds]


def _pre_get_reader(m: TraceModel, a: Args) -> bool:
    if a["via"] is None:
        return _has_fd(m, a)
    v = m.vma(a["via"])
    return m.cpu_of(a["fd"]) == 0 and v is not None and v.whole and v.cpu == 0


def _call_get_reader(w: TraceWorld, sid: int, a: Args) -> str:
    if a["via"] is not None:
        w.tally.take(w.fd(a["fd"]), w.region(a["via"]).addr)
        return "ok"
    fcntl.ioctl(w.fd(a["fd"]), trace_abi.TRACE_MMAP_IOCTL_GET_READER)
    w.tally.forget(_stats(w))    # what it took, nobody saw
    return "ok"


def _py_get_reader(s: Step) -> list[str]:
    if s["via"] is not None:    # GET_READER, then the reader sub-buffer through `via`
        return [f"take(fd[{s.ref('fd')}], m[{s.ref('via')}][0])", "got = 'ok'"]
    return [f"fcntl.ioctl(fd[{s.ref('fd')}], GET_READER)", "got = 'ok'", "forget()"]


def _c_get_reader(s: Step) -> list[str]:
    if s["via"] is not None:    # GET_READER, then the reader sub-buffer through `via`
        return [f"got = tally_take(fd[{s.ref('fd')}], addr[{s.ref('via')}], &i);"]
    return [f"got = res(ioctl(fd[{s.ref('fd')}], TRACE_MMAP_IOCTL_GET_READER) == 0);",
            'if (!strcmp(got, "ok")) tally_forget();']


GET_READER = Op(
    "get-reader", ("fd", "via"), refs=("fd", "via"), defaults=(("via", None),),
    draw=_draw_get_reader,
    pre=_pre_get_reader,
    expect=lambda m, a: frozenset({"ok" if m.mapped(m.cpu_of(a["fd"])) else "ENODEV"}),
    apply=_apply_get_reader, call=_call_get_reader, py=_py_get_reader, c=_c_get_reader,
    simpler=lambda a: [dict(a, via=None)] if a["via"] is not None else [],
    rule="TRACE_MMAP_IOCTL_GET_READER: ENODEV on a CPU not mapped, else 0; then the meta "
         "page's entries counts every event written to the CPU, overrun is not 0 once the "
         "writer went round the ring, and a sub-buffer swapped in after events were lost has "
         "RB_MISSED_EVENTS in its commit (on a buffer no reader took from yet: after one did, "
         "GET_READER may take the rest of the writer's page without a swap); the reader "
         "sub-buffer, read through `via` from the reader.read the meta page said before the "
         "call, has the events after the last one taken "
         "(ring_buffer_map_get_reader(), rb_update_meta_page(), rb_get_reader_page())")


def _apply_drain(m: TraceModel, sid: int, a: Args) -> None:
    _apply_get_reader(m, sid, a)
    m.missed = False    # the last swap of a drain follows no loss: the first one said it


def _call_drain(w: TraceWorld, sid: int, a: Args) -> str:
    fd, addr = w.fd(a["fd"]), w.region(a["via"]).addr
    for _ in range(DRAIN_MAX):
        if not w.tally.take(fd, addr):
            break
    return "ok"


DRAIN = Op(
    "drain", ("fd", "via"), refs=("fd", "via"),
    draw=lambda m, rng: [(5, {"fd": f"@{s}", "via": f"@{v}"}) for s in m.fds
                         if m.fds[s] == 0 and (v := _whole_cpu0(m)) is not None],
    pre=lambda m, a: a["via"] is not None and _pre_get_reader(m, a),
    expect=lambda m, a: frozenset({"ok"}),
    apply=_apply_drain, call=_call_drain,
    py=lambda s: [f"for _ in range({DRAIN_MAX}):",
                  f"    if not take(fd[{s.ref('fd')}], m[{s.ref('via')}][0]):", "        break",
                  "got = 'ok'"],
    c=lambda s: [f"for (j = 0; j < {DRAIN_MAX}; j++) {{",
                 f"\tgot = tally_take(fd[{s.ref('fd')}], addr[{s.ref('via')}], &i);",
                 '\tif (strcmp(got, "ok") || !i)', "\t\tbreak;", "}"],
    rule="a reader that takes all there is through the mapping (libtracefs's loop): "
         "GET_READER, then the reader sub-buffer from where it stopped, until it shows "
         "nothing new; each event once, none skipped uncounted (the events check) "
         "(ring_buffer_map_get_reader(), rb_get_reader_page())")


def _expect_read(m: TraceModel, a: Args) -> frozenset[str]:
    # Nothing was ever written to the CPU (only CPU 0 gets the markers): trace_empty(), and
    # O_NONBLOCK makes that EAGAIN. Else the data, or EAGAIN once a reader (this one or the
    # mapping's GET_READER) took it all.
    if m.cpu_of(a["fd"]) != 0 or m.written == 0:
        return frozenset({"EAGAIN"})
    return frozenset({"ok", "EAGAIN"})


def _apply_read(m: TraceModel, sid: int, a: Args) -> None:
    m.took = ref_id(a["fd"])
    if m.mapped(m.cpu_of(a["fd"])):
        m.traits.add("read-while-mapped")
    if m.cpu_of(a["fd"]) == 0:
        m.caught_up = True
        if m.since is not None:
            m.since = 0     # its reader may have swapped: the loss is the read's to report


def _call_read(w: TraceWorld, sid: int, a: Args) -> str:
    data = os.read(w.fd(a["fd"]), READ_BYTES)
    w.tally.read(data)
    return "ok" if data else "eof"


def _draw_read(m: TraceModel, rng: random.Random) -> list[tuple[float, Args]]:
    """3x on CPU 0 while all of its buffer is mapped: read() and the mapping's reader taking
    turns on one ring (mutant 042: a swapped page shows only after the writer comes round
    to it and GET_READER reaches it)."""
    whole = _whole_cpu0(m) is not None
    return [(8 if whole and m.fds[s] == 0 else 1.5, {"fd": f"@{s}"}) for s in m.fds]


READ = Op(
    "read", ("fd",), refs=("fd",),
    draw=_draw_read,
    pre=_has_fd, expect=_expect_read, apply=_apply_read, call=_call_read,
    py=lambda s: [f"got = read_taking(fd[{s.ref('fd')}])"],
    c=lambda s: [f"got = tally_read(fd[{s.ref('fd')}]);"],
    rule="read() of trace_pipe_raw works while the CPU buffer is mapped (the page is copied, "
         "not swapped): EAGAIN (O_NONBLOCK) when nothing was written to the CPU, else its "
         "data or EAGAIN once consumed, never the end of file while the fd is open; the meta "
         "page still counts every event at the next GET_READER; the events it gives are the "
         "ones after the last one taken (tracing_buffers_read(), ring_buffer_read_page())")


def _apply_write(m: TraceModel, sid: int, a: Args) -> None:
    if m.written is not None:
        m.written += a["n"]
    if m.since is not None:
        m.since += a["n"]
        if m.overran is not None and m.wrapped():
            m.overran = True


def _write_counts(m: TraceModel) -> dict[int, int]:
    """Events a write draws, with weights. Going round the ring is 1000 (an 8 KiB ring of
    4 KiB sub-buffers) or, where that is not enough and the ring is small, just enough
    (events_to_wrap()); drawn 3x while a mapping of CPU 0's whole buffer is live: only such
    a mapping shows the sub-buffers' missed-events flag (mutant 040 went undrawn in 60 s)."""
    whole = any(v.whole and v.cpu == 0 for _, v in m.live_vmas())
    counts = dict(zip(WRITES, (3, 3, 3, 3 if whole else 1)))
    to_wrap = m.events_to_wrap()
    if WRITES[-1] < to_wrap <= WRAP_WRITE_MAX:
        counts[to_wrap] = 3 if whole else 1
    return counts


def _draw_write(m: TraceModel, rng: random.Random) -> list[tuple[float, Args]]:
    """2.5x while all of CPU 0's buffer is mapped: the writer going round under the readers."""
    counts = _write_counts(m)
    weight = 8 if _whole_cpu0(m) is not None else 2
    return [(weight, {"n": rng.choices(list(counts), list(counts.values()))[0]})]


def _call_write(w: TraceWorld, sid: int, a: Args) -> str:
    fd = os.open(f"{w.inst}/trace_marker", os.O_WRONLY)
    try:
        for _ in range(a["n"]):
            w.tally.marks += 1
            os.write(fd, MARKER.format(w.tally.marks).encode())
    finally:
        os.close(fd)
    return "ok"


WRITE = Op(
    "write", ("n",),
    draw=_draw_write,
    pre=lambda m, a: True, expect=lambda m, a: frozenset({"ok"}),
    apply=_apply_write, call=_call_write,
    py=lambda s: [f"for _ in range({s['n']}): got = write_mark()"],
    c=lambda s: [f'for (j = 0; j < {s["n"]}; j++) got = tally_write();'],
    simpler=lambda a: [{"n": n} for n in WRITES if n < a["n"]],
    rule="a trace_marker write is an event in CPU 0's buffer (the sequence runs on CPU 0), "
         "numbered: \"ringlab N\" for the N-th")


def _tracefs_op(name: str, param: str, choices: tuple[int, ...], weight: float,
                expect: object, rule: str) -> Op:
    """A write of the instance's file (buffer_size_kb, buffer_subbuf_size_kb, snapshot,
    buffer_percent)."""
    file = TRACEFS_FILE[name]

    def apply(m: TraceModel, sid: int, a: Args) -> None:
        # A new size reallocates the buffers, a snapshot swaps them: what CPU 0 counted is
        # no longer known here.
        v = a[param]
        if name == "subbuf" and v != m.subbuf_kb and m.written != 0:
            m.traits.add("subbuf-changed-with-events")
        if name == "resize" and v != m.buffer_kb or name == "subbuf" and v != m.subbuf_kb or \
                name == "snapshot" and v == 1:
            m.written = m.since = m.overran = None
        if name == "percent":
            m.percent = v
        if name == "resize":
            m.buffer_kb = v
        if name == "subbuf":
            m.subbuf_kb = v
    setting = {"snapshot": "has_snapshot", "subbuf": "has_subbuf"}.get(name)
    # A new size or a snapshot may drop the events there are, uncounted: the tally forgets
    # them. These are also the writes a mapping forbids.
    drops = name != "percent"

    def call(w: TraceWorld, sid: int, a: Args) -> str:
        got = _write(f"{w.inst}/{file}", a[param])
        if drops and got == "ok":
            w.tally.forget(_stats(w))
        return got
    def draw(m: TraceModel, rng: random.Random) -> list[tuple[float, Args]]:
        # 3x after a refused mapping with nothing mapped: a refusal must give back what the
        # mapping took (mutants 045, 048, 049: the snapshot or the resize stays refused)
        lean = 3 if drops and m.refused and not m.mapped() else 1
        return [(weight * lean, {param: rng.choice(choices)})]
    return Op(
        name, (param,),
        draw=draw,
        pre=lambda m, a: setting is None or bool(m.setup.get(setting, False)),
        expect=expect,  # type: ignore[arg-type]
        apply=apply,
        call=call,
        py=lambda s: [f"got = write({file!r}, {s[param]})"] +
        (["if got == 'ok': forget()"] if drops else []),
        c=lambda s: [f'got = tw("{file}", "{s[param]}\\n");'] +
        (['if (!strcmp(got, "ok")) tally_forget();'] if drops else []),
        rule=rule)


RESIZE = _tracefs_op(
    "resize", "kb", BUFFER_KB, 1,
    lambda m, a: frozenset({"EBUSY" if m.mapped() else "ok"}),
    "buffer_size_kb while any CPU buffer of the instance is mapped: EBUSY "
    "(ring_buffer_resize())")
SUBBUF = _tracefs_op(
    "subbuf", "kb", SUBBUF_KB, 0.7,
    lambda m, a: frozenset({"ok" if a["kb"] == m.subbuf_kb or not m.mapped() else "EBUSY"}),
    "a new buffer_subbuf_size_kb while mapped: EBUSY (the size in use: 0) "
    "(ring_buffer_subbuf_order_set())")
PERCENT = _tracefs_op(
    "percent", "value", (0, 50, 100, 101), 0.7,
    lambda m, a: frozenset({"EINVAL" if a["value"] > 100 else "ok"}),
    "buffer_percent: 0 to 100, else EINVAL; what a poll() of trace_pipe_raw waits for "
    "(buffer_percent_write())")


def _expect_poll(m: TraceModel, a: Args) -> frozenset[str]:
    """A CPU nothing was written to is empty: not readable whatever buffer_percent says; with
    buffer_percent 0, events written since the reader last swapped make it readable; else
    it depends on how many pages are dirty, which the model does not count."""
    if m.cpu_of(a["fd"]) != 0 or m.written == 0:
        return frozenset({"none"})
    if m.percent == 0 and m.since:
        return frozenset({"in"})
    return frozenset({"in", "none"})


POLL = Op(
    "poll", ("fd",), refs=("fd",), answers=("in", "none"),
    draw=_per_fd(1),  # type: ignore[arg-type]
    pre=_has_fd, expect=_expect_poll, apply=lambda m, sid, a: None,
    call=lambda w, sid, a: polled(w.fd(a["fd"])),
    py=lambda s: ["p = select.poll()", f"p.register(fd[{s.ref('fd')}], select.POLLIN)",
                  f"ev = dict(p.poll(0)).get(fd[{s.ref('fd')}], 0)",
                  "got = 'in' if ev & select.POLLIN else 'none' if not ev else f'events {ev:#x}'"],
    c=lambda s: [f"got = polled(fd[{s.ref('fd')}]);"],
    rule="poll() of trace_pipe_raw without waiting: not readable on a CPU nothing was "
         "written to; with buffer_percent 0, readable while events written since the reader "
         "last swapped are there (trace_poll(), ring_buffer_poll_wait(), rb_watermark_hit())")

SNAPSHOT = _tracefs_op(
    "snapshot", "value", (1, 0), 0.7,
    lambda m, a: frozenset({"EBUSY" if m.mapped() and a["value"] == 1 else "ok"}),
    "echo 1 > snapshot while mapped: EBUSY (tracing_arm_snapshot_locked())")


def _rmdir(inst: str) -> str:
    """rmdir of the instance as a result: "ok" or the errno's name."""
    import probelib
    try:
        os.rmdir(inst)
        return "ok"
    except OSError as e:
        return probelib.errname(e)


def _call_rmdir(w: TraceWorld, sid: int, a: Args) -> str:
    return _rmdir(w.inst)


# A snapshot trigger that never fires (no task has a negative pid): it arms the instance's
# snapshot (tr->snapshot) as long as it is registered, which is what a mapping must not meet.
TRIGGER_FILE = "events/sched/sched_switch/trigger"
TRIGGER = {"arm": "snapshot if prev_pid < 0", "disarm": "!snapshot"}


def _expect_trigger(m: TraceModel, a: Args) -> frozenset[str]:
    """Arming: EBUSY while mapped (tracing_arm_snapshot_locked(): tr->mapped), else EEXIST when
    one is registered (register_trigger(): one trigger of a type per event); disarming:
    always 0, registered or not (event_trigger_parse(): a removal returns 0)."""
    if a["action"] == "disarm":
        return frozenset({"ok"})
    return frozenset({"EBUSY" if m.mapped() else "EEXIST" if m.armed else "ok"})


def _apply_trigger(m: TraceModel, sid: int, a: Args) -> None:
    m.armed = a["action"] == "arm"


def _draw_trigger(m: TraceModel, rng: random.Random) -> list[tuple[float, Args]]:
    """Mostly the change of state: arming when not armed, disarming when armed."""
    want = "disarm" if m.armed else "arm"
    return [(0.8, {"action": want}), (0.15, {"action": "arm" if m.armed else "disarm"})]


def _call_trigger(w: TraceWorld, sid: int, a: Args) -> str:
    return _write(f"{w.inst}/{TRIGGER_FILE}", TRIGGER[a["action"]])


TRIGGER_OP = Op(
    "trigger", ("action",),
    draw=_draw_trigger,
    pre=lambda m, a: a["action"] in TRIGGER and bool(m.setup.get("has_trigger", False)),
    expect=_expect_trigger, apply=_apply_trigger, call=_call_trigger,
    py=lambda s: [f"got = write({TRIGGER_FILE!r}, {TRIGGER[s['action']]!r})"],
    c=lambda s: [f'got = tw("{TRIGGER_FILE}", "{TRIGGER[s["action"]]}\\n");'],
    simpler=lambda a: [],
    rule="a snapshot trigger (sched_switch's `snapshot if ...`) arms the instance's snapshot: "
         "refused while mapped (EBUSY), and while armed every mmap() of its buffers is EBUSY "
         "(tracing_arm_snapshot_locked(), get_snapshot_map(); map_test.c snapshot); "
         "one per event (EEXIST); `!snapshot` removes it, 0 whether or not there was one")


# The boot-time instances the explorer's guest is booted with (persistent_cmdline()): a buffer
# on memory at a fixed address, and (7.x) a backup copy of one on reserve_mem= memory.
PERSISTENT = {"fixed": "ringlab_x_fixed", "copy": "ringlab_x_copy"}


def persistent_cmdline(fixed_ram: str) -> str:
    """The kernel command line that makes PERSISTENT's instances, tracing off; `fixed_ram` is
    memmap='s SIZE$ADDR of RAM the kernel leaves alone (harness/arch.py); "" where the arch
    has no memmap=: none then."""
    if not fixed_ram:
        return ""
    size, addr = fixed_ram.split("$")
    return (f"memmap={fixed_ram} trace_instance={PERSISTENT['fixed']}^traceoff@{addr}:{size} "
            f"reserve_mem=4M:4096:ringlab_x trace_instance=ringlab_x_boot^traceoff@ringlab_x "
            f"trace_instance={PERSISTENT['copy']}=ringlab_x_boot")


def _call_persistent(w: TraceWorld, sid: int, a: Args) -> str:
    import tracefs
    fd = os.open(f"{tracefs.find_root()}/instances/{PERSISTENT[a['which']]}/per_cpu/cpu0/"
                 "trace_pipe_raw", os.O_RDONLY)
    try:
        import ctypes
        from probelib import libc
        libc.munmap(ctypes.c_void_p(_map(fd, w.page, mmap.PROT_READ, mmap.MAP_SHARED)), w.page)
        return "ok"
    finally:
        os.close(fd)


def _py_persistent(s: Step) -> list[str]:
    name = PERSISTENT[s["which"]]
    return [f"p = f'{{root}}/instances/{name}/per_cpu/cpu0/trace_pipe_raw'",
            "if not os.path.exists(p):",
            f"    print('# no instance {name}: boot with {persistent_cmdline('4M$0x30000000')}')",
            "f_ = os.open(p, os.O_RDONLY)",
            "addr = libc.mmap(None, PAGE, 1, 1, f_, 0)",
            "got = res(mapping(addr))",
            "if got == 'ok': libc.munmap(addr, PAGE)",
            "os.close(f_)"]


PERSISTENT_OP = Op(
    "persistent", ("which",),
    draw=lambda m, rng: [(0.3, {"which": w}) for w in PERSISTENT if m.setup.get(f"has_{w}")],
    pre=lambda m, a: a["which"] in PERSISTENT and bool(m.setup.get(f"has_{a['which']}")),
    expect=lambda m, a: frozenset({"ENODEV"}), apply=lambda m, sid, a: None,
    call=_call_persistent, py=_py_persistent,
    c=lambda s: [f'got = map_persistent("{PERSISTENT[s["which"]]}", '
                 f'"{persistent_cmdline("4M$0x30000000")}");'],
    rule="mmap() of a boot-time persistent buffer user space may not map: ENODEV for one at "
         "a fixed address (memmap=, TRACE_ARRAY_FL_MEMMAP; 6.12: every boot-mapped buffer, "
         "TRACE_ARRAY_FL_BOOT) and for a backup copy (TRACE_ARRAY_FL_VMALLOC, 7.x) "
         "(tracing_buffers_mmap(); mutant 055)")


RMDIR = Op(
    "rmdir", (),
    draw=lambda m, rng: [(0.3, {})],
    pre=lambda m, a: bool(m.fds or m.live_vmas()),  # the instance stays: the sequence goes on
    expect=lambda m, a: frozenset({"EBUSY"}), apply=lambda m, sid, a: None,
    call=_call_rmdir,
    py=lambda s: ["os.rmdir(inst)", "got = 'ok'"],
    c=lambda s: ["got = res(rmdir(inst) == 0);"],
    rule="rmdir of the instance while a trace_pipe_raw of it is open or mapped (a mapping "
         "holds its file): EBUSY (__remove_instance(): tr->ref, tr->trace_ref)")


# A consumer's opening: CPU 0's trace_pipe_raw, and all of its buffer mapped.
OPENING = ({"op": "open", "args": {"cpu": 0, "mode": "r"}},
           {"op": "mmap", "args": {"fd": "@0", "what": "all", "prot": "r", "share": "shared"}})

OPS = table(OPEN, CLOSE, MMAP, MPROTECT, IOCTL, GET_READER, DRAIN, READ, WRITE, RESIZE,
            SUBBUF, SNAPSHOT, PERCENT, POLL, TRIGGER_OP, PERSISTENT_OP, RMDIR)
TraceModel.OPS = OPS


# --- the calls --------------------------------------------------------------------------------

class TraceWorld(World):
    """The calls of TraceModel's operations, as root, in the sequence's own instance."""
    OPS = OPS
    C_SUPPORT = "trace.h"
    # A reader and a writer going round the ring with read() between (mutant 042: about 8
    # steps after the opening) fit 1 sequence in 80 of 20 steps, 1 in 430 of 12 (the
    # model alone, 3000 sequences).
    MAX_STEPS = 20

    @staticmethod
    def model(path: str, setup: dict) -> TraceModel:
        return TraceModel(path, setup)

    @staticmethod
    def missing(path: str) -> str | None:
        import tracefs
        root = tracefs.find_root()
        if root is None:
            return "no tracefs mounted (CONFIG_TRACING)"
        if not os.path.isdir(f"{root}/instances"):
            return f"{root} has no instances/"
        return None

    @staticmethod
    def setup(path: str, rng: random.Random) -> dict:
        return {"buffer_kb": rng.choice(BUFFER_KB), "subbuf_kb": rng.choice(SUBBUF_KB)}

    @staticmethod
    @contextmanager
    def prepared(path: str, setup: dict) -> Iterator[dict]:
        """A fresh instance with the sequence's buffer and sub-buffer sizes; removed after
        (unless the sequence's own end check removed it, or could not)."""
        import tracefs
        root = tracefs.find_root()
        name = f"ringlab-x-{os.getpid()}-{random.getrandbits(32):08x}"
        inst = f"{root}/instances/{name}"
        os.mkdir(inst)
        try:
            _write(f"{inst}/buffer_size_kb", setup["buffer_kb"])
            sub = f"{inst}/buffer_subbuf_size_kb"
            if os.path.exists(sub):
                _write(sub, setup["subbuf_kb"])
            yield {"instance": inst, "ncpus": os.sysconf("SC_NPROCESSORS_ONLN"),
                   "page_size": os.sysconf("SC_PAGE_SIZE"),
                   "has_snapshot": os.path.exists(f"{inst}/snapshot"),
                   "has_trigger": os.path.exists(f"{inst}/snapshot") and
                   os.path.exists(f"{inst}/{TRIGGER_FILE}"),
                   **{f"has_{w}": os.path.isdir(f"{root}/instances/{name}")
                      for w, name in PERSISTENT.items()},
                   "has_subbuf": os.path.exists(sub), **mapping_env()}
        finally:
            if os.path.isdir(inst):
                try:
                    os.rmdir(inst)
                except OSError:
                    pass    # the sequence's end check failed on it; the instance stays

    def __init__(self, path: str, setup: dict, uid: int) -> None:
        super().__init__()
        self.cfg, self.inst = setup, setup["instance"]
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.tally = Tally()
        os.sched_setaffinity(0, {0})

    def observe(self, expected: dict) -> dict:
        import ctypes
        out = {}
        for key, want in expected.items():
            kind, _, sid = key.partition("@")
            if kind == "tracefs":   # the instance's files, read back
                out[key] = {name: _read_int(f"{self.inst}/{name}") for name in want}
                continue
            if kind == "events":    # what the readers took so far
                import tracefs
                t = self.tally
                out[key] = {"twice": t.twice,
                            "unaccounted": t.unaccounted(tracefs.cpu_stats(self.inst, 0))}
                if out[key] != want:
                    out[key].update(written=t.marks, last=t.last, missing=t.missing,
                                    forgot=t.forgot)
                continue
            addr = self.vmas[int(sid)].addr
            meta = trace_abi.TraceBufferMeta.from_address(addr)
            if kind == "meta":
                out[key] = {k: meta.overrun > 0 if k == "overran" else getattr(meta, k)
                            for k in want}
                continue
            at = addr + meta.meta_page_size + meta.reader_id * meta.subbuf_size
            raw = ctypes.c_uint64.from_address(at + COMMIT_OFFSET).value
            # the flags are int constants local_add()ed to a long: RB_MISSED_EVENTS sets
            # the upper half too, so the size is the low bits (libtraceevent's COMMIT_MASK)
            commit = raw & COMMIT_MASK
            out[key] = {"reader_commit_is_read": commit == meta.reader_read}
            if "missed" in want:
                out[key]["missed"] = bool(raw & RB_MISSED_EVENTS)
            if commit != meta.reader_read:
                out[key].update(reader_id=meta.reader_id, commit=commit,
                                reader_read=meta.reader_read)
        return out

    @staticmethod
    def py_check(kind: str, sid: int, want: dict) -> list[str]:
        if kind == "tracefs":
            return [f"check('{kind}@{sid}', lambda: observe_tracefs({sorted(want)!r}), "
                    f"{want!r})"]
        if kind == "events":
            return [f"check('{kind}@{sid}', observe_events, {want!r})"]
        return [f"check('{kind}@{sid}', lambda: observe_{kind}(m[{sid}][0]), {want!r})"]

    @staticmethod
    def c_check(kind: str, sid: int, want: dict) -> list[str]:
        if kind == "tracefs":
            return ["check_begin();"] + [f'want("{k}", tr_read_int("{k}"), {int(v)});'
                                         for k, v in want.items()] + \
                [f'check_end("{kind}@{sid}");']
        if kind == "events":
            got = {"twice": "tally.twice", "unaccounted": "tally_unaccounted()"}
            return ["check_begin();"] + [f'want("{k}", {got[k]}, {int(v)});'
                                         for k, v in want.items()] + \
                [f'check_end("{kind}@{sid}");']
        lines = [f"if (!addr[{sid}]) {{", f'\tresult(0, "{kind}@{sid}: no such mapping");',
                 "} else {", f"\tstruct trace_buffer_meta *mp = (void *)addr[{sid}];",
                 # the sub-buffer's commit only where the mapping has it (all of the buffer)
                 "\tunsigned long long c = " +
                 (f"reader_commit(addr[{sid}]);" if kind == "subbuf" else "0;"),
                 "", "\tcheck_begin();"]
        fields = {"overran": "mp->overrun > 0",
                  "reader_commit_is_read": "(c & COMMIT_MASK) == mp->reader.read",
                  "missed": "!!(c & RB_MISSED_EVENTS)"}
        if kind not in ("meta", "subbuf"):
            raise NotImplementedError(kind)
        lines += [f'\twant("{k}", {fields.get(k, "mp->" + k)}, {int(v)});'
                  for k, v in want.items()]
        return lines + [f'\tcheck_end("{kind}@{sid}");', "\t(void)c;", "}"]

    def end(self, expected: dict) -> dict:
        resize = _write(f"{self.inst}/buffer_size_kb", self.cfg["buffer_kb"] + 4)
        return {"resize": resize, "rmdir": _rmdir(self.inst)}


PATHS = {"trace-mmap": TraceWorld}


def _stats(w: TraceWorld) -> dict[str, str]:
    import tracefs
    return tracefs.cpu_stats(w.inst, 0)


def _write(path: str, value: object) -> str:
    """`echo value > path`: 'ok' or the errno's name (tracefs.write_file)."""
    import tracefs
    return tracefs.write_file(path, f"{value}\n")


def _read_int(path: str) -> int:
    """The number a tracefs file holds (`cat path`)."""
    import tracefs
    return int(tracefs.read_file(path).split()[0])
