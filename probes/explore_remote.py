"""The trace-remote path for probe_explore.py: a ring buffer written outside the tracing core
(a hypervisor's, firmware's; here the test remote of CONFIG_TRACE_REMOTE_TEST, remote_test.ko)
and read by the kernel through the meta page and reader swap of trace_mmap.h, shown under
tracefs remotes/test (7.x). The model's rules, from kernel/trace/trace_remote.c,
remote_test.c and simple_ring_buffer.c (7.3~rc7) and Documentation/trace/remotes.rst:
- the buffer is loaded by tracing_on 1 and by a trace_pipe reader (trace_remote_get()), and
  unloaded once tracing is off, no reader holds it and it is empty (trace_remote_try_unload());
  `buffer_size_kb` reads "N (loaded)" or "N (unloaded)";
- buffer_size_kb: 0 EINVAL, EBUSY while loaded, else the size of the next load;
- write_event (an event id=N on the writer's CPU) is ENODEV unless the event is enabled and
  tracing is on (the remote writes only then: simple_ring_buffer_reserve());
- a consuming read (trace_pipe, or per_cpu/cpu0/trace_pipe) takes each event once, in order,
  and skips none that it did not say lost ("CPU:0 [LOST K EVENTS]": the reader swap's
  reader.lost_events); `trace` (not consuming) shows them in order and loads nothing;
- writing `trace` empties the buffer (trace_remote_reset());
- user space maps none of it: mmap() of `trace` is ENODEV (no mmap in its fops).
A fifth path is this one file: its model, its operations (each with its Python and C forms)
and its reproducers' frame (py_frame(), c_frame(), harness/explore/c/remote.h). Stdlib only.
"""
from __future__ import annotations

import os
import random
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from explore_ops import Args, Model, Op, World, close_forms, ref_id

REMOTE = "remotes/test"
SIZES_KB = (7, 16)
WRITES = (1, 8, 200, 1000)      # 1000 events of ~24 bytes overrun a 7 or 16 KiB buffer
IDLE_S = 0.15       # a consuming read stops after this long with nothing (it blocks when empty)
EVENT = re.compile(r"^\[(\d+)\]\s+(\d+)\.(\d+): selftest id=(\d+)$")
LOST = re.compile(r"^CPU:(\d+) \[LOST (\d+) EVENTS\]$")
PIPES = {"all": "trace_pipe", "cpu0": "per_cpu/cpu0/trace_pipe"}


@dataclass
class RemoteModel(Model):
    path: str
    setup: dict
    size_kb: int = 0
    tracing_on: bool = False
    enabled: bool = False
    readers: dict[int, str] = field(default_factory=dict)     # open trace_pipe: id -> which
    loaded: bool | None = False   # None: the model cannot say (events may be left unread)
    # Events in the buffer: 0 certainly none, >0 certainly some, None: the model cannot say
    # (a consuming read takes what the kernel has polled from the remote so far).
    unread: int | None = 0
    took: int | None = None       # the last step was a consuming read through this reader
    shown: bool = False           # the last step read `trace`
    traits: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.size_kb = self.setup["size_kb"]

    def try_unload(self) -> None:
        """trace_remote_try_unload(): off, no reader and empty: the buffer goes."""
        if self.readers or self.tracing_on or self.loaded is False:
            return
        self.loaded = False if self.unread == 0 else None if self.unread is None else True

    def open_files(self) -> int:
        return len(self.readers)

    def live_vmas(self) -> list:
        return []

    def apply(self, step: dict, result: str) -> None:
        self.took, self.shown = None, False
        super().apply(step, result)

    def observe(self) -> dict:
        """After every step, buffer_size_kb: the size and whether it is loaded (where the
        model knows); after a consuming read, the events it took; after `show`, their order."""
        out: dict = {}
        if self.loaded is not None:
            out["state@0"] = {"kb": self.size_kb, "loaded": self.loaded}
        if self.took is not None:
            out[f"events@{self.took}"] = {"twice": 0, "unaccounted": 0}
        if self.shown:
            out["shown@0"] = {"in_order": True, "stale": 0}
        return out

    def release(self) -> None:
        self.readers.clear()

    def end(self) -> dict:
        """Everything closed, tracing off, the buffer emptied: unloaded."""
        return {"state@0": {"kb": self.size_kb, "loaded": False}}


