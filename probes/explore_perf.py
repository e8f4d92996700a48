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
from contextlib import contextmanager
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

SAMPLE = 32                   # the probes' sample: header + IDENTIFIER, TID, TIME
LOST_RECORD = 24              # PERF_RECORD_LOST: header, id, lost (no sample_id_all)
SIZES = (1, 2, 3, 5, 9, 4, 6)  # pages of a data mapping: 1 + 2^n, and two that are not
AUX_SIZES = (1, 2, 4, 3)
MADVICE = ("dofork", "dontfork", "dontdump", "wipeonfork")
MREMAPS = ("move", "grow", "shrink", "dontunmap")
FIRES = (1, 4, 20, 150)
POKE_OFFSET = 512            # in perf_event_mmap_page's __reserved: a store there is harmless

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


def ref_id(a: object) -> int | None:
    """The step id an "@ID" argument names."""
    return int(a[1:]) if isinstance(a, str) and a.startswith("@") else None


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
    head: int = 0
    tail: int = 0
    lost: int = 0             # rb->lost: samples dropped, not yet reported
    samples: int = 0          # SAMPLE records in [tail, head)
    paused: bool = False      # rb->paused (PERF_EVENT_IOC_PAUSE_OUTPUT): a sample is lost
    lost_reported: int = 0    # sum of PERF_RECORD_LOST counts in [tail, head)

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
            self.head += SAMPLE + (LOST_RECORD if self.lost else 0)
            self.lost = 0
            return
        need = SAMPLE + (LOST_RECORD if self.lost else 0)
        if self.data_size - (self.head - self.tail) - 1 >= need:   # CIRC_SPACE >= size
            self.head += need
            self.samples += 1
            self.lost_reported += self.lost
            self.lost = 0
        else:
            self.lost += 1


@dataclass
class Event:
    kind: str                 # dummy (software), tp (getppid tracepoint), pmu (ringlab_aux)
    fd_open: bool = True
    rb: int | None = None     # the id of its ring buffer


@dataclass
class Vma:
    event: int
    rb: int
    kind: str                 # data or aux
    pages: int
    writable: bool
    copies_on_fork: bool = False
    live: bool = True


