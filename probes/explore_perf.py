"""The perf paths for probe_explore.py: perf-ring, perf-aux and pinning share one model of perf
events, their ring buffers, the AUX area and what mapping them charges.

PerfModel is pure (no system calls; unit tested on the host): it chooses the next operation,
says which results the ABI allows for it, and what VmPin and each ring must show after it.
PerfWorld makes the calls. The rules, from include/uapi/linux/perf_event.h and
kernel/events/core.c perf_mmap(), perf_mmap_rb(), perf_mmap_aux(), perf_mmap_close(),
perf_mmap_may_split(), kernel/events/ring_buffer.c __perf_output_begin():
- the data buffer is 1 + 2^n pages (or 1): else EINVAL; MAP_PRIVATE: EINVAL;
- a buffer already mapped is mapped again at the same size only (else EINVAL), and that
  mapping only takes a reference: charged once, given back once at the last munmap of any
  mapping of it (data or AUX);
- the charge: pages up to perf_event_mlock_kb x CPUs go to the user's perf_mlock, the rest
  to this mm's pinned_vm (VmPin), refused (EPERM) past RLIMIT_MEMLOCK without CAP_IPC_LOCK;
- the AUX area: 2^n pages at aux_offset past the data buffer, charged as a data buffer, the
  second mapping again a reference; a PMU without one refuses it (EOPNOTSUPP) after the
  charge check;
- a mapping is VM_DONTCOPY: a child of fork() has it only after MADV_DOFORK (7.x refuses
  that: EINVAL on its VM_PFNMAP mapping);
- no split (munmap of a part, mremap shrink: EINVAL, b024d7b56c77), no growth (EFAULT,
  VM_DONTEXPAND), no MREMAP_DONTUNMAP (EINVAL); a move keeps the buffer and its charge;
- a writable first mapping makes a ring that stops at data_tail (a sample that does not fit
  is lost, and a PERF_RECORD_LOST with the count precedes the next one that fits); a
  read-only one overwrites; 1 page (no data pages) records nothing;
- the control page says where the data is: data_offset one page, data_size the data pages
  (perf_event_init_userpage()); of a mapping, only a writable data mapping's control page
  takes a store (perf_mmap_pfn_mkwrite(), 6.12's perf_mmap_fault(): SIGBUS on any other
  page; a read-only mapping has no VM_WRITE): a store the kernel makes for us (read() from
  /dev/zero into the page) is 1 byte or EFAULT, never a signal in the sequence;
- PERF_EVENT_IOC_PAUSE_OUTPUT (rb_toggle_paused()): EINVAL for an event with no buffer or
  one of no data pages; while paused a sample is not written but counted lost, and the next
  sample written after the resume is preceded by its PERF_RECORD_LOST (in an overwriting
  ring too).
Stdlib only.
"""
from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import random
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import perf_abi
from explore_ops import (Args, Model, Op, Region, Step, World, close_forms, mapping_env, polled,
                         ref_id, table)

SAMPLE = 32                   # the probes' sample: header + IDENTIFIER, TID, TIME
LOST_RECORD = 24              # PERF_RECORD_LOST: header, id, lost (no sample_id_all)
SIZES = (1, 2, 3, 5, 9, 4, 6)  # pages of a data mapping: 1 + 2^n, and two that are not
AUX_SIZES = (1, 2, 4, 3)
# Where an AUX area goes, against the end E of the data mapping (control page + data): its
# aux_offset and the offset it is mapped at, as (pages, bytes) past E. Only "after" and "gap"
# are where perf_mmap_aux() lets it be (past the data, page aligned, at the offset it names).
# "overlap" only over data pages (with none, offset 0 is a mapping of the data buffer).
AUX_PLACES = {"after": ((0, 0), (0, 0)), "overlap": ((-1, 0), (-1, 0)),
              "gap": ((1, 0), (1, 0)), "unaligned": ((0, 512), (0, 0))}
AUX_WHERE = ("after",) * 6 + ("overlap", "gap", "unaligned")
FIRES = (1, 4, 20, 150)
WAKEUPS = (0, 0, 0, 256, 1000, 3000)   # wakeup_watermark bytes of a tracepoint event
TEST_PMU = "ringlab_aux"   # the lab's AUX-capable PMU (kernels/modules/ringlab_aux)
TEST_PMU_KO = f"/tmp/{TEST_PMU}.ko"     # where the host's Guest.insmod() left it
# The test PMU's AUX writes (kernels/modules/ringlab_aux): chunk bytes and a budget of chunks
# (attr.config bits 0-23 and 40-55; a budget of 0 never stops, which `aux-run` cannot wait for).
PMU_CHUNKS = (1024, 3000)
PMU_BUDGETS = (0, 2, 4, 8)
PMU_BUDGET_SHIFT = 40
AUX_FLAG_TRUNCATED, AUX_FLAG_OVERWRITE = 0x01, 0x02
AUX_RUN_S = 5.0             # how long aux-run waits for the PMU's chunks (TCG, loaded host)
NO_OUTPUT = (1 << 64) - 1   # SET_OUTPUT's -1, as the unsigned long perf_ioctl() takes
POKE_OFFSET = 512            # in perf_event_mmap_page's __reserved: a store there is harmless
AUX_OFFSET = perf_abi.PerfEventMmapPage.aux_offset.offset
DATA_HEAD = perf_abi.PerfEventMmapPage.data_head.offset
DATA_TAIL = perf_abi.PerfEventMmapPage.data_tail.offset

# Each path: which events it opens, the settings a sequence draws from, the ops it favours.
PRESETS: dict[str, dict[str, Any]] = {
    "perf-ring": {"kinds": ("tp", "tp", "dummy"), "mlock_pages": (129,), "rlimit_pages": (0,),
                  "who": ("user",), "aux": 0},
    "pinning": {"kinds": ("dummy", "dummy", "pmu"), "mlock_pages": (2, 3, 5, 9, 17),
                "rlimit_pages": (0, 1, 3, 8), "who": ("user", "user", "user+ipc_lock"),
                "aux": 1},
    "perf-aux": {"kinds": ("pmu", "pmu", "dummy"), "mlock_pages": (5, 9, 17, 33),
                 "rlimit_pages": (0, 8), "who": ("user",), "aux": 3},
}


def pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


@dataclass
class Rb:
    pages: int                # of the data mapping, control page included
    overwrite: bool
    page_size: int
    maps: int = 0             # rb->mmap_count: live mappings of it, data and AUX
    locked: int = 0           # pages of the user's perf_mlock it holds
    pinned: int = 0           # rb->mmap_locked: pages of pinned_vm it holds
    aux_pages: int = 0
    aux_maps: int = 0
    aux_locked: int = 0
    aux_pinned: int = 0
    aux_offset: int = 0       # rb->aux_pgoff, in bytes
    aux_overwrite: bool = False   # rb->aux_overwrite: the first AUX mapping was read-only
    aux_head: int = 0         # what the test PMU wrote into the AUX area (aux_tail stays 0)
    aux_wakeup: int = 0       # rb->aux_wakeup: aux_head rounded down at the last AUX wake-up
    aux_records: list = field(default_factory=list)   # [size, flags] of each non-empty one
    aux_fresh: bool = False   # an aux-run was the last step: check what it wrote
    records_unknown: bool = False   # records of the PMU's: the ring's own count is not known
    head: int = 0
    tail: int = 0
    lost: int = 0             # rb->lost: samples dropped, not yet reported
    samples: int = 0          # SAMPLE records in [tail, head)
    paused: bool = False      # rb->paused (PERF_EVENT_IOC_PAUSE_OUTPUT): a sample is lost
    lost_reported: int = 0    # sum of PERF_RECORD_LOST counts in [tail, head)
    watermark: int = 0        # rb->watermark: wakeup_watermark, or half the data (0: unset)
    wakeup: int = 0           # rb->wakeup: where the last wake-up was counted from
    poll: bool = False        # rb->poll: EPOLLIN set by a wake-up, taken by the next poll()

    def __post_init__(self) -> None:
        # ring_buffer_init(): min(max_size, wakeup_watermark), else max_size / 2
        self.watermark = min(self.data_size, self.watermark) or self.data_size // 2

    @property
    def data_size(self) -> int:
        return (self.pages - 1) * self.page_size

    def write(self) -> None:
        """One sample, as __perf_output_begin() places it."""
        if self.pages == 1:           # rb->paused: no data pages, nothing written or lost
            return
        if self.paused:               # PAUSE_OUTPUT: counted lost, reported by the next one
            self.lost += 1
            return
        if self.overwrite:            # no space check: the sample, and the LOST record first
            self.advance(SAMPLE + (LOST_RECORD if self.lost else 0))
            self.lost = 0
            return
        need = SAMPLE + (LOST_RECORD if self.lost else 0)
        if self.data_size - (self.head - self.tail) - 1 >= need:   # CIRC_SPACE >= size
            self.advance(need)
            self.samples += 1
            self.lost_reported += self.lost
            self.lost = 0
        else:
            self.lost += 1            # a lost sample wakes nobody (perf_output_put_handle())

    def advance(self, size: int) -> None:
        """A record written: past the watermark since the last wake-up, a wake-up
        (__perf_output_begin() adds one watermark to rb->wakeup; perf_output_put_handle()
        sees it moved and perf_output_wakeup() sets rb->poll)."""
        self.head += size
        if self.head - self.wakeup > self.watermark:
            self.wakeup += self.watermark
            self.poll = True