@dataclass
class Tally:
    """The events written (numbered 1, 2, ... as their id) and what the consuming readers took:
    each one new (`twice` counts one taken again) and the ids skipped at most what the
    readers were told was lost (`unaccounted`). `forgot`: written before a reset."""
    marks: int = 0
    forgot: int = 0
    last: int = 0
    twice: int = 0
    missing: int = 0
    lost: int = 0

    def took(self, lines: list[str]) -> bool:
        """The lines of a consuming read; whether it had any event."""
        any_event = False
        for line in lines:
            if (m := LOST.match(line)):
                self.lost += int(m.group(2))
            elif (m := EVENT.match(line)):
                any_event = True
                n = int(m.group(4))
                if n <= self.forgot:
                    continue
                if n <= self.last:
                    self.twice += 1
                    continue
                self.missing += n - max(self.last, self.forgot) - 1
                self.last = n
        return any_event

    def unaccounted(self) -> int:
        return max(0, self.missing - self.lost)

    def consumed(self, ids: list[int]) -> int:
        """How many of `ids` (shown by `trace`) a consuming read took already (written since
        the last reset, at most the last id taken: those below it it took or was told lost)."""
        return sum(self.forgot < n <= self.last for n in ids)


# --- the operations -------------------------------------------------------------------------

def _write_file(path: str, value: str) -> str:
    import tracefs
    return tracefs.write_file(path, value)


def _setting(name: str, file: str, values: tuple[int, ...], weight: float, rule: str) -> Op:
    """A 0/1 file of the remote (tracing_on, the selftest event's enable)."""
    def apply(m: RemoteModel, sid: int, a: Args) -> None:
        if name == "on":
            if a["value"] and not m.tracing_on:
                m.loaded = True
            was, m.tracing_on = m.tracing_on, bool(a["value"])
            if was and not a["value"]:
                m.try_unload()
        else:
            m.enabled = bool(a["value"])
    return Op(
        name, ("value",),
        draw=lambda m, rng: [(weight, {"value": rng.choice(values)})],
        pre=lambda m, a: a["value"] in values, expect=lambda m, a: frozenset({"ok"}),
        apply=apply,
        call=lambda w, sid, a: _write_file(f"{w.root}/{file}", f"{a['value']}\n"),
        py=lambda s: [f"got = rw({file!r}, {s['value']})"],
        c=lambda s: [f'got = rw("{file}", "{s["value"]}\\n");'],
        rule=rule)


ON = _setting("on", "tracing_on", (1, 0), 1.5,
              "tracing_on 1 loads the buffer and lets the remote write; 0 stops it, and the "
              "buffer goes once no reader holds it and it is empty (trace_remote_enable_tracing(), "
              "trace_remote_disable_tracing(), trace_remote_try_unload())")
ENABLE = _setting("enable", "events/test/selftest/enable", (1, 0), 1,
                  "the selftest event's enable: the remote writes it only while enabled "
                  "(remote_test.c write_event_write())")


def _expect_size(m: RemoteModel, a: Args) -> frozenset[str]:
    if a["kb"] == 0:
        return frozenset({"EINVAL"})
    if m.loaded is None:
        return frozenset({"ok", "EBUSY"})
    return frozenset({"EBUSY" if m.loaded else "ok"})


SIZE = Op(
    "size", ("kb",),
    draw=lambda m, rng: [(1, {"kb": rng.choice((0,) + SIZES_KB)})],
    pre=lambda m, a: a["kb"] in (0,) + SIZES_KB, expect=_expect_size,
    apply=lambda m, sid, a: setattr(m, "size_kb", a["kb"]),
    call=lambda w, sid, a: _write_file(f"{w.root}/buffer_size_kb", f"{a['kb']}\n"),
    py=lambda s: [f"got = rw('buffer_size_kb', {s['kb']})"],
    c=lambda s: [f'got = rw("buffer_size_kb", "{s["kb"]}\\n");'],
    simpler=lambda a: [{"kb": k} for k in SIZES_KB if k != a["kb"]][:1],
    rule="buffer_size_kb: 0 EINVAL, EBUSY while the buffer is loaded, else the size of the "
         "next load (buffer_size_kb_write(), trace_remote_loaded(); mutant 057)")


def _apply_write(m: RemoteModel, sid: int, a: Args) -> None:
    m.unread = (m.unread or 0) + a["n"]