@dataclass
class PerfModel:
    """What the ABI says after each step. Objects are named by the id of the step that made
    them ("@3" in a later step's arguments)."""
    path: str
    setup: dict
    events: dict[int, Event] = field(default_factory=dict)
    rbs: dict[int, Rb] = field(default_factory=dict)
    vmas: dict[int, Vma] = field(default_factory=dict)
    perf_mlock: int = 0       # the sequence's own user: it starts at 0
    pinned: int = 0
    traits: set[str] = field(default_factory=set)   # what the sequence did, for known issues

    @property
    def page(self) -> int:
        return self.setup["page_size"]

    @property
    def limit(self) -> int:
        """perf_event_mlock_kb x online CPUs, in pages (perf_mmap_calc_limits())."""
        return self.setup["mlock_kb"] // (self.page // 1024) * self.setup["ncpus"]

    # --- references ---
    def event(self, step: dict) -> Event | None:
        i = ref_id(step["args"][0])
        return self.events.get(i) if i is not None else None

    def ev(self, step: dict) -> Event:
        """The event a valid step names."""
        e = self.event(step)
        assert e is not None, step
        return e

    def rb(self, e: Event) -> Rb:
        assert e.rb is not None, e
        return self.rbs[e.rb]

    def vma(self, step: dict) -> Vma | None:
        i = ref_id(step["args"][0])
        v = self.vmas.get(i) if i is not None else None
        return v if v is not None and v.live else None

    def vm(self, step: dict) -> Vma:
        v = self.vma(step)
        assert v is not None, step
        return v

    def rw_data_vma(self, rb: int | None) -> int | None:
        for sid, v in sorted(self.vmas.items()):
            if v.live and v.rb == rb and v.kind == "data" and v.writable:
                return sid
        return None

    def valid(self, step: dict) -> bool:
        op = step["op"]
        if op in ("open", "fork", "fire"):
            return op != "fire" or any(e.kind == "tp" for e in self.events.values())
        if op in ("close", "mmap", "pause"):
            e = self.event(step)
            return e is not None and e.fd_open
        if op == "aux":
            e = self.event(step)
            return e is not None and e.fd_open and self.rw_data_vma(e.rb) is not None
        v = self.vma(step)
        if v is None:
            return False
        if op in ("munmap-part",) or op == "mremap" and step["args"][1] == "shrink":
            return v.pages > 1
        if op == "consume":
            return v.kind == "data" and v.writable
        if op == "poke":
            return step["args"][1] < v.pages
        return True

    # --- the rules ---
    def charge(self, pages: int) -> tuple[bool, int, int]:
        """(allowed, pages to perf_mlock, pages to pinned_vm): perf_mmap_calc_limits()."""
        user_locked = min(self.perf_mlock, self.limit) + pages
        extra = max(0, user_locked - self.limit)
        exempt = self.setup["who"] == "user+ipc_lock"
        allowed = self.pinned + extra <= self.setup["rlimit_pages"] or exempt
        return allowed, pages - extra, extra

    def expect(self, step: dict) -> frozenset[str]:
        op, args = step["op"], step["args"]
        if op == "mmap":
            pages, prot, share = args[1], args[2], args[3]
            if share == "private" or (pages - 1 != 0 and not pow2(pages - 1)):
                return frozenset({"EINVAL"})
            e = self.ev(step)
            if e.rb is not None:
                return frozenset({"ok" if self.rb(e).pages == pages else "EINVAL"})
            return frozenset({"ok" if self.charge(pages)[0] else "EPERM"})
        if op == "aux":
            rb = self.rb(self.ev(step))
            pages = args[1]
            if rb.aux_pages:
                return frozenset({"ok" if pages == rb.aux_pages else "EINVAL"})
            if not pow2(pages):
                return frozenset({"EINVAL"})
            if not self.charge(pages)[0]:
                return frozenset({"EPERM"})
            return frozenset({"ok" if self.ev(step).kind == "pmu" else "EOPNOTSUPP"})
        if op == "poke":
            v = self.vm(step)
            return frozenset({"ok" if v.writable and v.kind == "data" and args[1] == 0
                              else "EFAULT"})
        if op == "pause":
            # perf_ioctl(): an event with no buffer, or one with no data pages: EINVAL
            e = self.ev(step)
            return frozenset({"ok" if e.rb is not None and self.rb(e).pages > 1 else "EINVAL"})
        if op == "munmap-part":
            return frozenset({"EINVAL"})
        if op == "mremap":
            return frozenset({"move": {"ok", "EINVAL"}, "grow": {"EFAULT"},
                              "shrink": {"EINVAL"}, "dontunmap": {"EINVAL"}}[args[1]])
        if op == "fork":
            n = sum(v.live and v.copies_on_fork for v in self.vmas.values())
            return frozenset({f"inherits {n}" if n else "ok"})
        if op == "madvise":
            # MADV_DOFORK: clears VM_DONTCOPY, refused on VM_IO/VM_PFNMAP mappings (7.x maps
            # the buffer with remap_pfn_range()); MADV_WIPEONFORK: private anonymous only.
            return frozenset({"dofork": {"ok", "EINVAL"}, "dontfork": {"ok"},
                              "dontdump": {"ok"}, "wipeonfork": {"EINVAL"}}[args[1]])
        return frozenset({"ok"})

    def apply(self, step: dict, result: str) -> None:
        op, args, sid = step["op"], step["args"], step["id"]
        if result != "ok" and not result.startswith("inherits "):   # a fork's child said so
            return
        if op == "open":
            self.events[sid] = Event(args[0])
        elif op == "close":
            self.ev(step).fd_open = False
            self._drop_dead_events()
        elif op == "mmap":
            e = self.ev(step)
            if e.rb is not None:
                self.traits.add("mapped-again")
            else:
                _, locked, pinned = self.charge(args[1])
                e.rb = sid
                self.rbs[sid] = Rb(args[1], args[2] == "r", self.page, locked=locked,
                                   pinned=pinned)
                self.perf_mlock += locked
                self.pinned += pinned
            self.rb(e).maps += 1
            self.vmas[sid] = Vma(int(args[0][1:]), self.rb_id(e), "data", args[1],
                                 args[2] == "rw")
        elif op == "aux":
            e = self.ev(step)
            rb = self.rb(e)
            if rb.aux_pages:
                self.traits.add("aux-mapped-again")
            else:
                _, rb.aux_locked, rb.aux_pinned = self.charge(args[1])
                rb.aux_pages = args[1]
                self.perf_mlock += rb.aux_locked
                self.pinned += rb.aux_pinned
            rb.aux_maps += 1
            rb.maps += 1
            self.vmas[sid] = Vma(int(args[0][1:]), self.rb_id(e), "aux", args[1], True)
        elif op == "munmap":
            self.unmap(int(args[0][1:]))
        elif op == "fork" and any(v.live and v.copies_on_fork for v in self.vmas.values()):
            self.traits.add("fork-inherits-a-mapping")
        elif op == "mremap":
            self.traits.add("moved")
        elif op == "madvise" and args[1] in ("dofork", "dontfork"):
            self.vm(step).copies_on_fork = args[1] == "dofork"
        elif op == "fire":
            for e in self.events.values():
                if e.kind == "tp" and e.rb is not None:
                    for _ in range(args[0]):
                        self.rb(e).write()
        elif op == "consume":
            rb = self.rbs[self.vm(step).rb]
            rb.tail, rb.samples, rb.lost_reported = rb.head, 0, 0
        elif op == "pause":
            self.rb(self.ev(step)).paused = bool(args[1])

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

    def rb_id(self, e: Event) -> int:
        assert e.rb is not None, e
        return e.rb

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
        rb.maps -= 1
        if rb.maps == 0:
            self.perf_mlock -= rb.locked
            self.pinned -= rb.pinned
            for e in self.events.values():
                if e.rb == v.rb:
                    e.rb = None
            del self.rbs[v.rb]
        self._drop_dead_events()

    def _drop_dead_events(self) -> None:
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
            if not any(e.rb == rid and e.kind == "tp" for e in self.events.values()):
                continue
            out[f"ring@{sid}"] = ({"head": rb.head} if rb.overwrite else
                                 {"head": rb.head, "samples": rb.samples,
                                  "lost": rb.lost_reported})
        return out

    def release(self) -> None:
        for sid in sorted(s for s, v in self.vmas.items() if v.live):
            self.unmap(sid)
        for e in self.events.values():
            e.fd_open = False
        self._drop_dead_events()

    def end(self) -> dict:
        """Everything undone: nothing pinned, and the user's whole allowance maps again
        without pinning a page (what the sequence charged all came back)."""
        return {"vm_pin_kb": 0, "allowance": "ok"}

    # --- generation ---
    def choose(self, rng: random.Random, sid: int) -> dict | None:
        preset = PRESETS[self.path]
        kinds = [k for k in preset["kinds"] if k != "pmu" or self.setup["has_pmu"]]
        kinds = [k for k in kinds if k != "tp" or self.setup["has_tp"]] or ["dummy"]
        open_events = [s for s, e in self.events.items() if e.fd_open]
        live = [s for s, v in self.vmas.items() if v.live]
        options: list[tuple[float, dict]] = [(3 if len(open_events) < 2 else 0.5,
                                              {"op": "open", "args": [rng.choice(kinds)]})]
        for s in open_events:
            e = self.events[s]
            same = self.rb(e).pages if e.rb is not None else None
            pages = same if same and rng.random() < 0.7 else rng.choice(SIZES)
            prot = "r" if rng.random() < 0.15 else "rw"
            share = "private" if rng.random() < 0.05 else "shared"
            options.append((4, {"op": "mmap", "args": [f"@{s}", pages, prot, share]}))
            options.append((0.7, {"op": "close", "args": [f"@{s}"]}))
            if e.kind == "tp":
                options.append((0.6, {"op": "pause", "args": [f"@{s}", rng.choice((1, 0))]}))
            if self.rw_data_vma(e.rb) is not None and preset["aux"]:
                rb = self.rb(e)
                aux = rb.aux_pages if rb.aux_pages and rng.random() < 0.6 else \
                    rng.choice(AUX_SIZES)
                options.append((preset["aux"], {"op": "aux", "args": [f"@{s}", aux]}))
        for s in live:
            v = self.vmas[s]
            options.append((3, {"op": "munmap", "args": [f"@{s}"]}))
            options.append((0.4, {"op": "madvise", "args": [f"@{s}", rng.choice(MADVICE)]}))
            options.append((0.4, {"op": "mremap", "args": [f"@{s}", rng.choice(MREMAPS)]}))
            if v.pages > 1:
                options.append((0.3, {"op": "munmap-part", "args": [f"@{s}"]}))
            if v.kind == "data" and v.writable and self.events.get(v.event, Event("x")).kind \
                    == "tp":
                options.append((1, {"op": "consume", "args": [f"@{s}"]}))
            options.append((0.3, {"op": "poke", "args": [f"@{s}", rng.choice(
                sorted({0, 1, v.pages - 1} & set(range(v.pages))))]}))
        if live:
            options.append((0.6, {"op": "fork", "args": []}))
        if any(e.kind == "tp" and e.rb is not None for e in self.events.values()):
            options.append((3, {"op": "fire", "args": [rng.choice(FIRES + self.overflows())]}))
        options = [(w, o) for w, o in options if w > 0 and self.valid(o)]
        total = sum(w for w, _ in options)
        pick = rng.random() * total
        for w, o in options:
            pick -= w
            if pick <= 0:
                return o
        return options[-1][1]


