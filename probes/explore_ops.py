"""The explorer's operations as data: each operation is one record (Op), in its path's table
(`OPS` of explore_perf.py, explore_trace.py), and every part of the explorer reads that record:
the engine draws and judges with it (probe_explore.py), the shrinker simplifies with it, both
reproducer generators (harness/explore/) write its Python and C forms, and the unit tests check
that no operation lacks one of them. The shapes are syzkaller's call descriptions (a call is
data: a name and typed, named arguments, here with the rule it obeys) and Hypothesis's stateful
rules (a precondition per rule, objects a step made named by later steps as "@ID", the way a
bundle hands them on); docs/explore.md says why these and not the libraries themselves.

What both worlds do with a mapping (munmap, munmap of a part, mremap, madvise, fork) is here
once, with the Model and World bases both paths extend, and replay(), the one way to feed a
model a sequence. A step is {"id": N, "op": NAME, "args": {PARAM: VALUE}}; steps kept in
format 1 (positional "args") are read through named(). Stdlib only.
"""
from __future__ import annotations

import ctypes
import os
import random
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

FORMAT = 2          # steps with named arguments; 1: positional (read by named())
Args = dict[str, Any]

MADVICE = {"dofork": 11, "dontfork": 10, "dontdump": 16, "wipeonfork": 18}  # asm/mman-common.h
MADVICE_C = {"dofork": "MADV_DOFORK", "dontfork": "MADV_DONTFORK", "dontdump": "MADV_DONTDUMP",
             "wipeonfork": "MADV_WIPEONFORK"}
MREMAPS = ("move", "move", "grow", "shrink", "dontunmap")   # a move is the one that may succeed


def ref_id(a: object) -> int | None:
    """The step id an "@ID" argument names."""
    return int(a[1:]) if isinstance(a, str) and a.startswith("@") else None


@dataclass
class Step:
    """A step as a reproducer generator reads it: its slot (the step id), its named arguments,
    and `made`, the data mappings the program made before it (mapping slot: its event's slot
    and whether it is writable), which a step may consult and extend (an AUX area goes after
    its event's writable data mapping)."""
    op: Op
    args: Args
    id: int
    made: dict[int, tuple[int, bool]] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.args[name]

    def ref(self, name: str) -> int:
        """The slot (fd or mapping) the "@N" argument `name` names."""
        i = ref_id(self.args[name])
        assert i is not None, (self.op.name, name, self.args)
        return i

    @property
    def what(self) -> str:
        return self.op.what(self.args)


def _no_simpler(args: Args) -> list[Args]:
    return []


@dataclass(frozen=True)
class Op:
    """One operation of a path: everything the explorer knows of it, in one place."""
    name: str
    params: tuple[str, ...]         # named arguments, in the order the step is printed
    draw: Callable[[Any, random.Random], list[tuple[float, Args]]]  # (weight, args) offered now
    pre: Callable[[Any, Args], bool]            # its objects exist, in a state it applies to
    expect: Callable[[Any, Args], frozenset[str]]   # the results the ABI allows
    apply: Callable[[Any, int, Args], None]     # the model after it succeeded (step id, args)
    call: Callable[[Any, int, Args], str]       # the world's calls: "ok" or an errno's name
    py: Callable[[Step], list[str]]             # repro.py's lines, leaving the result in `got`
    c: Callable[[Step], list[str]]              # repro.c's statements, likewise
    rule: str                                   # what the ABI says, with its kernel source
    simpler: Callable[[Args], list[Args]] = _no_simpler   # simpler arguments, for the shrinker
    defaults: tuple[tuple[str, Any], ...] = ()  # values a step may leave out (not printed)
    refs: tuple[str, ...] = ()                  # params that name an object ("@ID")
    answers: tuple[str, ...] = ()               # results other than "ok" that are answers

    def full(self, args: Args) -> Args:
        """The arguments with the defaults a step left out (the same dict when it has none)."""
        return {**dict(self.defaults), **args} if self.defaults else args

    def what(self, args: Args) -> str:
        """The step as printed beside its result: "mmap @0 9 rw shared" (a default left out)."""
        full, default = self.full(args), dict(self.defaults)
        words = [str(full[p]) for p in self.params if p not in default or full[p] != default[p]]
        return " ".join([self.name, *words])