def _call_write(w: RemoteWorld, sid: int, a: Args) -> str:
    for _ in range(a["n"]):
        got = _write_file(f"{w.root}/write_event", f"{w.tally.marks + 1}\n")
        if got != "ok":
            return got
        w.tally.marks += 1
    return "ok"


WRITE = Op(
    "write", ("n",),
    draw=lambda m, rng: [(4 if m.tracing_on and m.enabled else 1, {"n": rng.choice(WRITES)})],
    pre=lambda m, a: a["n"] > 0,
    expect=lambda m, a: frozenset({"ok" if m.enabled and m.tracing_on else "ENODEV"}),
    apply=_apply_write, call=_call_write,
    py=lambda s: [f"got = write_events({s['n']})"],
    c=lambda s: [f"got = write_events({s['n']});"],
    simpler=lambda a: [{"n": n} for n in WRITES if n < a["n"]],
    rule="write_event: events id=1, 2, ... on CPU 0, ENODEV unless the event is enabled and "
         "tracing is on (remote_test.c write_event_write(), simple_ring_buffer_reserve())")


def _apply_open(m: RemoteModel, sid: int, a: Args) -> None:
    m.readers[sid] = a["which"]
    m.loaded = True


def _call_open(w: RemoteWorld, sid: int, a: Args) -> str:
    w.fds[sid] = os.open(f"{w.root}/{PIPES[a['which']]}", os.O_RDONLY)
    return "ok"


OPEN = Op(
    "open", ("which",),
    draw=lambda m, rng: [(2 if len(m.readers) < 2 else 0.3, {"which": rng.choice(tuple(PIPES))})],
    pre=lambda m, a: a["which"] in PIPES, expect=lambda m, a: frozenset({"ok"}),
    apply=_apply_open, call=_call_open,
    py=lambda s: [f"fd[{s.id}] = os.open(f'{{remote}}/{PIPES[s['which']]}', os.O_RDONLY)",
                  "got = 'ok'"],
    c=lambda s: [f'snprintf(path, sizeof(path), "%s/{PIPES[s["which"]]}", remote);',
                 f"fd[{s.id}] = open(path, O_RDONLY);", f"got = res(fd[{s.id}] >= 0);"],
    simpler=lambda a: [{"which": "all"}] if a["which"] != "all" else [],
    rule="open() of trace_pipe (all CPUs) or per_cpu/cpu0/trace_pipe: a reader, which loads "
         "the buffer and holds it loaded (trace_pipe_open(), trace_remote_get())")


def _has_reader(m: RemoteModel, a: Args) -> bool:
    return ref_id(a["fd"]) in m.readers


def _apply_close(m: RemoteModel, sid: int, a: Args) -> None:
    del m.readers[ref_id(a["fd"]) or 0]
    m.try_unload()


def _call_close(w: RemoteWorld, sid: int, a: Args) -> str:
    os.close(w.fds.pop(ref_id(a["fd"]) or 0))
    return "ok"


CLOSE = Op(
    "close", ("fd",), refs=("fd",),
    draw=lambda m, rng: [(1, {"fd": f"@{s}"}) for s in m.readers],
    pre=_has_reader, expect=lambda m, a: frozenset({"ok"}),
    apply=_apply_close, call=_call_close,
    py=close_forms("fd")[0], c=close_forms("fd")[1],
    rule="the reader goes; the buffer with it if tracing is off and it is empty "
         "(trace_pipe_release(), trace_remote_put())")


def _apply_read(m: RemoteModel, sid: int, a: Args) -> None:
    m.took = ref_id(a["fd"])
    m.traits.add("consumed")    # known issue trace-remote-trace-shows-consumed-events
    if m.unread != 0:
        m.unread = None


def read_idle(fd: int) -> bytes:
    """What a consuming read returns until it has had nothing for IDLE_S: the file blocks
    when empty and ignores O_NONBLOCK, so an alarm ends the wait. libc's read() with a
    handler that does nothing (Python's handlers interrupt, no SA_RESTART): the alarm makes
    it return EINTR, and no exception can land between a read and keeping its bytes."""
    import ctypes
    from probelib import libc
    buf = ctypes.create_string_buffer(65536)
    old = signal.signal(signal.SIGALRM, lambda signum, frame: None)
    data = b""
    try:
        while True:
            signal.setitimer(signal.ITIMER_REAL, IDLE_S)
            n = libc.read(fd, buf, len(buf))
            signal.setitimer(signal.ITIMER_REAL, 0)
            if n <= 0:
                break
            data += buf.raw[:n]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return data