@dataclass
class Event:
    kind: str                 # dummy (software), tp (getppid tracepoint), pmu (ringlab_aux)
    fd_open: bool = True
    rb: int | None = None     # the id of its ring buffer
    wakeup: int = 0           # attr.wakeup_watermark in bytes (attr.watermark set); 0: unset
    redirected: bool = False  # its rb is another event's (PERF_EVENT_IOC_SET_OUTPUT)
    chunk: int = 4096         # test PMU: bytes a chunk
    budget: int = 0           # test PMU: chunks it writes at the most (0: no end)
    ran: bool = False         # test PMU: aux-run done (its budget is the kernel's to count)
    revoked: bool = False     # test PMU: unregistered under it (PERF_EVENT_STATE_REVOKED)


@dataclass
class Vma:
    event: int
    rb: int
    kind: str                 # data or aux
    pages: int
    writable: bool
    copies_on_fork: bool = False
    live: bool = True

    @property
    def splittable(self) -> bool:
        return self.pages > 1


@dataclass
class PerfModel(Model):
    """What the ABI says after each step. Objects are named by the id of the step that made
    them ("@3" in a later step's arguments)."""
    path: str
    setup: dict
    events: dict[int, Event] = field(default_factory=dict)
    rbs: dict[int, Rb] = field(default_factory=dict)
    vmas: dict[int, Vma] = field(default_factory=dict)
    perf_mlock: int = 0       # the sequence's own user: it starts at 0
    pinned: int = 0
    revoked: bool = False     # the test PMU was unregistered (`revoke`): its type is gone
    traits: set[str] = field(default_factory=set)   # what the sequence did, for known issues

    @property
    def page(self) -> int:
        return self.setup["page_size"]

    @property
    def limit(self) -> int:
        """perf_event_mlock_kb x online CPUs, in pages (perf_mmap_calc_limits())."""
        return self.setup["mlock_kb"] // (self.page // 1024) * self.setup["ncpus"]

    # --- references ---
    def event(self, ref: object) -> Event | None:
        i = ref_id(ref)
        return self.events.get(i) if i is not None else None

    def open_event(self, ref: object) -> Event | None:
        e = self.event(ref)
        return e if e is not None and e.fd_open else None

    def ev(self, ref: object) -> Event:
        """The event a valid step names."""
        e = self.event(ref)
        assert e is not None, ref
        return e

    def rb(self, e: Event) -> Rb:
        assert e.rb is not None, e
        return self.rbs[e.rb]

    def vma(self, ref: object) -> Vma | None:
        i = ref_id(ref)
        v = self.vmas.get(i) if i is not None else None
        return v if v is not None and v.live else None

    def vm(self, ref: object) -> Vma:
        v = self.vma(ref)
        assert v is not None, ref
        return v

    def open_files(self) -> int:
        return sum(e.fd_open for e in self.events.values())

    def live_vmas(self) -> list[tuple[int, Vma]]:
        return [(s, v) for s, v in self.vmas.items() if v.live]

    def own_maps(self, ref: object) -> int:
        """event->mmap_count: the live mappings made through this event's own fd."""
        return sum(v.live and v.event == ref_id(ref) for v in self.vmas.values())

    def mappable(self, ref: object) -> bool:
        """Open, and not redirected: mapping an event whose output went to another event's
        buffer differs by kernel (6.12: a reference, uncharged; 6.18: a WARN; d06bf78e55d5:
        EBUSY), so the model does not draw it."""
        e = self.open_event(ref)
        return e is not None and not e.redirected

    def open_events(self) -> list[int]:
        return [s for s, e in self.events.items() if e.fd_open]

    def rw_data_vma(self, rb: int | None) -> int | None:
        for sid, v in sorted(self.vmas.items()):
            if v.live and v.rb == rb and v.kind == "data" and v.writable:
                return sid
        return None

    # --- the rules ---
    def charge(self, pages: int) -> tuple[bool, int, int]:
        """(allowed, pages to perf_mlock, pages to pinned_vm): perf_mmap_calc_limits()."""
        user_locked = min(self.perf_mlock, self.limit) + pages
        extra = max(0, user_locked - self.limit)
        exempt = self.setup["who"] == "user+ipc_lock"
        allowed = self.pinned + extra <= self.setup["rlimit_pages"] or exempt
        return allowed, pages - extra, extra

    def overflows(self) -> tuple[int, ...]:
        """Sample counts that just overflow a writable tracepoint ring (its free space and a
        few more): the lost-record rules only show past a full ring, which the fixed counts
        reach for the smallest ring only."""
        out = []
        for rid, rb in self.rbs.items():
            if not rb.overwrite and rb.pages > 1 and any(
                    e.rb == rid and e.kind == "tp" for e in self.events.values()):
                free = (rb.data_size - (rb.head - rb.tail)) // SAMPLE
                out.append(max(1, free) + 3)
        return tuple(out)

    def wakes(self) -> tuple[int, ...]:
        """Sample counts that just take a tracepoint ring past its next wake-up (the watermark
        past rb->wakeup): the poll rules only show there, which the fixed counts seldom hit."""
        out = []
        for rid, rb in self.rbs.items():
            if rb.pages > 1 and not rb.paused and any(
                    e.rb == rid and e.kind == "tp" for e in self.events.values()):
                out.append(max(1, (rb.wakeup + rb.watermark - rb.head) // SAMPLE + 1))
        return tuple(out)

    def unmap(self, sid: int) -> None:
        """perf_mmap_close(): the AUX charge back at the last AUX munmap, the buffer's at the
        last munmap of any of its mappings, by the user and mm that were charged."""
        v = self.vmas[sid]
        v.live = False
        rb = self.rbs[v.rb]
        if v.kind == "aux":
            rb.aux_maps -= 1
            if rb.aux_maps == 0:
                self.perf_mlock -= rb.aux_locked
                self.pinned -= rb.aux_pinned
                rb.aux_pages = rb.aux_locked = rb.aux_pinned = 0
                rb.aux_overwrite = False
        rb.maps -= 1
        if rb.maps == 0:
            self.perf_mlock -= rb.locked
            self.pinned -= rb.pinned
            for e in self.events.values():    # every event on rb->event_list detached
                if e.rb == v.rb:
                    e.rb, e.redirected = None, False
            del self.rbs[v.rb]
        self.drop_dead_events()

    def drop_dead_events(self) -> None:
        """An event lives while its fd is open or a mapping holds its file."""
        held = {v.event for v in self.vmas.values() if v.live}
        for sid in [s for s, e in self.events.items() if not e.fd_open and s not in held]:
            del self.events[sid]

    def observe(self) -> dict:
        """VmPin, and for each ring of a tracepoint event one of its mappings shows: where the
        head is, and for a ring that stops, the samples and the lost count in [tail, head)."""
        out: dict = {"vm_pin_kb": self.pinned * self.page // 1024}
        for rid, rb in sorted(self.rbs.items()):
            data = [s for s, v in self.vmas.items() if v.live and v.rb == rid
                    and v.kind == "data"]
            if not data:
                continue
            sid = min(data)
            out[f"ctl@{sid}"] = {"data_offset": self.page,
                                 "data_size": (rb.pages - 1) * self.page}
            aux = [s for s, v in self.vmas.items() if v.live and v.rb == rid and v.kind == "aux"]
            if rb.aux_fresh and aux:
                out[f"aux@{sid}"] = {"aux_vma": min(aux), "aux_head": rb.aux_head,
                                     "records": rb.aux_records, "data_ok": True}
            if rb.records_unknown or not any(e.rb == rid and e.kind == "tp"
                                             for e in self.events.values()):
                continue
            out[f"ring@{sid}"] = ({"head": rb.head} if rb.overwrite else
                                 {"head": rb.head, "samples": rb.samples,
                                  "lost": rb.lost_reported})
        return out

    def apply(self, step: dict, result: str) -> None:
        for rb in self.rbs.values():
            rb.aux_fresh = False    # only the step right after aux-run checks what it wrote
        super().apply(step, result)

    def release(self) -> None:
        for sid in sorted(s for s, v in self.vmas.items() if v.live):
            self.unmap(sid)
        for e in self.events.values():
            e.fd_open = False
        self.drop_dead_events()

    def end(self) -> dict:
        """Everything undone: nothing pinned, and the user's whole allowance maps again
        without pinning a page (what the sequence charged all came back); with the test PMU,
        its module holds no reference more than before: an event holds one from
        perf_init_event() to __free_event(), a mapping only keeps the event (mutant 058)."""
        out: dict = {"vm_pin_kb": 0, "allowance": "ok"}
        if self.setup.get("has_pmu"):
            out["pmu_refs"] = 0
        return out


# --- the operations: each one's draw, rule, model update, call and reproducer forms --------

def _kinds(m: PerfModel) -> list[str]:
    kinds = [k for k in PRESETS[m.path]["kinds"] if k != "pmu" or m.setup["has_pmu"]]
    return [k for k in kinds if k != "tp" or m.setup["has_tp"]] or ["dummy"]


def _apply_open(m: PerfModel, sid: int, a: Args) -> None:
    m.events[sid] = e = Event(a["kind"], wakeup=a["wakeup"], chunk=a["chunk"],
                              budget=a["budget"])
    if a["output"] != "none":    # PERF_FLAG_FD_OUTPUT: set-output's rule, at the open
        e.rb, e.redirected = m.ev(a["output"]).rb, True
        m.traits.add("output-redirected")


def _expect_open(m: PerfModel, a: Args) -> frozenset[str]:
    """A revoked event as group_fd (the output's carrier): ENODEV, before anything else
    (perf_event_open(): group_leader->state <= PERF_EVENT_STATE_EXIT). perf_event_open()
    with PERF_FLAG_FD_OUTPUT (and FD_NO_GROUP) runs
    perf_event_set_output() on the new event: EINVAL when the target has no mapped buffer
    (the other refusals need another task, CPU, clock or direction, which no sequence has)."""
    if a["output"] != "none" and m.ev(a["output"]).revoked:
        return frozenset({"ENODEV"})    # a group_fd at PERF_EVENT_STATE_EXIT or below
    if a["kind"] == "pmu" and m.revoked:    # perf_init_event(): no PMU of that type
        return frozenset({"ENOENT"})
    if a["output"] != "none" and m.ev(a["output"]).rb is None:
        return frozenset({"EINVAL"})
    return frozenset({"ok"})


def _call_open(w: PerfWorld, sid: int, a: Args) -> str:
    from perf_events import SAMPLE_TYPE
    quiet = perf_abi.ATTR_DISABLED | perf_abi.ATTR_EXCLUDE_KERNEL | perf_abi.ATTR_EXCLUDE_HV
    if a["kind"] == "tp":   # the id was read as root: tracefs is root's
        at = perf_abi.attr(perf_abi.PERF_TYPE_TRACEPOINT, w.cfg["tp_id"], 0)
        at.sample_period = 1
        at.sample_type = SAMPLE_TYPE
        if a["wakeup"]:
            at.flags |= perf_abi.ATTR_WATERMARK
            at.wakeup_events = a["wakeup"]     # the union's wakeup_watermark
    elif a["kind"] == "pmu":    # a budget of chunks, or 4 KiB ones without end
        at = perf_abi.attr(w.cfg["pmu_type"], a["chunk"] | a["budget"] << PMU_BUDGET_SHIFT,
                           quiet)
    else:
        at = perf_abi.attr(perf_abi.PERF_TYPE_SOFTWARE, perf_abi.PERF_COUNT_SW_DUMMY, quiet)
    group, flags = -1, perf_abi.PERF_FLAG_FD_CLOEXEC
    if a["output"] != "none":
        group = w.fd(a["output"])
        flags |= perf_abi.PERF_FLAG_FD_OUTPUT | perf_abi.PERF_FLAG_FD_NO_GROUP
    w.fds[sid] = perf_abi.perf_event_open(at, 0, -1, group, flags)
    if a["budget"]:
        w.budgets[sid] = a["budget"]
    return "ok"


def _draw_open(m: PerfModel, rng: random.Random) -> list[tuple[float, Args]]:
    kind = rng.choice(_kinds(m))
    args: Args = {"kind": kind, "wakeup": rng.choice(WAKEUPS) if kind == "tp" else 0}
    if kind == "pmu" and PRESETS[m.path]["aux"]:
        # perf-aux always gives the test PMU a budget, so aux-run can follow
        budget = rng.choice(PMU_BUDGETS[1:] if m.path == "perf-aux" else PMU_BUDGETS)
        args.update(budget=budget, chunk=rng.choice(PMU_CHUNKS) if budget else 4096)
    events = m.open_events()
    if events and rng.random() < 0.15:     # PERF_FLAG_FD_OUTPUT to another event's buffer
        args["output"] = f"@{rng.choice(events)}"
    return [(3 if len(events) < 2 else 0.5, args)]


def _py_open(s: Step) -> list[str]:
    out = f", output=fd[{s.ref('output')}]" if s["output"] != "none" else ""
    if s["budget"]:
        return [f"fd[{s.id}] = open_event('pmu', chunk={s['chunk']}, budget={s['budget']}{out})",
                f"budget[{s.id}] = {s['budget']}", "got = 'ok'"]
    wakeup = f", {s['wakeup']}" if s["wakeup"] else ""
    return [f"fd[{s.id}] = open_event({s['kind']!r}{wakeup}{out})", "got = 'ok'"]


def _c_open(s: Step) -> list[str]:
    if s["budget"]:
        lines = [f"fd[{s.id}] = open_event_aux({s['chunk']}, {s['budget']});",
                 f"budget[{s.id}] = {s['budget']};", f"got = res(fd[{s.id}] >= 0);"]
    else:
        call = f'open_event_wakeup("{s["kind"]}", {s["wakeup"]})' if s["wakeup"] else \
            f'open_event("{s["kind"]}")'
        lines = [f"fd[{s.id}] = {call};", f"got = res(fd[{s.id}] >= 0);"]
    if s["output"] == "none":
        return lines
    # PERF_FLAG_FD_OUTPUT | PERF_FLAG_FD_NO_GROUP with the target as group_fd (perf.h)
    return [f"output_fd = fd[{s.ref('output')}];"] + lines + ["output_fd = -1;"]


def _simpler_open(a: Args) -> list[Args]:
    return ([{"kind": "dummy"}] if a["kind"] != "dummy" else []) + \
        ([dict(a, wakeup=0)] if a["wakeup"] else []) + \
        ([dict(a, budget=b) for b in PMU_BUDGETS if 0 < b < a["budget"]]) + \
        ([dict(a, output="none")] if a["output"] != "none" else [])


OPEN = Op(
    "open", ("kind", "wakeup", "chunk", "budget", "output"), refs=("output",),
    defaults=(("wakeup", 0), ("chunk", 4096), ("budget", 0), ("output", "none")),
    draw=_draw_open,
    pre=lambda m, a: a["kind"] in ("dummy", "tp", "pmu") and
    (a["wakeup"] == 0 or a["kind"] == "tp") and (a["budget"] == 0 or a["kind"] == "pmu") and
    (a["output"] == "none" or m.open_event(a["output"]) is not None),
    expect=_expect_open,
    apply=_apply_open, call=_call_open, py=_py_open, c=_c_open, simpler=_simpler_open,
    rule="perf_event_open() of a software event, the getppid tracepoint (a sample per call, "
         "optionally with attr.watermark and a wakeup_watermark) or the test PMU's event; "
         "with PERF_FLAG_FD_OUTPUT (and FD_NO_GROUP) and another event as group_fd, its "
         "output goes to that event's buffer as set-output's would, EINVAL when that event "
         "has no mapped buffer (perf_event_open(), perf_event_set_output())")


def _apply_close(m: PerfModel, sid: int, a: Args) -> None:
    m.ev(a["event"]).fd_open = False
    m.drop_dead_events()


def _call_close(w: PerfWorld, sid: int, a: Args) -> str:
    os.close(w.fds.pop(ref_id(a["event"]) or 0))
    return "ok"


CLOSE = Op(
    "close", ("event",), refs=("event",),
    draw=lambda m, rng: [(0.7, {"event": f"@{s}"}) for s in m.open_events()],
    pre=lambda m, a: m.open_event(a["event"]) is not None,
    expect=lambda m, a: frozenset({"ok"}),
    apply=_apply_close, call=_call_close,
    py=close_forms("event")[0], c=close_forms("event")[1],
    rule="the event lives on while a mapping holds its file (perf_mmap_close() drops it)")


def _draw_mmap(m: PerfModel, rng: random.Random) -> list[tuple[float, Args]]:
    out: list[tuple[float, Args]] = []
    for s in m.open_events():
        e = m.events[s]
        same = m.rb(e).pages if e.rb is not None else None
        pages = same if same and rng.random() < 0.7 else rng.choice(SIZES)
        prot = "r" if rng.random() < 0.15 else "rw"
        share = "private" if rng.random() < 0.05 else "shared"
        out.append((4, {"event": f"@{s}", "pages": pages, "prot": prot, "share": share}))
    return out


def _expect_mmap(m: PerfModel, a: Args) -> frozenset[str]:
    pages = a["pages"]
    if a["share"] == "private":
        return frozenset({"EINVAL"})
    e = m.ev(a["event"])
    if e.revoked:       # perf_mmap(), under mmap_mutex, before perf_mmap_rb()'s checks
        return frozenset({"ENODEV"})
    if pages - 1 != 0 and not pow2(pages - 1):
        return frozenset({"EINVAL"})
    if e.rb is not None:
        return frozenset({"ok" if m.rb(e).pages == pages else "EINVAL"})
    return frozenset({"ok" if m.charge(pages)[0] else "EPERM"})


def _apply_mmap(m: PerfModel, sid: int, a: Args) -> None:
    e = m.ev(a["event"])
    if e.rb is not None:
        m.traits.add("mapped-again")
    else:
        _, locked, pinned = m.charge(a["pages"])
        e.rb = sid
        m.rbs[sid] = Rb(a["pages"], a["prot"] == "r", m.page, locked=locked, pinned=pinned,
                        watermark=e.wakeup)
        m.perf_mlock += locked
        m.pinned += pinned
    m.rb(e).maps += 1
    assert e.rb is not None
    m.vmas[sid] = Vma(ref_id(a["event"]) or 0, e.rb, "data", a["pages"], a["prot"] == "rw")


def _map(w: PerfWorld, sid: int, event: int, length: int, rw: bool, shared: bool,
         offset: int) -> str:
    from probelib import errno_result, libc, mapped
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if rw else 0)
    addr = libc.mmap(None, length, prot, mmap.MAP_SHARED if shared else mmap.MAP_PRIVATE,
                     w.fds[event], offset)
    if not mapped(addr):
        return errno_result(False)
    w.vmas[sid] = Region(addr, length, event, rw and offset == 0)
    return "ok"


def _py_mmap(s: Step) -> list[str]:
    prot = 3 if s["prot"] == "rw" else 1
    flags = 1 if s["share"] == "shared" else 2
    e, i = s.ref("event"), s.id
    return [f"addr = libc.mmap(None, {s['pages']} * PAGE, {prot}, {flags}, fd[{e}], 0)",
            "got = res(mapping(addr))",
            f"if got == 'ok': m[{i}], mfd[{i}] = (addr, {s['pages']} * PAGE), "
            f"({e}, {s['prot'] == 'rw'})"]


def _c_mmap(s: Step) -> list[str]:
    prot = "PROT_READ | PROT_WRITE" if s["prot"] == "rw" else "PROT_READ"
    flags = "MAP_SHARED" if s["share"] == "shared" else "MAP_PRIVATE"
    i, size = s.id, f"{s['pages']} * page"
    s.made[i] = (s.ref("event"), s["prot"] == "rw")
    return [f"a = mmap(NULL, {size}, {prot}, {flags}, fd[{s.ref('event')}], 0);",
            "got = res(a != MAP_FAILED);",
            f"if (a != MAP_FAILED) {{ addr[{i}] = a; len[{i}] = {size}; }}"]


MMAP = Op(
    "mmap", ("event", "pages", "prot", "share"), refs=("event",),
    draw=_draw_mmap,
    pre=lambda m, a: m.mappable(a["event"]),
    expect=_expect_mmap, apply=_apply_mmap,
    call=lambda w, sid, a: _map(w, sid, ref_id(a["event"]) or 0, a["pages"] * w.page,
                                a["prot"] == "rw", a["share"] == "shared", 0),
    py=_py_mmap, c=_c_mmap,
    simpler=lambda a: [dict(a, pages=n) for n in (1, 2, 3, 5) if n < a["pages"]],
    rule="1 + 2^n pages (or 1) else EINVAL; MAP_PRIVATE EINVAL; an event already mapped: the "
         "same size only (else EINVAL), a reference charged nothing; a first mapping past the "
         "allowance and RLIMIT_MEMLOCK without CAP_IPC_LOCK: EPERM (perf_mmap(), "
         "perf_mmap_rb(), perf_mmap_calc_limits())")


def _draw_aux(m: PerfModel, rng: random.Random) -> list[tuple[float, Args]]:
    weight = PRESETS[m.path]["aux"]
    out: list[tuple[float, Args]] = []
    for s in m.open_events():
        e = m.events[s]
        if weight and m.rw_data_vma(e.rb) is not None:
            rb = m.rb(e)
            again = rb.aux_pages and rng.random() < 0.6
            pages = rb.aux_pages if again else rng.choice(AUX_SIZES)
            where = rng.choice(AUX_WHERE)
            prot = "r" if rng.random() < 0.25 else "rw"
            # a test PMU event that can run once its area is there: the AUX data path next
            first = e.kind == "pmu" and e.budget and not e.ran and not rb.aux_pages
            out.append((weight * (2 if first else 1), {"event": f"@{s}", "pages": pages,
                                                       "where": where, "prot": prot}))
    return out


def aux_offset(end: int, page: int, where: str, mapped: bool = False) -> int:
    """The aux_offset (or, `mapped`, the mmap offset) of an AUX area placed `where`."""
    pages, extra = AUX_PLACES[where][1 if mapped else 0]
    return end + pages * page + extra


def _expect_aux(m: PerfModel, a: Args) -> frozenset[str]:
    if m.ev(a["event"]).revoked:    # perf_mmap(), before perf_mmap_aux()
        return frozenset({"ENODEV"})
    rb, pages = m.rb(m.ev(a["event"])), a["pages"]
    offset = aux_offset(rb.pages * m.page, m.page, a["where"])
    if offset < rb.pages * m.page or offset != aux_offset(rb.pages * m.page, m.page, a["where"],
                                                          mapped=True):
        return frozenset({"EINVAL"})        # over the data, or not where it is mapped
    if rb.aux_pages and offset != rb.aux_offset:
        return frozenset({"EINVAL"})        # already mapped at another offset
    if rb.aux_pages:
        return frozenset({"ok" if pages == rb.aux_pages else "EINVAL"})
    if not pow2(pages):
        return frozenset({"EINVAL"})
    if not m.charge(pages)[0]:
        return frozenset({"EPERM"})
    return frozenset({"ok" if m.ev(a["event"]).kind == "pmu" else "EOPNOTSUPP"})


def _apply_aux(m: PerfModel, sid: int, a: Args) -> None:
    e = m.ev(a["event"])
    rb = m.rb(e)
    if rb.aux_pages:
        m.traits.add("aux-mapped-again")
    else:
        _, rb.aux_locked, rb.aux_pinned = m.charge(a["pages"])
        rb.aux_pages = a["pages"]
        rb.aux_offset = aux_offset(rb.pages * m.page, m.page, a["where"])
        rb.aux_overwrite = a["prot"] == "r"     # rb_alloc_aux(): no RING_BUFFER_WRITABLE
        m.perf_mlock += rb.aux_locked
        m.pinned += rb.aux_pinned
    rb.aux_maps += 1
    rb.maps += 1
    assert e.rb is not None
    m.vmas[sid] = Vma(ref_id(a["event"]) or 0, e.rb, "aux", a["pages"], a["prot"] == "rw")


def _call_aux(w: PerfWorld, sid: int, a: Args) -> str:
    """aux_offset (right past the data buffer) and aux_size into the control page of a
    writable data mapping of the event's buffer, then the mmap at that offset."""
    event = ref_id(a["event"]) or 0
    data = next(r for r in list(w.vmas.values()) if r.event == event and r.rw_data)
    ctl = perf_abi.PerfEventMmapPage.from_address(data.addr)
    ctl.aux_offset = aux_offset(data.length, w.page, a["where"])
    ctl.aux_size = a["pages"] * w.page
    return _map(w, sid, event, a["pages"] * w.page, a["prot"] == "rw", True,
                aux_offset(data.length, w.page, a["where"], mapped=True))


def _place(base: str, page: str, where: str, mapped: bool = False) -> str:
    """aux_offset(), written in a reproducer's terms: "data[1] - PAGE"."""
    pages, extra = AUX_PLACES[where][1 if mapped else 0]
    return base + (f" {'+-'[pages < 0]} {page}" if pages else "") + \
        (f" + {extra}" if extra else "")


def _py_aux(s: Step) -> list[str]:
    d, pages, where = s.ref("event"), s["pages"], s["where"]
    return [f"data = next(m[k] for k, v in mfd.items() if v == ({d}, True) and k in m)",
            f"struct.pack_into('<QQ', (ctypes.c_char * 16).from_address(data[0] + {AUX_OFFSET}),"
            f" 0, {_place('data[1]', 'PAGE', where)}, {pages} * PAGE)  # aux_offset, aux_size",
            f"addr = libc.mmap(None, {pages} * PAGE, {3 if s['prot'] == 'rw' else 1}, 1, "
            f"fd[{d}], "
            f"{_place('data[1]', 'PAGE', where, True)})",
            "got = res(mapping(addr))",
            f"if got == 'ok': m[{s.id}] = (addr, {pages} * PAGE)"]


def _c_aux(s: Step) -> list[str]:
    i, d, pages = s.id, s.ref("event"), s["pages"]
    data = next(k for k, v in s.made.items() if v == (d, True))
    ctl, base, where = f"((struct perf_event_mmap_page *)addr[{data}])", f"len[{data}]", s["where"]
    return [f"{ctl}->aux_offset = {_place(base, 'page', where)};",
            f"{ctl}->aux_size = {pages} * page;",
            f"a = mmap(NULL, {pages} * page, "
            f"{'PROT_READ | PROT_WRITE' if s['prot'] == 'rw' else 'PROT_READ'}, MAP_SHARED, fd[{d}], "
            f"{_place(base, 'page', where, True)});", "got = res(a != MAP_FAILED);",
            f"if (a != MAP_FAILED) {{ addr[{i}] = a; len[{i}] = {pages} * page; }}"]


AUX = Op(
    "aux", ("event", "pages", "where", "prot"), refs=("event",),
    defaults=(("where", "after"), ("prot", "rw")),
    draw=_draw_aux,
    pre=lambda m, a: m.mappable(a["event"]) and m.rw_data_vma(m.ev(a["event"]).rb) is not None
    and a["where"] in AUX_PLACES and (a["where"] != "overlap" or m.rb(m.ev(a["event"])).pages > 1),
    expect=_expect_aux, apply=_apply_aux, call=_call_aux, py=_py_aux, c=_c_aux,
    simpler=lambda a: ([dict(a, where="after")] if a["where"] != "after" else []) +
    ([dict(a, prot="rw")] if a["prot"] != "rw" else []),
    rule="2^n pages at aux_offset, which must be past the data buffer (over it: EINVAL), the "
         "offset it is mapped at (unaligned: EINVAL), and a second mapping's the same (a "
         "reference, the same size); EPERM past the limits; EOPNOTSUPP on a PMU without AUX, "
         "after the charge check; a read-only first mapping makes the area overwrite mode "
         "(perf_mmap_aux(), rb_alloc_aux())")


def _expect_pause(m: PerfModel, a: Args) -> frozenset[str]:
    # perf_ioctl(): an event with no buffer, or one with no data pages: EINVAL
    e = m.ev(a["event"])
    if e.revoked:       # _perf_ioctl(): every ioctl of a revoked event
        return frozenset({"ENODEV"})
    return frozenset({"ok" if e.rb is not None and m.rb(e).pages > 1 else "EINVAL"})


def _apply_pause(m: PerfModel, sid: int, a: Args) -> None:
    m.rb(m.ev(a["event"])).paused = bool(a["pause"])


def _call_pause(w: PerfWorld, sid: int, a: Args) -> str:
    fcntl.ioctl(w.fd(a["event"]), perf_abi.PERF_EVENT_IOC_PAUSE_OUTPUT, a["pause"])
    return "ok"


PAUSE = Op(
    "pause", ("event", "pause"), refs=("event",),
    draw=lambda m, rng: [(0.6, {"event": f"@{s}", "pause": rng.choice((1, 0))})
                         for s in m.open_events() if m.events[s].kind == "tp"],
    pre=lambda m, a: m.open_event(a["event"]) is not None,
    expect=_expect_pause, apply=_apply_pause, call=_call_pause,
    py=lambda s: [f"fcntl.ioctl(fd[{s.ref('event')}], "
                  f"{perf_abi.PERF_EVENT_IOC_PAUSE_OUTPUT:#x}, {s['pause']})  # PAUSE_OUTPUT",
                  "got = 'ok'"],
    c=lambda s: [f"got = res(ioctl(fd[{s.ref('event')}], PERF_EVENT_IOC_PAUSE_OUTPUT, "
                 f"{s['pause']}) == 0);"],
    rule="PERF_EVENT_IOC_PAUSE_OUTPUT: EINVAL with no buffer or no data pages, else 0; while "
         "paused a sample is counted lost, its LOST record before the first sample after the "
         "resume (perf_ioctl(), rb_toggle_paused(), __perf_output_begin())")


def _call_poke(w: PerfWorld, sid: int, a: Args) -> str:
    """A zero byte stored into the page (at offset 512: the control page's reserved area)
    by read() from /dev/zero: the kernel's store faults as a user store would, and a refused
    one is EFAULT, not a signal."""
    from probelib import errno_result, libc
    addr = w.region(a["vma"]).addr + a["page"] * w.page + POKE_OFFSET
    fd = os.open("/dev/zero", os.O_RDONLY)
    try:
        return errno_result(libc.read(fd, ctypes.c_void_p(addr), 1) == 1)
    finally:
        os.close(fd)


POKE = Op(
    "poke", ("vma", "page"), refs=("vma",),
    draw=lambda m, rng: [(0.3, {"vma": f"@{s}", "page": rng.choice(
        sorted({0, 1, v.pages - 1} & set(range(v.pages))))}) for s, v in m.live_vmas()],
    pre=lambda m, a: m.vma(a["vma"]) is not None and a["page"] < m.vm(a["vma"]).pages,
    expect=lambda m, a: frozenset({"ok" if m.vm(a["vma"]).writable and
                                   m.vm(a["vma"]).kind == "data" and a["page"] == 0
                                   else "EFAULT"}),
    apply=lambda m, sid, a: None, call=_call_poke,
    py=lambda s: ["zero = os.open('/dev/zero', os.O_RDONLY)",
                  f"got = res(libc.read(zero, m[{s.ref('vma')}][0] + {s['page']} * PAGE + "
                  f"{POKE_OFFSET}, 1) == 1)", "os.close(zero)"],
    c=lambda s: ['j = open("/dev/zero", O_RDONLY);\t/* a zero byte stored by the kernel */',
                 f"got = res(read(j, addr[{s.ref('vma')}] + {s['page']} * page + "
                 f"{POKE_OFFSET}, 1) == 1);", "close(j);"],
    rule="a store the kernel makes into a mapping's page: only a writable data mapping's "
         "control page takes it, else EFAULT (perf_mmap_pfn_mkwrite(); 6.12 perf_mmap_fault())")


def _apply_fire(m: PerfModel, sid: int, a: Args) -> None:
    for e in m.events.values():
        if e.kind == "tp" and e.rb is not None:
            for _ in range(a["n"]):
                m.rb(e).write()


def _call_fire(w: PerfWorld, sid: int, a: Args) -> str:
    for _ in range(a["n"]):
        os.getppid()
    return "ok"


def _draw_fire(m: PerfModel, rng: random.Random) -> list[tuple[float, Args]]:
    """3, or 8 where a freed ring holds lost samples (the next sample reports them); a count
    that just overflows a writable ring twice as often as each other (mutant 020 needs a run
    of lost samples, then space, then one more: 0.5 % of perf-ring sequences before, 2.4 %
    now, the model alone over 1000 sequences)."""
    if not any(e.kind == "tp" and e.rb is not None for e in m.events.values()):
        return []
    report = any(rb.lost and rb.data_size - (rb.head - rb.tail) > SAMPLE + LOST_RECORD
                 for rb in m.rbs.values())
    return [(8 if report else 3, {"n": rng.choice(FIRES + m.overflows() * 2 + m.wakes())})]


FIRE = Op(
    "fire", ("n",),
    draw=_draw_fire,
    pre=lambda m, a: any(e.kind == "tp" for e in m.events.values()),
    expect=lambda m, a: frozenset({"ok"}),
    apply=_apply_fire, call=_call_fire,
    py=lambda s: [f"for _ in range({s['n']}): os.getppid()", "got = 'ok'"],
    c=lambda s: [f"for (i = 0; i < {s['n']}; i++) getppid();", 'got = "ok";'],
    simpler=lambda a: [{"n": n} for n in (1, 4, 20) if n < a["n"]],
    rule="each getppid() a sample in every ring of a tracepoint event: a writable ring stops "
         "at data_tail (the sample lost, a LOST record before the next that fits), a read-only "
         "one overwrites, 1 page records nothing (__perf_output_begin())")


def _apply_consume(m: PerfModel, sid: int, a: Args) -> None:
    rb = m.rbs[m.vm(a["vma"]).rb]
    rb.tail, rb.samples, rb.lost_reported = rb.head, 0, 0


def _call_consume(w: PerfWorld, sid: int, a: Args) -> str:
    addr = w.region(a["vma"]).addr
    head = ctypes.c_uint64.from_address(addr + DATA_HEAD).value
    ctypes.c_uint64.from_address(addr + DATA_TAIL).value = head
    return "ok"


def _consumable(m: PerfModel, s: int, v: Vma) -> bool:
    return v.kind == "data" and v.writable and m.events.get(v.event, Event("x")).kind == "tp"


CONSUME = Op(
    "consume", ("vma",), refs=("vma",),
    # 8x on a ring holding lost samples not yet reported: freeing it lets the next sample
    # carry their PERF_RECORD_LOST (mutant 020 counts a run of them as one)
    draw=lambda m, rng: [(8 if m.rbs[v.rb].lost else 1, {"vma": f"@{s}"})
                         for s, v in m.live_vmas() if _consumable(m, s, v)],
    pre=lambda m, a: m.vma(a["vma"]) is not None and m.vm(a["vma"]).kind == "data" and
    m.vm(a["vma"]).writable,
    expect=lambda m, a: frozenset({"ok"}),
    apply=_apply_consume, call=_call_consume,
    py=lambda s: [f"addr = m[{s.ref('vma')}][0]  # data_tail = data_head",
                  f"ctypes.c_uint64.from_address(addr + {DATA_TAIL}).value = "
                  f"ctypes.c_uint64.from_address(addr + {DATA_HEAD}).value", "got = 'ok'"],
    c=lambda s: [f"((struct perf_event_mmap_page *)addr[{s.ref('vma')}])->data_tail = "
                 f"((struct perf_event_mmap_page *)addr[{s.ref('vma')}])->data_head;",
                 'got = "ok";'],
    rule="data_tail = data_head through a writable mapping: the ring's space is free again "
         "(perf_output_begin() reads data_tail)")

def _poll_weight(m: PerfModel, sid: int) -> float:
    """Right after an aux-run of its buffer, poll is likely: the AUX wake-up rules show there."""
    e = m.events[sid]
    return 8.0 if e.rb is not None and m.rb(e).aux_fresh else 1.5


def _expect_poll(m: PerfModel, a: Args) -> frozenset[str]:
    e = m.ev(a["event"])
    if e.revoked:
        return frozenset({"err"})       # perf_poll(): EPOLLERR, not EPOLLHUP
    if e.rb is None:
        return frozenset({"hup"})       # perf_poll(): EPOLLHUP until there is a buffer
    rb = m.rb(e)
    if rb.records_unknown and rb.head:  # the PMU's records beside samples: the head unknown
        return frozenset({"in", "none"})
    return frozenset({"in" if rb.poll else "none"})


def _apply_poll(m: PerfModel, sid: int, a: Args) -> None:
    e = m.ev(a["event"])
    if e.rb is not None:
        m.rb(e).poll = False            # atomic_xchg(&rb->poll, 0)


POLL = Op(
    "poll", ("event",), refs=("event",), answers=("in", "none", "hup", "err"),
    draw=lambda m, rng: [(_poll_weight(m, s), {"event": f"@{s}"}) for s in m.open_events()],
    pre=lambda m, a: m.open_event(a["event"]) is not None,
    expect=_expect_poll, apply=_apply_poll, call=lambda w, sid, a: polled(w.fd(a["event"])),
    py=lambda s: ["p = select.poll()", f"p.register(fd[{s.ref('event')}], select.POLLIN)",
                  f"ev = dict(p.poll(0)).get(fd[{s.ref('event')}], 0)",
                  "got = 'err' if ev & select.POLLERR else 'hup' if ev & select.POLLHUP else "
                  "'in' if ev & select.POLLIN else 'none' if not ev else f'events {ev:#x}'"],
    c=lambda s: [f"got = polled(fd[{s.ref('event')}]);"],
    rule="poll() without waiting: EPOLLERR for a revoked event; EPOLLHUP with no buffer; else POLLIN once a record took "
         "the head more than the watermark (wakeup_watermark, or half the data) past the last "
         "wake-up, or an AUX wake-up (aux-run's rule), and a poll takes it (atomic_xchg); a "
         "lost or paused sample wakes nobody (perf_poll(), __perf_output_begin(), "
         "perf_output_put_handle(), ring_buffer_init(), perf_aux_output_end())")

def _draw_set_output(m: PerfModel, rng: random.Random) -> list[tuple[float, Args]]:
    events = m.open_events()
    return [(0.8, {"event": f"@{s}", "target": "none" if rng.random() < 0.2 else
                   f"@{rng.choice(events)}"}) for s in events]


def _expect_set_output(m: PerfModel, a: Args) -> frozenset[str]:
    if m.ev(a["event"]).revoked:    # _perf_ioctl()
        return frozenset({"ENODEV"})
    if a["target"] == "none":     # detach: refused while the event has its own mapping
        return frozenset({"EINVAL" if m.own_maps(a["event"]) else "ok"})
    target = m.ev(a["target"])
    if a["target"] == a["event"] or m.own_maps(a["event"]) or target.rb is None or \
            target.revoked:
        return frozenset({"EINVAL"})
    return frozenset({"ok"})


def _apply_set_output(m: PerfModel, sid: int, a: Args) -> None:
    e = m.ev(a["event"])
    if a["target"] == "none":
        e.rb, e.redirected = None, False
    else:
        e.rb, e.redirected = m.ev(a["target"]).rb, True
        m.traits.add("output-redirected")


def _call_set_output(w: PerfWorld, sid: int, a: Args) -> str:
    """The target's fd, or -1 as the unsigned long perf_ioctl() compares `arg` with (an int
    -1 reaches the kernel as 0xffffffff on x86_64: a bad fd, EBADF)."""
    from probelib import errno_result, libc
    target = NO_OUTPUT if a["target"] == "none" else w.fd(a["target"])
    return errno_result(libc.ioctl(w.fd(a["event"]),
                                   ctypes.c_ulong(perf_abi.PERF_EVENT_IOC_SET_OUTPUT),
                                   ctypes.c_ulong(target)) == 0)


def _target(s: Step, minus_one: str) -> str:
    return minus_one if s["target"] == "none" else f"fd[{s.ref('target')}]"


SET_OUTPUT = Op(
    "set-output", ("event", "target"), refs=("event", "target"),
    draw=_draw_set_output,
    pre=lambda m, a: m.open_event(a["event"]) is not None and (
        a["target"] == "none" or m.open_event(a["target"]) is not None),
    expect=_expect_set_output, apply=_apply_set_output, call=_call_set_output,
    py=lambda s: [f"got = res(libc.ioctl(fd[{s.ref('event')}], "
                  f"ctypes.c_ulong({perf_abi.PERF_EVENT_IOC_SET_OUTPUT:#x}), "
                  f"ctypes.c_ulong({_target(s, hex(NO_OUTPUT))})) == 0)  # SET_OUTPUT"],
    c=lambda s: [f"got = res(ioctl(fd[{s.ref('event')}], PERF_EVENT_IOC_SET_OUTPUT, "
                 f"(unsigned long){_target(s, '-1')}) == 0);"],
    rule="PERF_EVENT_IOC_SET_OUTPUT: EINVAL to itself, while the event has a mapping of its "
         "own (also for -1, the detach), or to an event with no mapped buffer; else 0 and the "
         "event's samples land in the target's buffer (its rule, its poll) until the last "
         "munmap of that buffer detaches every event on it (perf_event_set_output(), "
         "ring_buffer_attach(), perf_mmap_close())")

def _aux_vma(m: PerfModel, rid: int | None) -> int | None:
    return next((s for s, v in sorted(m.vmas.items())
                 if v.live and v.rb == rid and v.kind == "aux"), None)


def _can_run(m: PerfModel, ref: object) -> bool:
    """A test PMU event with a budget, not run before, its buffer's data pages and AUX area
    mapped, the buffer not paused and no tracepoint writing into it."""
    e = m.open_event(ref)
    if e is None or e.kind != "pmu" or not e.budget or e.ran or e.rb is None or e.redirected \
            or e.revoked:
        return False
    rb = m.rb(e)
    return rb.pages > 1 and not rb.paused and _aux_vma(m, e.rb) is not None and \
        m.rw_data_vma(e.rb) is not None and \
        not any(o.rb == e.rb and o.kind == "tp" for o in m.events.values())


def _apply_aux_run(m: PerfModel, sid: int, a: Args) -> None:
    """What the test PMU writes with aux_tail at 0. A writable area: each chunk while it fits
    the free space (CIRC_SPACE: the size less one byte), then the one that does not, cut to
    the free whole words and flagged TRUNCATED; the event stops there (what more it writes is
    empty records, which 6.12 keeps writing: known issue aux-overrun-does-not-disable). An
    overwrite area: every chunk, over the oldest data, flagged OVERWRITE."""
    e = m.ev(a["event"])
    rb = m.rb(e)
    size = rb.aux_pages * m.page
    for _ in range(e.budget):
        if rb.aux_overwrite:
            rb.aux_head += e.chunk
            rb.aux_records.append([e.chunk, AUX_FLAG_OVERWRITE])
            continue
        free = size - (rb.aux_head - 0) - 1
        if free <= 0:       # perf_aux_output_begin(): no space, the event stopped and woken
            aux_wake(rb, size, truncated=True)
            break
        if e.chunk <= free:
            rb.aux_head += e.chunk
            rb.aux_records.append([e.chunk, 0])
            aux_wake(rb, size, truncated=False)
            continue
        if free & ~7:
            rb.aux_head += free & ~7
            rb.aux_records.append([free & ~7, AUX_FLAG_TRUNCATED])
        aux_wake(rb, size, truncated=True)
        break
    e.ran, rb.aux_fresh, rb.records_unknown = True, True, True


def aux_wake(rb: Rb, size: int, truncated: bool) -> None:
    """perf_aux_output_end(): a wake-up (rb->poll) for a TRUNCATED chunk, and once aux_head
    is aux_watermark past rb->aux_wakeup (rb_need_aux_wakeup(), never in overwrite mode);
    attr.aux_watermark 0 is half the area (rb_alloc_aux())."""
    watermark = size // 2
    if rb.aux_head - rb.aux_wakeup >= watermark:
        rb.aux_wakeup = rb.aux_head - rb.aux_head % watermark
        truncated = True
    if truncated:
        rb.poll = True


def _pmu_records(w: PerfWorld, data: Region) -> list:
    from perf_buffer import OFF_DATA_HEAD, OFF_DATA_OFFSET, OFF_DATA_SIZE, OFF_DATA_TAIL
    from perf_buffer import parse_records
    u64 = lambda off: ctypes.c_uint64.from_address(data.addr + off).value  # noqa: E731
    head = u64(OFF_DATA_HEAD)   # first: the records below data_head are whole (the ABI's rmb)
    size = u64(OFF_DATA_SIZE)
    ring = ctypes.string_at(data.addr + u64(OFF_DATA_OFFSET), size)
    return [r for r in parse_records(ring, size, u64(OFF_DATA_TAIL), head)
            if r.type == perf_abi.PERF_RECORD_AUX]


def _call_aux_run(w: PerfWorld, sid: int, a: Args) -> str:
    """Enable the event and spin (a task's event runs only while the task does) until the PMU
    has written its budget or a TRUNCATED record, then disable it."""
    import time
    event = ref_id(a["event"]) or 0
    fd = w.fd(a["event"])
    data = next(r for r in list(w.vmas.values()) if r.event == event and r.rw_data)
    budget = w.budgets[event]
    fcntl.ioctl(fd, perf_abi.PERF_EVENT_IOC_ENABLE)
    try:
        deadline = time.monotonic() + AUX_RUN_S
        while time.monotonic() < deadline:
            recs = _pmu_records(w, data)
            if len(recs) >= budget or any(r.u64(2) & AUX_FLAG_TRUNCATED for r in recs):
                return "ok"
        return "timeout"
    finally:
        fcntl.ioctl(fd, perf_abi.PERF_EVENT_IOC_DISABLE)


def _py_aux_run(s: Step) -> list[str]:
    e = s.ref("event")
    return [f"data = next(m[k] for k, v in mfd.items() if v == ({e}, True) and k in m)",
            f"aux_run(fd[{e}], data[0], budget[{e}])  # the test PMU writes its chunks",
            "got = 'ok'"]


def _c_aux_run(s: Step) -> list[str]:
    e = s.ref("event")
    data = next(k for k, v in s.made.items() if v == (e, True))
    return [f"aux_run(fd[{e}], addr[{data}], budget[{e}]);\t/* the test PMU writes its chunks */",
            'got = "ok";']


AUX_RUN = Op(
    "aux-run", ("event",), refs=("event",),
    draw=lambda m, rng: [(10, {"event": f"@{s}"}) for s in m.open_events() if _can_run(m, f"@{s}")],
    pre=lambda m, a: _can_run(m, a["event"]),
    expect=lambda m, a: frozenset({"ok"}), apply=_apply_aux_run, call=_call_aux_run,
    py=_py_aux_run, c=_c_aux_run,
    rule="the test PMU's chunks into the AUX area with aux_tail at 0: aux_head is the bytes "
         "written, a PERF_RECORD_AUX per chunk; writable: flags 0, the chunk that does not fit "
         "the free space (the size less one byte) cut to whole words and flagged TRUNCATED, "
         "then nothing more, a wake-up for it and each time aux_head passes another "
         "aux_watermark (0: half the area); read-only (overwrite): every chunk, flagged "
         "OVERWRITE, no wake-up; every u64 at AUX position p (the newest area's worth) holds p "
         "(perf_aux_output_begin(), perf_aux_output_end(), rb_need_aux_wakeup(), "
         "rb_alloc_aux(), kernels/modules/ringlab_aux)")

UNREGISTER = f"/sys/module/{TEST_PMU}/parameters/unregister"


def _apply_revoke(m: PerfModel, sid: int, a: Args) -> None:
    m.revoked = True
    for e in m.events.values():
        if e.kind == "pmu":
            e.revoked = True
    m.traits.add("revoked")


def _call_revoke(w: PerfWorld, sid: int, a: Args) -> str:
    """A child as root (the saved uid: setresuid(0, 0, 0) is allowed) writes the parameter,
    so that this process keeps its user and capabilities."""
    from probelib import errname
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setresuid(0, 0, 0)
            with open(UNREGISTER, "w") as f:
                f.write("1")
            code = 0
        except OSError as e:
            code = e.errno or 1
        finally:
            os._exit(code)      # whatever happened, the child goes no further
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return "ok" if code == 0 else errname(OSError(code, ""))


REVOKE = Op(
    "revoke", (),
    draw=lambda m, rng: [(0.5, {})] if any(e.kind == "pmu" for e in m.events.values()) else [],
    pre=lambda m, a: bool(m.setup.get("has_revoke")) and not m.revoked,
    expect=lambda m, a: frozenset({"ok"}), apply=_apply_revoke, call=_call_revoke,
    py=lambda s: ["pid = os.fork()  # a child as root (the saved uid) unregisters the test PMU",
                  "if pid == 0:",
                  "    code = 1",
                  "    try:",
                  "        os.setresuid(0, 0, 0)",
                  f"        with open({UNREGISTER!r}, 'w') as f_:",
                  "            f_.write('1')",
                  "        code = 0",
                  "    except OSError as e:",
                  "        code = e.errno",
                  "    finally:",
                  "        os._exit(code)",
                  "code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])",
                  "got = errno.errorcode.get(code, str(code)) if code else 'ok'"],
    c=lambda s: ["got = unregister_pmu();"],
    rule="the test PMU unregistered under its events, as a driver's unbind does (ringlab_aux's "
         "`unregister`, 7.x): every event of it revoked (PERF_EVENT_STATE_REVOKED), its "
         "buffers left mapped; then mmap() ENODEV (MAP_PRIVATE still EINVAL first), every "
         "ioctl ENODEV, poll() EPOLLERR, an output set to it EINVAL (SET_OUTPUT) or ENODEV (an "
         "open with it as group_fd), a new event of its type ENOENT (perf_pmu_unregister(), __pmu_detach_event(), perf_mmap(), _perf_ioctl(), "
         "perf_poll(), perf_event_set_output(); mutant 059)")

OPS = table(OPEN, CLOSE, MMAP, AUX, PAUSE, POKE, FIRE, CONSUME, POLL, SET_OUTPUT, AUX_RUN,
            REVOKE)
PerfModel.OPS = OPS


# --- the calls --------------------------------------------------------------------------------

class PerfWorld(World):
    """The calls of PerfModel's operations, in the sequence's child process."""
    OPS = OPS
    C_SUPPORT = "perf.h"

    @staticmethod
    def model(path: str, setup: dict) -> PerfModel:
        return PerfModel(path, setup)

    @staticmethod
    def missing(path: str) -> str | None:
        if not os.path.exists("/proc/sys/kernel/perf_event_paranoid"):
            return "this kernel has no perf events (CONFIG_PERF_EVENTS)"
        _reload_revoked_pmu()   # the last sequence of a slice may have unregistered it
        if path == "perf-aux" and not os.path.exists(
                f"/sys/bus/event_source/devices/{TEST_PMU}"):
            return f"the test PMU {TEST_PMU} is not loaded (kernels/modules/{TEST_PMU})"
        return None

    @staticmethod
    def setup(path: str, rng: random.Random) -> dict:
        p = PRESETS[path]
        return {"mlock_pages": rng.choice(p["mlock_pages"]),
                "rlimit_pages": rng.choice(p["rlimit_pages"]), "who": rng.choice(p["who"])}

    @staticmethod
    @contextmanager
    def prepared(path: str, setup: dict) -> Iterator[dict]:
        """The sysctls a sequence needs (as root, put back after): perf_event_mlock_kb, and
        paranoid 1 (a user may sample a tracepoint in its own task, and is still charged)."""
        page = os.sysconf("SC_PAGE_SIZE")
        _reload_revoked_pmu()
        env = {"page_size": page, "ncpus": os.sysconf("SC_NPROCESSORS_ONLN"),
               "mlock_kb": setup["mlock_pages"] * page // 1024,
               "has_pmu": os.path.exists(f"/sys/bus/event_source/devices/{TEST_PMU}"),
               "tp_id": _tracepoint_id()}
        env["has_tp"] = env["tp_id"] is not None
        env["has_revoke"] = env["has_pmu"] and os.path.exists(UNREGISTER)
        env.update(mapping_env())
        if env["has_pmu"]:      # read as root, before a step may unregister it
            from perf_events import test_pmu_type
            env["pmu_type"] = test_pmu_type(TEST_PMU)
        with sysctls({"perf_event_mlock_kb": env["mlock_kb"], "perf_event_paranoid": 1}):
            yield env

    @staticmethod
    @contextmanager
    def session(path: str) -> Iterator[None]:
        """For a whole explore: no sample-rate lowering (under TCG the kernel would lower
        perf_event_max_sample_rate and throttle the rings the model counts). The modules a
        sequence's child uses are imported here, once: imported in each forked child they
        took ~40 % of its time (cProfile in a 7.2.13 guest)."""
        import perf_buffer, perf_events, probe_pinning  # noqa: F401,E401
        with sysctls({"perf_event_max_sample_rate": 100000, "perf_cpu_time_max_percent": 0}):
            yield

    def __init__(self, path: str, setup: dict, uid: int) -> None:
        from probe_pinning import set_effective_caps
        super().__init__()
        self.cfg, self.page = setup, setup["page_size"]
        self.budgets: dict[int, int] = {}   # test PMU events: their chunk budget
        rl = setup["rlimit_pages"] * self.page
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (rl, rl))
        self.uid = uid
        os.setgroups([])
        os.setresgid(uid, uid, 0)
        os.setresuid(uid, uid, 0)   # effective capabilities cleared, permitted kept
        self.set_caps = set_effective_caps
        if setup["who"] == "user+ipc_lock":
            set_effective_caps((14,))   # CAP_IPC_LOCK
        from perf_events import module_refs
        self.pmu_refs = module_refs(TEST_PMU) or 0

    def observe(self, expected: dict) -> dict:
        from perf_events import vm_pin_kb
        out: dict = {}
        for key in expected:
            if key.startswith("aux@"):
                out[key] = self._aux(self.vmas[int(key[4:])], expected[key]["aux_vma"])
            elif key == "vm_pin_kb":
                out[key] = vm_pin_kb()
            elif key.startswith("ring@"):
                out[key] = self._ring(self.vmas[int(key[5:])].addr, expected[key])
            elif key.startswith("ctl@"):
                from perf_buffer import OFF_DATA_OFFSET, OFF_DATA_SIZE
                addr = self.vmas[int(key[4:])].addr
                out[key] = {"data_offset": ctypes.c_uint64.from_address(
                    addr + OFF_DATA_OFFSET).value, "data_size": ctypes.c_uint64.from_address(
                    addr + OFF_DATA_SIZE).value}
        return out

    @staticmethod
    def py_check(kind: str, sid: int, want: dict) -> list[str]:
        if kind == "aux":
            aux, want = want["aux_vma"], {k: v for k, v in want.items() if k != "aux_vma"}
            return [f"check('aux@{sid}', lambda: observe_aux(m[{sid}][0], *m[{aux}]), {want!r})"]
        return [f"check('{kind}@{sid}', lambda: observe_{kind}(m[{sid}][0]), {want!r})"]

    @staticmethod
    def c_check(kind: str, sid: int, want: dict) -> list[str]:
        pc = f"((struct perf_event_mmap_page *)addr[{sid}])"
        lines = [f"if (!addr[{sid}]) {{", f'\tresult(0, "{kind}@{sid}: no such mapping");',
                 "} else {", "\tlong long s, l;", "\tchar recs[512];",
                 f"\tint torn = ring_walk(addr[{sid}], &s, &l, recs, sizeof(recs));", "",
                 "\tcheck_begin();"]
        if kind == "ctl":
            lines += [f'\twant("{k}", {pc}->{k}, {v});' for k, v in want.items()]
        elif kind == "ring":
            lines += [f'\twant("head", {pc}->data_head, {want["head"]});']
            if "samples" in want:
                lines += ['\twant("torn", torn, 0);', f'\twant("samples", s, {want["samples"]});',
                          f'\twant("lost", l, {want["lost"]});']
        elif kind == "aux":
            aux = want["aux_vma"]
            recs = ",".join(f"{size}/{flags}" for size, flags in want["records"])
            lines += [f'\twant("aux_head", {pc}->aux_head, {want["aux_head"]});',
                      f'\twant("data_ok", aux_data_ok(addr[{sid}], addr[{aux}], len[{aux}]), '
                      f'{int(want["data_ok"])});',
                      f'\twant_str("records", recs, "{recs}");']
        else:
            raise NotImplementedError(kind)
        return lines + [f'\tcheck_end("{kind}@{sid}");', "\t(void)torn;", "}"]

    def _aux(self, data: Region, aux_vma: int) -> dict:
        """aux_head, the non-empty PERF_RECORD_AUX records ([size, flags]), and whether every
        u64 written holds its position."""
        import struct
        ctl = perf_abi.PerfEventMmapPage.from_address(data.addr)
        aux = self.vmas[aux_vma]
        words = ctypes.string_at(aux.addr, aux.length)
        head = ctl.aux_head
        ok = all(struct.unpack_from("<Q", words, p % aux.length)[0] == p
                 for p in range(max(0, head - aux.length) & ~7, head - head % 8, 8))
        return {"aux_vma": aux_vma, "aux_head": head, "data_ok": ok,
                "records": [[r.u64(1), r.u64(2)] for r in _pmu_records(self, data)
                            if r.u64(1)]}

    def _ring(self, addr: int, want: dict) -> dict:
        from perf_buffer import (OFF_DATA_HEAD, OFF_DATA_OFFSET, OFF_DATA_SIZE, OFF_DATA_TAIL,
                                 parse_records)
        u64 = lambda off: ctypes.c_uint64.from_address(addr + off).value  # noqa: E731
        head, tail = u64(OFF_DATA_HEAD), u64(OFF_DATA_TAIL)
        if "samples" not in want:
            return {"head": head}
        size = u64(OFF_DATA_SIZE)
        data = ctypes.string_at(addr + u64(OFF_DATA_OFFSET), size) if size else b""
        try:
            records = parse_records(data, size, tail, head) if size else []
        except Exception as e:  # noqa: BLE001 - a torn ring is an observation
            return {"head": head, "error": f"{type(e).__name__}: {e}"}
        return {"head": head,
                "samples": sum(r.type == perf_abi.PERF_RECORD_SAMPLE for r in records),
                "lost": sum(r.u64(1) for r in records if r.type == perf_abi.PERF_RECORD_LOST)}

    def end(self, expected: dict) -> dict:
        """VmPin with everything undone, then the user's whole allowance mapped without
        CAP_IPC_LOCK and with RLIMIT_MEMLOCK 0: any page it cannot have is a charge the
        sequence never got back."""
        from perf_events import allowance_sizes, module_refs, open_dummy, vm_pin_kb
        from perf_buffer import RingBuffer
        pinned = vm_pin_kb()
        refs = ({"pmu_refs": (module_refs(TEST_PMU) or 0) - self.pmu_refs}
                if "pmu_refs" in expected else {})
        self.set_caps(())
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
        limit = self.cfg["mlock_kb"] // (self.page // 1024) * self.cfg["ncpus"]
        held, verdict = [], "ok"
        try:
            for size in allowance_sizes(limit):
                fd = open_dummy(perf_abi.ATTR_DISABLED | perf_abi.ATTR_EXCLUDE_KERNEL |
                                perf_abi.ATTR_EXCLUDE_HV)
                try:
                    held.append((fd, RingBuffer(fd, size - 1)))
                except OSError as e:
                    os.close(fd)
                    import probelib
                    verdict = (f"{probelib.errname(e)} mapping {size} of the {limit} pages "
                               f"of the allowance ({sum(r.length for _, r in held) // self.page}"
                               f" mapped before it)")
                    break
            if verdict == "ok" and vm_pin_kb():
                verdict = f"the allowance pinned {vm_pin_kb()} kB"
        finally:
            for fd, rb in held:
                rb.close()
                os.close(fd)
        return {"vm_pin_kb": pinned, "allowance": verdict, **refs}


PATHS = {"perf-ring": PerfWorld, "perf-aux": PerfWorld, "pinning": PerfWorld}
@contextmanager
def sysctls(values: dict[str, object]) -> Iterator[None]:
    """/proc/sys/kernel/NAME = value for the duration; what was there put back."""
    saved = {}
    try:
        for name, value in values.items():
            path = f"/proc/sys/kernel/{name}"
            if not os.path.exists(path):
                continue
            saved[path] = open(path).read().strip()
            with open(path, "w") as f:
                f.write(str(value))
        yield
    finally:
        for path, value in reversed(saved.items()):
            with open(path, "w") as f:
                f.write(value)


def _reload_revoked_pmu() -> None:
    """A sequence that unregistered the test PMU (`revoke`) leaves its module loaded and the
    PMU gone: with every event of that sequence freed, the module is unloaded and loaded
    again, so the next sequence has the PMU. Where that fails the PMU stays gone (has_pmu
    False) and the sequences go on without it."""
    import subprocess
    import time
    if not os.path.exists(UNREGISTER) or \
            os.path.exists(f"/sys/bus/event_source/devices/{TEST_PMU}"):
        return
    for _ in range(20):     # the last event's free may still be on its way (RCU)
        if subprocess.run(["rmmod", TEST_PMU], capture_output=True).returncode == 0:
            break
        time.sleep(0.05)
    if os.path.exists(TEST_PMU_KO):
        subprocess.run(["insmod", TEST_PMU_KO], capture_output=True)


def _tracepoint_id() -> int | None:
    try:
        from perf_events import tracepoint_id
        return tracepoint_id()
    except Exception:  # noqa: BLE001 - probelib.Skip: no such tracepoint
        return None