def polled(fd: int) -> str:
    """poll() of an fd without waiting, as both worlds' poll step says it: "err", "hup",
    "in", "none", or the events in hex."""
    import select
    p = select.poll()
    p.register(fd, select.POLLIN)
    got = dict(p.poll(0)).get(fd, 0)
    if got & select.POLLERR:
        return "err"
    if got & select.POLLHUP:
        return "hup"
    if got & select.POLLIN:
        return "in"
    return "none" if not got else f"events {got:#x}"


def close_forms(param: str) -> tuple[Callable[[Step], list[str]], Callable[[Step], list[str]]]:
    """The Python and C forms of closing the fd the "@ID" argument `param` names (the same
    in every path; what the close does to the model is the path's own)."""
    return (lambda s: [f"os.close(fd.pop({s.ref(param)}))", "got = 'ok'"],
            lambda s: [f"close(fd[{s.ref(param)}]);", f"fd[{s.ref(param)}] = 0;", 'got = "ok";'])


# --- the state both worlds' models share ---------------------------------------------------

class Model:
    """A path's model: pure (no system calls), fed one step at a time. Subclasses give OPS and
    the mapping hooks (vma(), live_vmas(), unmap()); the engine calls only what is here."""
    OPS: ClassVar[dict[str, Op]]
    traits: set[str]

    # -- what the shared operations ask --
    def open_files(self) -> int:
        """Files of the path open now (a fork's child closes its copies at exit: the
        "forked" trait); a model that does not say is taken to have one."""
        return 1

    # -- what the engine asks --
    def op(self, step: dict) -> Op | None:
        return self.OPS.get(step["op"])

    def valid(self, step: dict) -> bool:
        op = self.op(step)
        return op is not None and isinstance(step.get("args"), dict) and \
            all(p in op.full(step["args"]) for p in op.params) and \
            op.pre(self, op.full(step["args"]))

    def expect(self, step: dict) -> frozenset[str]:
        op = self.OPS[step["op"]]
        return op.expect(self, op.full(step["args"]))

    def apply(self, step: dict, result: str) -> None:
        """The model after the kernel's answer: a refused call changes nothing (a fork's
        child saying what it inherited, a poll's events, are answers that succeeded)."""
        op = self.OPS[step["op"]]
        if result == "ok" or result.startswith("inherits ") or result in op.answers:
            op.apply(self, step["id"], op.full(step["args"]))

    def choose(self, rng: random.Random, sid: int) -> dict | None:
        """The next step: every operation offers what it can do now, with weights; one is
        drawn among those whose precondition holds."""
        options = [(w, {"op": op.name, "args": a}) for op in self.OPS.values()
                   for w, a in op.draw(self, rng) if w > 0 and op.pre(self, op.full(a))]
        if not options:
            return None
        pick = rng.random() * sum(w for w, _ in options)
        for w, o in options:
            pick -= w
            if pick <= 0:
                return o
        return options[-1][1]

    # -- the mapping hooks of the shared operations --
    def vma(self, ref: object) -> Any:
        """The live mapping an "@ID" names, or None."""
        raise NotImplementedError

    def live_vmas(self) -> list[tuple[int, Any]]:
        raise NotImplementedError

    def unmap(self, sid: int) -> None:
        raise NotImplementedError


def replay(model: Model, steps: list[dict]) -> Iterator[tuple[dict, list[str]]]:
    """Each valid step with the results the model allows, the model fed its own first
    allowed answer ("ok" where allowed): the sequence as it runs on a kernel that keeps the
    ABI. Steps naming objects that do not exist (a shrunk replay) are passed over."""
    for step in steps:
        if not model.valid(step):
            continue
        allowed = sorted(model.expect(step))
        model.apply(step, "ok" if "ok" in allowed else allowed[0])
        yield step, allowed


def traits(model: Model, steps: list[dict]) -> set[str]:
    """What the sequence does, as known issues name it ("mapped-again", "moved")."""
    for _ in replay(model, steps):
        pass
    return model.traits


def traits_as_run(model: Model, steps: list[dict], accepted: bool = True) -> set[str]:
    """What the sequence did as it ran: each step applied with the result it got where it
    carries one (an actor's step, answered as the schedule had it: a snapshot trigger
    refused because another actor's mapping was live, so this actor's mmap() and mremap()
    went through, which the model's own answers would not have), else with the model's. A
    step the kernel answered "ok" where the model refuses it whatever the schedule did is
    named `refused-OP-accepted` (with `accepted`): the symptom of a known issue that accepts
    what it must refuse (trace-mmap-first-map-error-dropped), and no other's. Only for one
    actor's steps: an actor's model does not see the other's mappings, so its refusals are
    not the kernel's to keep (races round 6: GET_READER "refused" on a CPU the other actor
    had mapped)."""
    for step in steps:
        if not model.valid(step):
            continue
        allowed = sorted(model.expect(step))
        result = step.get("result")
        if not isinstance(result, str):
            result = "ok" if "ok" in allowed else allowed[0]
        elif accepted and result == "ok" and "ok" not in allowed:
            model.traits.add(f"refused-{step['op']}-accepted")
        model.apply(step, result)
    return model.traits