def _call_read(w: RemoteWorld, sid: int, a: Args) -> str:
    lines = read_idle(w.fd(a["fd"])).decode(errors="replace").splitlines()
    return "ok" if w.tally.took(lines) else "empty"


READ = Op(
    "read", ("fd",), refs=("fd",), answers=("empty",),
    draw=lambda m, rng: [(3 if m.unread else 1, {"fd": f"@{s}"}) for s in m.readers],
    pre=_has_reader,
    expect=lambda m, a: frozenset({"empty"} if m.unread == 0 else {"ok", "empty"}),
    apply=_apply_read, call=_call_read,
    py=lambda s: [f"got = read_taking(fd[{s.ref('fd')}])"],
    c=lambda s: [f"got = read_taking(fd[{s.ref('fd')}]);"],
    rule="a consuming read takes each event once, in order, and skips none the reader swap "
         "did not count lost (\"CPU:0 [LOST K EVENTS]\", reader.lost_events); with nothing "
         "written it has nothing (trace_pipe_read(), simple_ring_buffer_swap_reader_page(); "
         "mutant 056)")


def _apply_show(m: RemoteModel, sid: int, a: Args) -> None:
    m.shown = True
    if m.loaded:
        m.try_unload()      # its reader came and went (trace_release(), trace_remote_put())


def _call_show(w: RemoteWorld, sid: int, a: Args) -> str:
    import tracefs
    ids = [int(mt.group(4)) for line in tracefs.read_file(f"{w.root}/trace").splitlines()
           if (mt := EVENT.match(line))]
    w.shown_in_order = all(x < y for x, y in zip(ids, ids[1:]))
    w.shown_stale = w.tally.consumed(ids)
    return "ok"


SHOW = Op(
    "show", (),
    draw=lambda m, rng: [(0.7, {})],
    pre=lambda m, a: True, expect=lambda m, a: frozenset({"ok"}),
    apply=_apply_show, call=_call_show,
    py=lambda s: ["got = show()"], c=lambda s: ["got = show();"],
    rule="`trace` (not consuming) shows the events in order, none a consuming read took "
         "(stale), and loads nothing (trace_open(), trace_remote_iter(): TRI_NONCONSUMING; "
         "known issue trace-remote-trace-shows-consumed-events)")


def _apply_reset(m: RemoteModel, sid: int, a: Args) -> None:
    if m.loaded is not False:
        m.unread = 0
    m.try_unload()


def _call_reset(w: RemoteWorld, sid: int, a: Args) -> str:
    got = _write_file(f"{w.root}/trace", "\n")
    if got == "ok":
        w.tally.forgot = w.tally.marks
    return got


RESET = Op(
    "reset", (),
    draw=lambda m, rng: [(0.6, {})],
    pre=lambda m, a: True, expect=lambda m, a: frozenset({"ok"}),
    apply=_apply_reset, call=_call_reset,
    py=lambda s: ["got = rw('trace', '')", "forget()"],
    c=lambda s: ['got = rw("trace", "\\n");', "tally_forget();"],
    rule="writing `trace` empties the buffer, which then goes if tracing is off and no reader "
         "holds it (trace_write(), trace_remote_reset())")