def replay_traits(model: PerfModel, steps: list[dict]) -> set[str]:
    for step in steps:
        if model.valid(step):
            allowed = model.expect(step)
            model.apply(step, "ok" if "ok" in allowed else min(allowed))
    return model.traits


# --- the calls --------------------------------------------------------------------------------

MADV = {"dofork": 11, "dontfork": 10, "dontdump": 16, "wipeonfork": 18}


class PerfWorld:
    """The calls of PerfModel's operations, in the sequence's child process."""

    @staticmethod
    def model(path: str, setup: dict) -> PerfModel:
        return PerfModel(path, setup)

    @staticmethod
    def traits(path: str, setup: dict, steps: list[dict]) -> set[str]:
        """The model's traits of `steps`, each given the result the model expects."""
        return replay_traits(PerfModel(path, setup), steps)

    @staticmethod
    def simpler(step: dict) -> list[dict]:
        """Simpler forms of a step for the shrinker: a software event, a smaller buffer."""
        op, a = step["op"], step.get("args", [])
        if op == "open" and a[0] != "dummy":
            return [{"args": ["dummy"]}]
        if op == "mmap" and a[1] > 2:
            return [{"args": [a[0], n, a[2], a[3]]} for n in (1, 2, 3, 5) if n < a[1]]
        if op == "fire" and a[0] > 1:
            return [{"args": [n]} for n in (1, 4, 20) if n < a[0]]
        return []

    @staticmethod
    def missing(path: str) -> str | None:
        if not os.path.exists("/proc/sys/kernel/perf_event_paranoid"):
            return "this kernel has no perf events (CONFIG_PERF_EVENTS)"
        if path == "perf-aux" and not os.path.exists(
                "/sys/bus/event_source/devices/ringlab_aux"):
            return "the test PMU ringlab_aux is not loaded (kernels/modules/ringlab_aux)"
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
        env = {"page_size": page, "ncpus": os.sysconf("SC_NPROCESSORS_ONLN"),
               "mlock_kb": setup["mlock_pages"] * page // 1024,
               "has_pmu": os.path.exists("/sys/bus/event_source/devices/ringlab_aux"),
               "tp_id": _tracepoint_id()}
        env["has_tp"] = env["tp_id"] is not None
        with sysctls({"perf_event_mlock_kb": env["mlock_kb"], "perf_event_paranoid": 1}):
            yield env

    @staticmethod
    @contextmanager
    def session(path: str) -> Iterator[None]:
        """For a whole explore: no sample-rate lowering (under TCG the kernel would lower
        perf_event_max_sample_rate and throttle the rings the model counts)."""
        with sysctls({"perf_event_max_sample_rate": 100000, "perf_cpu_time_max_percent": 0}):
            yield

    def __init__(self, path: str, setup: dict, uid: int) -> None:
        from probe_pinning import set_effective_caps
        self.cfg, self.page = setup, setup["page_size"]
        self.fds: dict[int, int] = {}
        # id: addr, length, the event's id (not its fd: a closed fd's number comes back with
        # the next open), and whether it is a writable data mapping (its control page takes
        # aux_offset and data_tail; an AUX page written gives SIGBUS)
        self.vmas: dict[int, tuple[int, int, int, bool]] = {}
        self.stray: list[tuple[int, int]] = []
        rl = setup["rlimit_pages"] * self.page
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (rl, rl))
        self.uid = uid
        os.setgroups([])
        os.setresgid(uid, uid, 0)
        os.setresuid(uid, uid, 0)   # effective capabilities cleared, permitted kept
        self.set_caps = set_effective_caps
        if setup["who"] == "user+ipc_lock":
            set_effective_caps((14,))   # CAP_IPC_LOCK

    def _fd(self, a: str) -> int:
        return self.fds[int(a[1:])]

    def do(self, step: dict) -> str:
        try:
            return getattr(self, "op_" + step["op"].replace("-", "_"))(step["id"], *step["args"])
        except OSError as e:
            import probelib
            return probelib.errname(e)

    def op_open(self, sid: int, kind: str) -> str:
        import perf_abi as perf
        from perf_events import SAMPLE_TYPE, open_dummy
        from probe_pinning import open_test_pmu_task
        if kind == "tp":   # the id was read as root: tracefs is root's
            a = perf.attr(perf.PERF_TYPE_TRACEPOINT, self.cfg["tp_id"], 0)
            a.sample_period = 1
            a.sample_type = SAMPLE_TYPE
            fd = perf.perf_event_open(a, 0, -1)
        elif kind == "pmu":
            fd = open_test_pmu_task()
        else:
            fd = open_dummy(perf.ATTR_DISABLED | perf.ATTR_EXCLUDE_KERNEL | perf.ATTR_EXCLUDE_HV)
        self.fds[sid] = fd
        return "ok"

    def op_close(self, sid: int, e: str) -> str:
        os.close(self.fds.pop(int(e[1:])))
        return "ok"

    def op_pause(self, sid: int, e: str, pause: int) -> str:
        import perf_abi as perf
        fcntl.ioctl(self._fd(e), perf.PERF_EVENT_IOC_PAUSE_OUTPUT, pause)
        return "ok"

    def _mmap(self, sid: int, event: int, length: int, rw: bool, shared: bool,
              offset: int) -> str:
        from probelib import errno_result, libc, mapped
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if rw else 0)
        addr = libc.mmap(None, length, prot, mmap.MAP_SHARED if shared else mmap.MAP_PRIVATE,
                         self.fds[event], offset)
        if not mapped(addr):
            return errno_result(False)
        self.vmas[sid] = (addr, length, event, rw and offset == 0)
        return "ok"

    def op_mmap(self, sid: int, e: str, pages: int, prot: str, share: str) -> str:
        return self._mmap(sid, int(e[1:]), pages * self.page, prot == "rw", share == "shared",
                          0)

    def op_aux(self, sid: int, e: str, pages: int) -> str:
        """aux_offset (right past the data buffer) and aux_size into the control page of a
        writable data mapping of the event's buffer, then the mmap at that offset."""
        import perf_abi as perf
        event = int(e[1:])
        addr, length = next((a, n) for a, n, ev, rw in list(self.vmas.values())
                            if ev == event and rw)
        ctl = perf.PerfEventMmapPage.from_address(addr)
        ctl.aux_offset, ctl.aux_size = length, pages * self.page
        return self._mmap(sid, event, pages * self.page, True, True, length)

    def op_munmap(self, sid: int, m: str) -> str:
        from probelib import errno_result, libc
        addr, length, _, _ = self.vmas[int(m[1:])]
        r = errno_result(libc.munmap(ctypes.c_void_p(addr), length) == 0)
        if r == "ok":
            del self.vmas[int(m[1:])]
        return r

    def op_munmap_part(self, sid: int, m: str) -> str:
        from probelib import errno_result, libc
        addr, length, _, _ = self.vmas[int(m[1:])]
        return errno_result(libc.munmap(ctypes.c_void_p(addr + length - self.page),
                                        self.page) == 0)

    def op_mremap(self, sid: int, m: str, how: str) -> str:
        """A move keeps the mapping (at its new address); what a resize the model refuses
        made anyway is undone at the end (the step already failed)."""
        import probelib
        addr, length, fd, rw = self.vmas[int(m[1:])]
        r, new, new_len = probelib.remap(addr, length, how)
        if r == "ok" and how == "move":
            self.vmas[int(m[1:])] = (new, length, fd, rw)
        elif r == "ok":
            self.stray.append((new, new_len))
        return r

    def op_madvise(self, sid: int, m: str, advice: str) -> str:
        from probelib import errno_result, libc
        addr, length, _, _ = self.vmas[int(m[1:])]
        return errno_result(libc.madvise(ctypes.c_void_p(addr), length, MADV[advice]) == 0)

    def op_fork(self, sid: int) -> str:
        """A child that reads the first byte of every mapping it inherited and says how many
        (VM_DONTCOPY: none unless MADV_DOFORK let it through)."""
        import probelib
        return probelib.fork_inheriting([(a, n) for a, n, _, _ in self.vmas.values()])

    def op_poke(self, sid: int, m: str, page: int) -> str:
        """A zero byte stored into the page (at offset 512: the control page's reserved
        area) by read() from /dev/zero: the kernel's store faults as a user store would,
        and a refused one is EFAULT, not a signal."""
        from probelib import errno_result, libc
        addr = self.vmas[int(m[1:])][0] + page * self.page + POKE_OFFSET
        fd = os.open("/dev/zero", os.O_RDONLY)
        try:
            return errno_result(libc.read(fd, ctypes.c_void_p(addr), 1) == 1)
        finally:
            os.close(fd)

    def op_fire(self, sid: int, n: int) -> str:
        for _ in range(n):
            os.getppid()
        return "ok"

    def op_consume(self, sid: int, m: str) -> str:
        from perf_buffer import OFF_DATA_HEAD, OFF_DATA_TAIL
        addr = self.vmas[int(m[1:])][0]
        head = ctypes.c_uint64.from_address(addr + OFF_DATA_HEAD).value
        ctypes.c_uint64.from_address(addr + OFF_DATA_TAIL).value = head
        return "ok"

    def observe(self, expected: dict) -> dict:
        from perf_events import vm_pin_kb
        out: dict = {}
        for key in expected:
            if key == "vm_pin_kb":
                out[key] = vm_pin_kb()
            elif key.startswith("ring@"):
                out[key] = self._ring(self.vmas[int(key[5:])][0], expected[key])
            elif key.startswith("ctl@"):
                from perf_buffer import OFF_DATA_OFFSET, OFF_DATA_SIZE
                addr = self.vmas[int(key[4:])][0]
                out[key] = {"data_offset": ctypes.c_uint64.from_address(
                    addr + OFF_DATA_OFFSET).value, "data_size": ctypes.c_uint64.from_address(
                    addr + OFF_DATA_SIZE).value}
        return out

    def _ring(self, addr: int, want: dict) -> dict:
        import perf_abi as perf
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
                "samples": sum(r.type == perf.PERF_RECORD_SAMPLE for r in records),
                "lost": sum(r.u64(1) for r in records if r.type == perf.PERF_RECORD_LOST)}

    def release(self) -> None:
        from probelib import libc
        for addr, length, _, _ in self.vmas.values():
            libc.munmap(ctypes.c_void_p(addr), length)
        for addr, length in self.stray:
            libc.munmap(ctypes.c_void_p(addr), length)
        for fd in self.fds.values():
            os.close(fd)
        self.vmas, self.stray, self.fds = {}, [], {}

    def end(self, expected: dict) -> dict:
        """VmPin with everything undone, then the user's whole allowance mapped without
        CAP_IPC_LOCK and with RLIMIT_MEMLOCK 0: any page it cannot have is a charge the
        sequence never got back."""
        import perf_abi as perf
        from perf_events import allowance_sizes, open_dummy, vm_pin_kb
        from perf_buffer import RingBuffer
        pinned = vm_pin_kb()
        self.set_caps(())
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
        limit = self.cfg["mlock_kb"] // (self.page // 1024) * self.cfg["ncpus"]
        held, verdict = [], "ok"
        try:
            for size in allowance_sizes(limit):
                fd = open_dummy(perf.ATTR_DISABLED | perf.ATTR_EXCLUDE_KERNEL |
                                perf.ATTR_EXCLUDE_HV)
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
        return {"vm_pin_kb": pinned, "allowance": verdict}


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


def _tracepoint_id() -> int | None:
    try:
        from perf_events import tracepoint_id
        return tracepoint_id()
    except Exception:  # noqa: BLE001 - probelib.Skip: no such tracepoint
        return None