ACCEPTED = re.compile(r"^refused-[\w-]+-accepted$")   # traits_as_run()'s wrong "ok"


def named(ops: dict[str, Op], steps: list[dict]) -> list[dict]:
    """Steps of any format as format 2: positional arguments (format 1) named by their
    operation's params (an unknown operation keeps its arguments; the model refuses it)."""
    out = []
    for s in steps:
        args = s.get("args", {})
        op = ops.get(s["op"])
        if isinstance(args, list) and op is not None:
            args = dict(zip(op.params, args))
        out.append(dict(s, args=args))
    return out


# --- the calls both worlds share ------------------------------------------------------------

@dataclass
class Region:
    """A mapping the world made: where it is, and (perf) the event it maps and whether it is a
    writable data mapping (whose control page takes aux_offset and data_tail)."""
    addr: int
    length: int
    event: int = -1
    rw_data: bool = False


class World:
    """A path's calls, in the sequence's child. Subclasses give OPS and their own setup."""
    OPS: ClassVar[dict[str, Op]]
    MAX_STEPS: ClassVar[int] = 12   # a generated sequence's length at the most
    # Why the world cannot run as one of several actors (threads), or None when it can.
    ONE_ACTOR: ClassVar[str | None] = None

    def __init__(self) -> None:
        self.fds: dict[int, int] = {}
        self.vmas: dict[int, Region] = {}
        self.stray: list[tuple[int, int]] = []  # what a refused resize made anyway

    @staticmethod
    @contextmanager
    def session(path: str) -> Iterator[None]:
        """What a whole explore of the path needs set (sysctls, imports); nothing here."""
        yield

    def do(self, step: dict) -> str:
        op = self.OPS[step["op"]]
        try:
            return op.call(self, step["id"], op.full(step["args"]))
        except OSError as e:
            import probelib
            return probelib.errname(e)

    def fd(self, ref: object) -> int:
        i = ref_id(ref)
        assert i is not None, ref
        return self.fds[i]

    def region(self, ref: object) -> Region:
        i = ref_id(ref)
        assert i is not None, ref
        return self.vmas[i]

    @staticmethod
    def py_check(kind: str, sid: int, want: dict) -> list[str]:
        """A reproducer's Python lines that check the observation `kind@sid` (what observe()
        reads through the mapping step `sid` made) against the model's `want`."""
        raise NotImplementedError(kind)

    @staticmethod
    def c_check(kind: str, sid: int, want: dict) -> list[str]:
        """The same check as C statements (ringlab_repro.h's check_begin/want/check_end)."""
        raise NotImplementedError(kind)

    def release(self) -> None:
        """Everything unmapped and closed, as a process's exit would."""
        from probelib import libc
        for r in self.vmas.values():
            libc.munmap(ctypes.c_void_p(r.addr), r.length)
        for addr, length in self.stray:
            libc.munmap(ctypes.c_void_p(addr), length)
        for fd in self.fds.values():
            os.close(fd)
        self.vmas, self.stray, self.fds = {}, [], {}


def _live(model: Model) -> list[int]:
    return [s for s, _ in model.live_vmas()]


def _has_vma(model: Model, a: Args) -> bool:
    return model.vma(a["vma"]) is not None


def _call_munmap(world: World, sid: int, a: Args) -> str:
    from probelib import errno_result, libc
    r = world.region(a["vma"])
    out = errno_result(libc.munmap(ctypes.c_void_p(r.addr), r.length) == 0)
    if out == "ok":
        del world.vmas[ref_id(a["vma"]) or 0]
    return out