def _call_mmap(w: RemoteWorld, sid: int, a: Args) -> str:
    import ctypes
    import mmap
    from probelib import libc, libc_error, mapped
    fd = os.open(f"{w.root}/trace", os.O_RDONLY)
    try:
        addr = libc.mmap(None, mmap.PAGESIZE, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if not mapped(addr):
            raise libc_error()
        libc.munmap(ctypes.c_void_p(addr), mmap.PAGESIZE)
        return "ok"
    finally:
        os.close(fd)


MMAP = Op(
    "mmap", (),
    draw=lambda m, rng: [(0.3, {})],
    pre=lambda m, a: True, expect=lambda m, a: frozenset({"ENODEV"}),
    apply=lambda m, sid, a: None, call=_call_mmap,
    py=lambda s: ["f_ = os.open(f'{remote}/trace', os.O_RDONLY)",
                  "got = res(mapping(libc.mmap(None, PAGE, 1, 1, f_, 0)))", "os.close(f_)"],
    c=lambda s: ['snprintf(path, sizeof(path), "%s/trace", remote);', "j = open(path, O_RDONLY);",
                 "got = res(mmap(NULL, page, PROT_READ, MAP_SHARED, j, 0) != MAP_FAILED);",
                 "close(j);"],
    rule="user space maps no remote buffer: mmap() of `trace` ENODEV (trace_fops has no "
         "mmap; ring_buffer_map() refuses remote buffers)")

OPS = {op.name: op for op in (ON, ENABLE, SIZE, WRITE, OPEN, CLOSE, READ, SHOW, RESET, MMAP)}
RemoteModel.OPS = OPS


# --- the calls ------------------------------------------------------------------------------

class RemoteWorld(World):
    """The calls of RemoteModel's operations, as root, on CPU 0, on the one test remote."""
    OPS = OPS
    C_SUPPORT = "remote.h"
    MAX_STEPS = 14
    ONE_ACTOR = ("its consuming read ends on an alarm (read_idle), and only the main thread "
                 "can arm one: run it with --actors 1")

    @staticmethod
    def model(path: str, setup: dict) -> RemoteModel:
        return RemoteModel(path, setup)

    @staticmethod
    def missing(path: str) -> str | None:
        import tracefs
        root = tracefs.find_root()
        if root is None:
            return "no tracefs mounted (CONFIG_TRACING)"
        if not os.path.isdir(f"{root}/{REMOTE}"):
            subprocess.run(["modprobe", "remote_test"], capture_output=True)
        if not os.path.isdir(f"{root}/{REMOTE}"):
            return (f"no {root}/{REMOTE}: the kernel has no trace remotes, or no remote_test "
                    "module (CONFIG_TRACE_REMOTE_TEST, 7.x)")
        return None

    @staticmethod
    def setup(path: str, rng: random.Random) -> dict:
        return {"size_kb": rng.choice(SIZES_KB)}

    @staticmethod
    @contextmanager
    def prepared(path: str, setup: dict) -> Iterator[dict]:
        """The remote off, its event disabled, its buffer emptied (so unloaded) and sized;
        the same after."""
        import tracefs
        root = f"{tracefs.find_root()}/{REMOTE}"
        _quiet(root)
        _write_file(f"{root}/buffer_size_kb", f"{setup['size_kb']}\n")
        try:
            yield {"ncpus": os.sysconf("SC_NPROCESSORS_ONLN")}
        finally:
            _quiet(root)

    def __init__(self, path: str, setup: dict, uid: int) -> None:
        import tracefs
        super().__init__()
        self.root = f"{tracefs.find_root()}/{REMOTE}"
        self.tally = Tally()
        self.shown_in_order = True
        self.shown_stale = 0
        os.sched_setaffinity(0, {0})

    def observe(self, expected: dict) -> dict:
        out: dict = {}
        for key in expected:
            kind = key.partition("@")[0]
            if kind == "state":
                out[key] = _state(self.root)
            elif kind == "events":
                out[key] = {"twice": self.tally.twice, "unaccounted": self.tally.unaccounted()}
                if out[key] != expected[key]:
                    out[key].update(written=self.tally.marks, last=self.tally.last,
                                    missing=self.tally.missing, lost=self.tally.lost)
            elif kind == "shown":
                out[key] = {"in_order": self.shown_in_order, "stale": self.shown_stale}
        return out

    @staticmethod
    def py_check(kind: str, sid: int, want: dict) -> list[str]:
        return [f"check('{kind}@{sid}', observe_{kind}, {want!r})"]

    @staticmethod
    def c_check(kind: str, sid: int, want: dict) -> list[str]:
        got = {"kb": "state_kb()", "loaded": "state_loaded()", "twice": "tally.twice",
               "unaccounted": "tally_unaccounted()", "in_order": "shown_in_order", "stale": "shown_stale"}
        return ["check_begin();"] + [f'want("{k}", {got[k]}, {int(v)});' for k, v in want.items()] \
            + [f'check_end("{kind}@{sid}");']

    def end(self, expected: dict) -> dict:
        _quiet(self.root)
        return {"state@0": _state(self.root)}

    # -- the reproducers' frame --
    @staticmethod
    def py_frame(s: dict, end: dict) -> tuple[str, str]:
        """repro.py's set-up and end check; `end`: the model's end state after the steps."""
        return PY_HEAD.format(size_kb=s["size_kb"], idle=IDLE_S, event=EVENT.pattern,
                              lost=LOST.pattern), PY_END.format(size_kb=end["state@0"]["kb"])

    @staticmethod
    def c_frame(s: dict, plan: int, end: dict) -> tuple[str, str]:
        return (f'remote_begin({plan}, "{s["size_kb"]}\\n");',
                f"remote_end({end['state@0']['kb']});")

    END_CHECKS = 2      # unloaded at the end; the kernel log


def _quiet(root: str) -> None:
    """tracing off, the event disabled, the buffer emptied: with no reader, unloaded."""
    for name, value in (("tracing_on", "0\n"), ("events/test/selftest/enable", "0\n"),
                        ("trace", "\n")):
        _write_file(f"{root}/{name}", value)


def _state(root: str) -> dict:
    """buffer_size_kb as read: "7 (loaded)"."""
    import tracefs
    kb, _, how = tracefs.read_file(f"{root}/buffer_size_kb").strip().partition(" ")
    return {"kb": int(kb), "loaded": how == "(loaded)"}


PATHS = {"trace-remote": RemoteWorld}

PY_HEAD = '''
import re, signal  # noqa: E401,E402
remote = "/sys/kernel/tracing/remotes/test"
if not os.path.isdir(remote):
    os.system("modprobe remote_test")
if not os.path.isdir(remote):
    print("# SKIP no tracefs remotes/test (CONFIG_TRACE_REMOTE_TEST)")
    sys.exit(4)
EVENT, LOST = re.compile({event!r}), re.compile({lost!r})
tally = {{"marks": 0, "forgot": 0, "last": 0, "twice": 0, "missing": 0, "lost": 0}}
shown_in_order, shown_stale = True, 0


def rw(name, value):
    return echo(f"{{remote}}/{{name}}", value)


def write_events(n):
    for _ in range(n):
        got = rw("write_event", tally["marks"] + 1)
        if got != "ok":
            return got
        tally["marks"] += 1
    return "ok"


def read_taking(f):
    """A consuming read until it has had nothing for {idle} s (it blocks when empty): libc's
    read(), which the alarm's do-nothing handler ends with EINTR."""
    signal.signal(signal.SIGALRM, lambda *_: None)
    buf, data, t = ctypes.create_string_buffer(65536), b"", tally
    while True:
        signal.setitimer(signal.ITIMER_REAL, {idle})
        n = libc.read(f, buf, len(buf))
        signal.setitimer(signal.ITIMER_REAL, 0)
        if n <= 0:
            break
        data += buf.raw[:n]
    got = "empty"
    for line in data.decode(errors="replace").splitlines():
        if LOST.match(line):
            t["lost"] += int(LOST.match(line).group(2))
        elif EVENT.match(line):
            got, n = "ok", int(EVENT.match(line).group(4))
            if n <= t["forgot"]:
                continue
            if n <= t["last"]:
                t["twice"] += 1
                continue
            t["missing"] += n - max(t["last"], t["forgot"]) - 1
            t["last"] = n
    return got


def forget():
    tally["forgot"] = tally["marks"]


def show():
    global shown_in_order, shown_stale
    ids = [int(m.group(4)) for m in map(EVENT.match, open(f"{{remote}}/trace").read().splitlines())
           if m]
    shown_in_order = all(x < y for x, y in zip(ids, ids[1:]))
    shown_stale = sum(tally["forgot"] < n <= tally["last"] for n in ids)  # taken already
    return "ok"


def observe_state():
    kb, _, how = open(f"{{remote}}/buffer_size_kb").read().strip().partition(" ")
    return {{"kb": int(kb), "loaded": how == "(loaded)"}}


def observe_events():
    t = tally
    return {{"twice": t["twice"], "unaccounted": max(0, t["missing"] - t["lost"])}}


def observe_shown():
    return {{"in_order": shown_in_order, "stale": shown_stale}}


def check(what, observe, want):
    got = observe()
    if got != want:
        print(f"# the model says {{want}}")
    result(got == want, f"{{what}}: {{got}}")


def quiet():
    for name, value in (("tracing_on", 0), ("events/test/selftest/enable", 0), ("trace", "")):
        rw(name, value)


os.sched_setaffinity(0, {{0}})
quiet()
rw("buffer_size_kb", {size_kb})
fd = {{}}
'''

PY_END = '''
for f in fd.values():
    os.close(f)
quiet()
got = observe_state()
result(got == {{"kb": {size_kb}, "loaded": False}}, f"end: off, emptied, no reader -> {{got}}")
'''