MUNMAP = Op(
    "munmap", ("vma",), refs=("vma",),
    draw=lambda m, rng: [(3, {"vma": f"@{s}"}) for s in _live(m)],
    pre=_has_vma,
    expect=lambda m, a: frozenset({"ok"}),
    apply=lambda m, sid, a: m.unmap(ref_id(a["vma"]) or 0),
    call=_call_munmap,
    py=lambda s: [f"got = res(libc.munmap(*m[{s.ref('vma')}]) == 0)",
                  f"if got == 'ok': del m[{s.ref('vma')}]"],
    c=lambda s: [f"got = res(munmap(addr[{s.ref('vma')}], len[{s.ref('vma')}]) == 0);",
                 f'if (!strcmp(got, "ok")) addr[{s.ref("vma")}] = NULL;'],
    rule="the whole mapping goes; the path's own rule says what the last one gives back")


def _call_munmap_part(world: World, sid: int, a: Args) -> str:
    from probelib import PAGE, errno_result, libc
    r = world.region(a["vma"])
    return errno_result(libc.munmap(ctypes.c_void_p(r.addr + r.length - PAGE), PAGE) == 0)


MUNMAP_PART = Op(
    "munmap-part", ("vma",), refs=("vma",),
    draw=lambda m, rng: [(0.3, {"vma": f"@{s}"}) for s, v in m.live_vmas() if v.splittable],
    pre=lambda m, a: m.vma(a["vma"]) is not None and m.vma(a["vma"]).splittable,
    expect=lambda m, a: frozenset({"EINVAL"}),
    apply=lambda m, sid, a: None,
    call=_call_munmap_part,
    py=lambda s: [f"addr, length = m[{s.ref('vma')}]",
                  "got = res(libc.munmap(addr + length - PAGE, PAGE) == 0)"],
    c=lambda s: [f"got = res(munmap(addr[{s.ref('vma')}] + len[{s.ref('vma')}] - page, page) "
                 "== 0);"],
    rule="no split: EINVAL (perf_mmap_may_split(), b024d7b56c77; tracing_buffers_may_split())")


def _call_mremap(world: World, sid: int, a: Args) -> str:
    """A move keeps the mapping (at its new address); what a resize the model refuses made
    anyway is undone at the end (the step already failed)."""
    import probelib
    r = world.region(a["vma"])
    out, new, new_len = probelib.remap(r.addr, r.length, a["how"])
    if out == "ok" and a["how"] == "move":
        r.addr = new
    elif out == "ok":
        world.stray.append((new, new_len))
    return out


def _py_mremap(s: Step) -> list[str]:
    r, how = s.ref("vma"), s["how"]
    lines = [f"addr, length = m[{r}]"]
    if how == "move":
        return lines + ["spot = libc.mmap(None, length, 0, 0x22, -1, 0)",
                        "new = libc.mremap(addr, length, length, 3, spot)  # MAYMOVE|FIXED",
                        "got = res(mapping(new))", f"if got == 'ok': m[{r}] = (new, length)"]
    size = {"grow": "length + PAGE", "shrink": "length - PAGE", "dontunmap": "length"}[how]
    flags = 5 if how == "dontunmap" else 0
    return lines + [f"new = libc.mremap(addr, length, {size}, {flags}, None)",
                    "got = res(mapping(new))"]


def _c_mremap(s: Step) -> list[str]:
    r, how = s.ref("vma"), s["how"]
    if how == "move":
        return [f"spot = mmap(NULL, len[{r}], PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);",
                f"a = mremap(addr[{r}], len[{r}], len[{r}], MREMAP_MAYMOVE | MREMAP_FIXED, "
                "spot);", "got = res(a != MAP_FAILED);", f"if (a != MAP_FAILED) addr[{r}] = a;"]
    size = {"grow": f"len[{r}] + page", "shrink": f"len[{r}] - page", "dontunmap": f"len[{r}]"}[how]
    flags = "MREMAP_MAYMOVE | MREMAP_DONTUNMAP" if how == "dontunmap" else "0"
    return [f"a = mremap(addr[{r}], len[{r}], {size}, {flags});", "got = res(a != MAP_FAILED);"]


def _moved(m: Model, sid: int, a: Args) -> None:
    if a["how"] == "move":
        m.traits.add("moved")


MREMAP = Op(
    "mremap", ("vma", "how"), refs=("vma",),
    draw=lambda m, rng: [(0.4, {"vma": f"@{s}", "how": rng.choice(MREMAPS)}) for s in _live(m)],
    pre=lambda m, a: m.vma(a["vma"]) is not None and a["how"] in MREMAPS and (
        a["how"] != "shrink" or m.vma(a["vma"]).splittable),
    expect=lambda m, a: frozenset({"move": {"ok", "EINVAL"}, "grow": {"EFAULT"},
                                   "shrink": {"EINVAL"}, "dontunmap": {"EINVAL"}}[a["how"]]),
    apply=_moved,
    call=_call_mremap, py=_py_mremap, c=_c_mremap,
    rule="no growth (EFAULT: VM_DONTEXPAND), no shrink (EINVAL: no split), no "
         "MREMAP_DONTUNMAP (EINVAL); a move keeps the buffer and its charge, or is refused "
         "for a VM_IO mapping (mm/mremap.c)")


def mapping_env() -> dict:
    """What the kernel has of the calls MAPPING_OPS make, for a world's prepared() env: a
    kernel without CONFIG_ADVISE_SYSCALLS (tinyconfig) answers every madvise() ENOSYS, which is
    no ABI of these buffers (madvise(0, 0, MADV_NORMAL) is 0 wherever the call exists)."""
    from probelib import libc
    return {"has_madvise": libc.madvise(None, 0, 0) == 0}


def _call_madvise(world: World, sid: int, a: Args) -> str:
    from probelib import errno_result, libc
    r = world.region(a["vma"])
    return errno_result(libc.madvise(ctypes.c_void_p(r.addr), r.length, MADVICE[a["advice"]])
                        == 0)


def _advised(m: Model, sid: int, a: Args) -> None:
    if a["advice"] in ("dofork", "dontfork"):
        m.vma(a["vma"]).copies_on_fork = a["advice"] == "dofork"


MADVISE = Op(
    "madvise", ("vma", "advice"), refs=("vma",),
    draw=lambda m, rng: [(0.4, {"vma": f"@{s}", "advice": rng.choice(tuple(MADVICE))})
                         for s in _live(m)],
    pre=lambda m, a: _has_vma(m, a) and a["advice"] in MADVICE and
    bool(m.setup.get("has_madvise", True)),
    # MADV_DOFORK clears VM_DONTCOPY but is refused on VM_IO/VM_PFNMAP (7.x maps both paths
    # with remap_pfn_range()/vm_insert_pages() differently); WIPEONFORK: private anon only.
    expect=lambda m, a: frozenset({"dofork": {"ok", "EINVAL"}, "dontfork": {"ok"},
                                   "dontdump": {"ok"}, "wipeonfork": {"EINVAL"}}[a["advice"]]),
    apply=_advised,
    call=_call_madvise,
    py=lambda s: [f"got = res(libc.madvise(*m[{s.ref('vma')}], {MADVICE[s['advice']]}) == 0)"],
    c=lambda s: [f"got = res(madvise(addr[{s.ref('vma')}], len[{s.ref('vma')}], "
                 f"{MADVICE_C[s['advice']]}) == 0);"],
    rule="MADV_DOFORK ok or EINVAL (VM_IO); DONTFORK, DONTDUMP ok; WIPEONFORK EINVAL "
         "(madvise_vma_behavior())")


def _forked(m: Model, sid: int, a: Args) -> None:
    if m.open_files():              # the child's exit closes its copies of these
        m.traits.add("forked")
    if any(v.copies_on_fork for _, v in m.live_vmas()):
        m.traits.add("fork-inherits-a-mapping")


def _inherits(m: Model, a: Args) -> frozenset[str]:
    n = sum(v.copies_on_fork for _, v in m.live_vmas())
    return frozenset({f"inherits {n}" if n else "ok"})


def _call_fork(world: World, sid: int, a: Args) -> str:
    """A child that reads the first byte of every mapping it inherited and says how many
    (VM_DONTCOPY: none unless MADV_DOFORK let it through)."""
    import probelib
    return probelib.fork_inheriting([(r.addr, r.length) for r in list(world.vmas.values())])


FORK = Op(
    "fork", (),
    draw=lambda m, rng: [(0.6, {})] if m.live_vmas() else [],
    pre=lambda m, a: True,
    expect=_inherits, apply=_forked, call=_call_fork,
    py=lambda s: ["got = fork()"], c=lambda s: ["got = forked();"],
    rule="a mapping is VM_DONTCOPY: the child has one only after MADV_DOFORK, and reads it "
         "(perf_mmap(), __rb_map_vma())")

MAPPING_OPS: tuple[Op, ...] = (MUNMAP, MUNMAP_PART, MREMAP, MADVISE, FORK)


def table(*ops: Op) -> dict[str, Op]:
    """A path's OPS: its own operations, then the shared ones, by name."""
    out = {op.name: op for op in (*ops, *MAPPING_OPS)}
    assert len(out) == len(ops) + len(MAPPING_OPS), "two operations of one name"
    return out
