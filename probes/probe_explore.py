"""Explore a ring-buffer path with random sequences of ordinary calls, each step checked against
a model of what the ABI says must hold, every failure shrunk to its shortest sequence.

By hand in a guest:
  python3 probe_explore.py run PATH [--seed N] [--budget S] [--first K] [--count C]
  python3 probe_explore.py replay FILE.json      (a failure's "setup" and "steps")
PATH: perf-ring, perf-aux, pinning, trace-mmap (explore_perf.py, explore_trace.py; each path's
operations are records in its OPS table, explore_ops.py). A step is {"id", "op", "args": {NAME:
VALUE}}; a replay also takes the positional "args" of format 1.

Each sequence runs in a forked child (its own mm, so VmPin starts at 0) under a user id no
earlier sequence had (user_struct, and the perf_mlock it holds, starts at 0 too), so one
sequence's leak cannot move the next one's baseline. A sequence is generated from (PATH, seed,
its index) and the kernel's answers, so `--first K --count 1` on a fresh guest makes the same
calls again. Before each sequence a `ringlab-explore:` line goes to /dev/kmsg: after a crash
the console names the sequence that was running. After each sequence the kernel log is read:
any splat banner is a failure of that sequence.

Why our own generator and shrinker and not Hypothesis's stateful testing (which the guest could
have): a sequence must run in a fresh process under a fresh uid, be replayable from its index
after the guest died, and be shrunk by replays that each start from the same kernel state;
Hypothesis keeps the example in-process and its database on a disk the guest throws away.
Shrinking here is step deletion to a fixpoint (ddmin), references being the creating step's id.

Output: one JSON document (sequences, steps, failures with the shrunk sequence). Stdlib only.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import mmap
import os
import random
import re
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import explore_load
import explore_ops
import gcov_edges
import probelib
import splat_banners

KMSG_MARK = "ringlab-explore:"
FIRST_UID = 20000   # sequences run as 20000, 20001, ...; never a real account
LATE_S = 0.2        # waited after the last sequence for a splat of its deferred work
UNTANGLE_TRIES = 3  # per check and slice: known failures tried without the known issue's steps
STEER_SHARE = 0.5   # steered: the share of sequences started from a corpus entry's prefix
RACE_TRIES = 3      # a race's shrink: replays of a candidate, one failing the same keeps it
CLEAR_WARN_ONCE = "/sys/kernel/debug/clear_warn_once"   # kernel/panic.c, CONFIG_DEBUG_FS


def worlds() -> dict[str, Any]:
    """Every path's world class, from the explore_*.py files beside this one (each says which
    paths it serves in PATHS): a new path is a new file. A world's static methods say what
    the path needs, its instances make the calls, its OPS are the path's operations."""
    import importlib
    here = os.path.dirname(os.path.abspath(__file__))
    out: dict[str, Any] = {}
    for name in sorted(os.listdir(here)):
        if name.startswith("explore_") and name.endswith(".py"):
            out.update(getattr(importlib.import_module(name[:-3]), "PATHS", {}))
    return out


PATHS = tuple(worlds())


def world_of(path: str) -> Any:
    found = worlds().get(path)
    if found is None:
        raise ValueError(f"unknown path {path!r}: one of {', '.join(PATHS)}")
    return found


def traits(world_cls: Any, path: str, env: dict, steps: list[dict]) -> set[str]:
    """What the steps did, as known issues name it: as a kernel keeping the ABI runs them one
    after another, and, for actors and loads at once (whose interleaving the model cannot
    know), also as they ran where the steps carry their results (races round 6: a shrunk
    race's mremap() that the model's own answers refused, so `moved` was never named and a
    known issue's WARN stood unbound). One actor's steps as run lend only
    `refused-OP-accepted`, the wrong answer that is a known issue's own symptom: any other
    trait of a kernel's wrong answer could excuse it; actors' steps never lend that one
    (an actor's model does not see the other's objects)."""
    found = explore_ops.traits(world_cls.model(path, env), steps)
    if not any(isinstance(s.get("result"), str) for s in steps):
        return found
    if env.get("load") or any("actor" in s for s in steps):
        return found | explore_ops.traits_as_run(world_cls.model(path, env), steps,
                                                 accepted=False)
    return found | {t for t in explore_ops.traits_as_run(world_cls.model(path, env), steps)
                    if explore_ops.ACCEPTED.match(t)}


def simpler(world_cls: Any) -> Callable[[dict], list[dict]]:
    """The shrinker's simpler forms of a step: its operation's own."""
    def forms(step: dict) -> list[dict]:
        op = world_cls.OPS.get(step["op"])
        return [] if op is None else \
            [dict(step, args=a) for a in op.simpler(op.full(step["args"]))]
    return forms


# --- one sequence, in a child -----------------------------------------------------------------

def failure(check: str, at: int | str, expected: object, got: object) -> dict:
    return {"check": check, "at": at, "expected": expected, "got": got}


def compare(expected: dict, observed: dict, at: int | str) -> dict | None:
    """The first key whose observed value is not the model's. The check is the key without
    its object ("ring@6" is check "ring" on the mapping step 6 made): a shrunk sequence,
    renumbered, fails the same check on another step id."""
    for key, want in expected.items():
        if observed.get(key) != want:
            check, _, obj = key.partition("@")
            out = failure(check, at, want, observed.get(key))
            if obj:
                out["object"] = f"@{obj}"
            return out
    return None


def run_sequence(world_cls: Any, path: str, setup: dict, uid: int,
                 steps: list[dict] | None = None, rng: random.Random | None = None,
                 max_steps: int = 12, trail: mmap.mmap | None = None,
                 extend: bool = False) -> dict:
    """Run given `steps` (a replay), or generate up to `max_steps` with `rng`, checking the
    model after each; then undo everything and check the end state. With `extend`, the
    steps are a prefix that generation goes on from (a steered sequence). In the caller's
    process: run it in a child. Steps whose objects do not exist (a shrunk replay) are
    skipped."""
    model = world_cls.model(path, setup)
    world = world_cls(path, setup, uid)
    done: list[dict] = []
    fail = None
    todo = list(steps) if steps is not None else None
    index = 0
    while fail is None:
        if todo is not None and not todo and extend:
            todo = None
        if todo is not None:
            if not todo:
                break
            step = todo.pop(0)
            if not model.valid(step):
                continue
        else:
            if index >= max_steps:
                break
            step = model.choose(rng, index)
            if step is None:
                break
        step = dict(step, id=step.get("id", index))
        allowed = model.expect(step)
        if trail is not None:   # what the parent reads if a signal kills this child
            trail.write(json.dumps(step).encode() + b"\n")
        result = world.do(step)
        done.append(dict(step, result=result))
        index += 1
        if result not in allowed:
            fail = failure("result:" + step["op"], len(done) - 1, sorted(allowed), result)
            break
        model.apply(step, result)
        fail = compare(model.observe(), world.observe(model.observe()), len(done) - 1)
    if fail is None:
        world.release()
        model.release()
        fail = compare(model.end(), world.end(model.end()), "end")
    else:
        world.release()
    return {"steps": done, "failure": fail}


def run_actors(world_cls: Any, path: str, setup: dict, uid: int,
               steps: list[dict] | None = None, rngs: list[random.Random] | None = None,
               max_steps: int = 12, trail: mmap.mmap | None = None, actors: int = 2) -> dict:
    """Actors (threads of one process: one mm, one user; or, with the setup's "actors_as":
    "process", processes forked from it: an mm each, so one's mmap() does not wait for
    another's munmap() on mmap_lock) making their own sequences on one world at once: the
    same instance, the same user's charge; the setup's loads
    (explore_load.py) run beside them in processes of their own, from before the world is
    made until the actors are done. Their interleaving is the scheduler's, so no step is
    judged; the oracle is the end state (everything given back, the buffer resizable, the
    instance removable) and the kernel log. `steps` (a replay) carry their actor; else each
    actor generates with its own rng."""
    import threading
    n_actors = max([actors, *(s.get("actor", 0) + 1 for s in steps or [])])
    # The world first: it takes its baselines (the test PMU's module references, which the
    # aux load's own event holds while it runs) before any load starts.
    world = world_cls(path, setup, uid)
    loads = explore_load.Running([tuple(x) for x in setup.get("load", [])], setup) \
        if setup.get("load") else None
    models = [world_cls.model(path, setup) for _ in range(n_actors)]
    done: list[list[dict]] = [[] for _ in range(n_actors)]
    errors: list[str] = []

    cpus = sorted(os.sched_getaffinity(0))

    def actor(i: int) -> None:
        m = models[i]
        mine = [s for s in steps if s.get("actor", 0) == i] if steps is not None else None
        try:
            # Actor i on CPU i (mod the guest's): two actors run on two vCPUs, which TCG
            # interleaves at any instruction, not only where the scheduler switches threads.
            os.sched_setaffinity(0, {cpus[i % len(cpus)]})
            for n in range(len(mine) if mine is not None else max_steps):
                if mine is not None:
                    step = mine[n]
                    if not m.valid(step):
                        continue
                else:
                    assert rngs is not None
                    step = m.choose(rngs[i], i * 1000 + n)
                    if step is None:
                        return
                    step = dict(step, id=i * 1000 + n, actor=i)
                result = world.do(step)
                done[i].append(dict(step, result=result))
                m.apply(step, result)       # the objects the kernel made, nothing judged
        except Exception as e:  # noqa: BLE001 - the explorer's own error
            errors.append(f"actor {i}: {type(e).__name__}: {e}")
    killed = None
    if setup.get("actors_as") == "process":
        killed = _actors_in_processes(actor, n_actors, done, errors, models)
    else:
        threads = [threading.Thread(target=actor, args=(i,)) for i in range(n_actors)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    load = loads.stop() if loads is not None else {}
    ran = [s for d in done for s in d]
    if killed is not None:      # a signal in a step of that actor (its process died of it)
        return {"steps": ran, "load": load,
                "failure": failure(f"signal:actor{killed[0]}", "actor", "no signal", killed[1])}
    if errors:
        return {"steps": ran, "error": errors[0], "load": load}
    world.release()
    for m in models:
        m.release()
    return {"steps": ran, "load": load,
            "failure": compare(models[0].end(), world.end(models[0].end()), "end")}


def _actors_in_processes(actor: Callable[[int], None], n: int, done: list[list[dict]],
                         errors: list[str], models: list[Any]) -> tuple[int, str] | None:
    """Each actor in a process of its own, all at once; what each did comes back through a
    pipe and is applied to the parent's copy of its model (the end state is judged here). The
    first actor a signal killed, with the signal's name, or None."""
    def one(i: int) -> dict:
        actor(i)
        return {"steps": done[i], "errors": errors}
    started = [probelib.start_in_child(one, i) for i in range(n)]
    killed = None
    for i, (pid, r) in enumerate(started):
        data, status = probelib.reap_child(pid, r)
        if os.WIFSIGNALED(status):
            killed = killed or (i, signal.Signals(os.WTERMSIG(status)).name)
            continue
        out = json.loads(data)
        errors += out.get("errors", []) + ([out["error"]] if "error" in out else [])
        done[i] = out.get("steps", [])
        for step in done[i]:
            models[i].apply({k: v for k, v in step.items() if k != "result"}, step["result"])
    return killed


# --- the kernel log -------------------------------------------------------------------------------

class Kmsg:
    """/dev/kmsg from now on: what each sequence made the kernel say."""

    def __init__(self) -> None:
        self.fd = os.open("/dev/kmsg", os.O_RDWR | os.O_NONBLOCK)
        os.lseek(self.fd, 0, os.SEEK_END)

    def mark(self, text: str) -> None:
        try:
            os.write(self.fd, f"<5>{KMSG_MARK} {text}\n".encode())
        except OSError:
            pass

    def new_lines(self) -> list[str]:
        out: list[str] = []
        while True:
            try:
                rec = os.read(self.fd, 8192).decode(errors="replace")
            except BlockingIOError:
                return out
            except OSError:     # EPIPE: overwritten records; go on from the next
                continue
            head, _, text = rec.partition(";")
            if not text.startswith(KMSG_MARK):
                out.append(text.rstrip("\n").split("\n")[0])

    def splat(self) -> list[str] | None:
        """The new lines, if any of them is a splat's banner."""
        return splat_lines(self.new_lines()) or None


# A sequence's kernel log kept with its failure: a lockdep report runs to 100-400 lines and
# the chain that titles it (#0, through report_bug() when a WARN's printk took the console
# lock) comes last. Round 4 kept 60, and the race kernel's known lockdep report came back
# untitled, so unbound.
KMSG_KEEP = 600


def splat_lines(lines: list[str]) -> list[str]:
    """The lines to keep of a sequence's log, if a splat's banner is among them: [] if not."""
    return lines[:KMSG_KEEP] if any(splat_banners.is_banner(line) for line in lines) else []


def first_banner(lines: list[str]) -> str:
    """What a splat failure got: the splat's banner, not the line the log began with (the
    events load's 'Scheduler tracepoints ... schedstats' notice, round 4)."""
    return next((line for line in lines if splat_banners.is_banner(line)), lines[0])


def splat_key(lines: list[str]) -> str:
    """The first banner, numbers out: the same WARN is the same check across replays."""
    return _banner_key(next(line for line in lines if splat_banners.is_banner(line)))


def splat_keys(lines: list[str]) -> list[tuple[str, str]]:
    """Every banner of a log, once per key, with the banner it came from."""
    out: dict[str, str] = {}
    for line in lines:
        if splat_banners.is_banner(line):
            out.setdefault(_banner_key(line), line)
    return list(out.items())


def _banner_key(banner: str) -> str:
    banner = re.sub(r"\+0x[0-9a-f]+/0x[0-9a-f]+", "", banner)
    banner = re.sub(r"(CPU#?|PID:|\bpid\b|/)\s*\d+", r"\1N", banner)
    return "splat:" + re.sub(r"\s+", " ", banner).strip()


def clear_warn_once() -> None:
    """Re-arm every WARN_ONCE and WARN_ON_ONCE: one that fired in an earlier sequence fires
    again in the next that reaches it, so each sequence is judged on its own and a replay in
    the same guest can show it again (a race's shrink and confirmation need that)."""
    try:
        with open(CLEAR_WARN_ONCE, "w") as f:
            f.write("1")
    except OSError:
        pass    # no debugfs: a WARN_ONCE shows once a boot, the host confirms on fresh guests


# --- known issues ------------------------------------------------------------------------------

def excused(excuses: list[dict], check: str, traits: set[str], kmsg: list[str]) -> bool:
    """The failure is a known issue's symptom (the host's kernels/known-issues.yaml `explore:`
    entries for this path, passed with --excuse): its check, one of its traits, its splat. Such
    a failure is kept once and does not stop the search for another failure of the same check."""
    name = "splat" if check.startswith("splat:") else check
    for ex in excuses:
        if not any(fnmatch.fnmatchcase(name, c) for c in ex.get("checks", [])):
            continue
        if ex.get("traits") and not traits & set(ex["traits"]):
            continue
        if name == "splat" and ex.get("splats") and not any(
                re.search(rx, line) for rx in ex["splats"] for line in kmsg[:8]):
            continue
        return True
    return False


# --- an explore --------------------------------------------------------------------------------

class Explorer:
    """Sequences of one path, each in a child under a fresh uid, the kernel log after each."""

    def __init__(self, path: str, seed: int, max_steps: int | None = None, actors: int = 1,
                 excuses: list[dict] | None = None, steer: bool = False,
                 loads: list[tuple[str, int]] | None = None, processes: bool = False) -> None:
        self.path, self.seed, self.actors = path, seed, actors
        self.processes = processes and actors > 1   # actors as processes, not threads
        self.loads = loads or []    # (explore_load.LOADS name, CPU) beside every sequence
        # Steering (a coverage kernel): a sequence that ran an edge no earlier one did joins
        # the corpus; a share of later sequences start from a prefix of one of it.
        self.steer = steer
        self.corpus: list[dict] = []
        self.edges: set[tuple[str, int, int]] = set()
        self.steered = 0
        self.pick = random.Random(f"{path}/{seed}/steer")
        self.excuses = excuses or []
        self.world_cls = world_of(path)
        self.max_steps = max_steps or self.world_cls.MAX_STEPS
        self.kmsg = Kmsg()
        # Splats a shrink's or untangle's replay showed beside the one it was after: failures
        # of their own (race mutant 065's rb_update_meta_page race, round 4, came up in a
        # replay of another failure and was dropped with it). Keys already had, and the
        # (setup, run) of each new one until _explore keeps it.
        self.splats_had: set[str] = set()
        self.in_replays: list[tuple[dict, dict]] = []
        # a failing replay's steps as run (with results), by its schedule and step ids: the
        # traits of a shrunk race are those of the run that last showed it
        self.as_run: dict[str, list[dict]] = {}
        self.uid = FIRST_UID + (os.getpid() * 97) % 20000
        self.steps_run = 0
        self.runs = 0
        self.trail = mmap.mmap(-1, 1 << 20)   # shared with each sequence's child

    def next_uid(self) -> int:
        self.uid += 1
        return self.uid

    def actors_in(self, steps: list[dict]) -> int:
        """How many actors made these steps (at least the explore's own count)."""
        return max([self.actors, *(s.get("actor", 0) + 1 for s in steps)])

    def setup(self, k: int) -> dict:
        """Sequence k's setup: the path's own, drawn from (path, seed, k), and the loads that
        run beside it (kept in the setup, so a replay runs them too)."""
        setup = self.world_cls.setup(self.path, random.Random(f"{self.path}/{self.seed}/{k}"))
        if self.processes:
            setup = dict(setup, actors_as="process")
        return dict(setup, load=[list(x) for x in self.loads]) if self.loads else setup

    def one(self, setup: dict, steps: list[dict] | None = None, k: int | None = None,
            extend: bool = False) -> dict:
        """A sequence (generated as number k, or the given steps, or with `extend` generated
        on from them) in a child; its failure, or a splat it caused. A caller that charges
        late splats settle()s first; what is left here (a shrink's replays run back to back)
        is not this sequence's and goes."""
        rng = random.Random(f"{self.path}/{self.seed}/{k}/ops") \
            if steps is None or extend else None
        if steps is not None:
            steps = explore_ops.named(self.world_cls.OPS, steps)
        self.settle()
        clear_warn_once()
        self.kmsg.mark(f"{self.path} seed {self.seed} sequence {k if k is not None else 'replay'}")
        self.trail.seek(0)
        self.trail.write(b"\0" * 4096)
        self.trail.seek(0)
        concurrent = self.actors > 1 or bool(setup.get("load")) or \
            any(s.get("actor") for s in steps or [])
        with self.world_cls.prepared(self.path, setup) as env:
            if concurrent:
                rngs = [random.Random(f"{self.path}/{self.seed}/{k}/actor{i}")
                        for i in range(self.actors)]
                out = probelib.in_child(run_actors, self.world_cls, self.path,
                                        dict(setup, **env), self.next_uid(), steps,
                                        rngs if steps is None else None, self.max_steps, None,
                                        self.actors)
            else:
                out = probelib.in_child(run_sequence, self.world_cls, self.path,
                                        dict(setup, **env), self.next_uid(), steps, rng,
                                        self.max_steps, self.trail, extend)
        self.runs += 1
        if "signal" in out:     # a signal killed the sequence in a step: the trail says which
            done = [json.loads(line) for line in
                    self.trail[:].split(b"\0", 1)[0].decode().splitlines()]
            out = {"steps": [dict(s, result="ok") for s in done[:-1]] +
                   [dict(done[-1], result=out["signal"])] if done else [],
                   "failure": failure(f"signal:{done[-1]['op'] if done else '?'}",
                                      len(done) - 1, "no signal", out["signal"])}
        elif "failure" not in out:    # the child raised: the model's or the probe's own error
            out = {"steps": out.get("steps", []),
                   "failure": failure("explorer", "child", "a result", out.get("error"))}
        out["env"] = env
        self.steps_run += len(out["steps"])
        return with_splat(out, self.kmsg.splat() or [], self.actors > 1 or bool(setup.get("load")))

    def settle(self) -> list[str]:
        """What the kernel logged since the last sequence was judged, if it holds a splat: that
        sequence's deferred work (an RCU callback, a workqueue freeing its buffer) said it."""
        return splat_lines(self.kmsg.new_lines())

    @staticmethod
    def charge_late(out: dict | None, late: list[str]) -> dict | None:
        """`out` failed by the splat logged after it was judged, or None when there is nothing
        to charge: no splat, no sequence, or one that failed already (its first failure
        stands)."""
        if not late or out is None or out["failure"] is not None:
            return None
        return dict(out, kmsg=late, failure=failure(
            splat_key(late), "kernel log, after the sequence", "no splat", first_banner(late)))

    def fails_same(self, setup: dict, steps: list[dict], check: str,
                   known: bool | None = None) -> bool:
        """The steps fail the same check again (and, when `known` is given, as the known
        issue's symptom or not, so a new failure never shrinks into a known one)."""
        out = self.one(setup, steps)
        self.note_splats(setup, out)
        if out["failure"] is None or out["failure"]["check"] != check:
            return False
        self.as_run[_run_key(setup, steps)] = out["steps"]
        return known is None or self.is_excused(setup, out, check, out["steps"]) == known

    def kept_in_replays(self, k: int, seen: dict[str, int]) -> list[dict]:
        """The splats sequence k's shrink showed beside its own: each a failure, unshrunk
        (its replay's steps), known or not as any other, counted in `seen`."""
        kept = []
        while self.in_replays:
            setup, out = self.in_replays.pop(0)
            check = out["failure"]["check"]
            known = self.is_excused(setup, out, check, out["steps"])
            key = check + ("~known" if known else "")
            seen[key] = seen.get(key, 0) + 1
            if seen[key] == 1:
                kept.append(self._kept(k, setup, out, known, 0.0))
        return kept

    def note_splats(self, setup: dict, out: dict) -> None:
        """Keep, as a failure of its own, a replay whose log has a splat no kept failure had."""
        for key, banner in splat_keys(out.get("kmsg") or []):
            if key not in self.splats_had:
                self.splats_had.add(key)
                self.in_replays.append((setup, dict(out, failure=failure(
                    key, "kernel log, in a replay", "no splat", banner))))

    def fails_racy(self, setup: dict, steps: list[dict], check: str,
                   known: bool | None = None) -> bool:
        """fails_same for a schedule's failure: one of RACE_TRIES replays failing is enough."""
        return any(self.fails_same(setup, steps, check, known) for _ in range(RACE_TRIES))

    def shrink_race(self, setup: dict, steps: list[dict], check: str, known: bool | None,
                    deadline: float) -> tuple[dict, list[dict], list[str]]:
        """A failure of actors and loads made smaller where RACE_TRIES replays still show it:
        the schedule first (each load, then each actor's whole part, dropped), then the steps
        (ddmin, the actor of each step kept). What is left names what the race needs; the
        loads it was seen to need (dropped, it did not fail) are named apart."""
        needed: list[str] = []
        def fails(candidate: list[dict], with_setup: dict | None = None) -> bool:
            return time.monotonic() < deadline and \
                self.fails_racy(setup if with_setup is None else with_setup, candidate,
                                check, known)
        for load in list(setup.get("load", [])):
            fewer = [x for x in setup["load"] if x != load]
            without = dict(setup, load=fewer) if fewer else \
                {k: v for k, v in setup.items() if k != "load"}
            if fails(steps, without):
                setup = without
            elif time.monotonic() < deadline:
                needed.append(load[0])
        for actor in sorted({s.get("actor", 0) for s in steps}):
            if len({s.get("actor", 0) for s in steps}) < 2:
                break
            trial = [s for s in steps if s.get("actor", 0) != actor]
            if fails(trial):
                steps = trial
        return setup, _drop_steps(steps, fails, deadline), needed

    def is_excused(self, setup: dict, out: dict, check: str, steps: list[dict]) -> bool:
        if not self.excuses:
            return False
        env = dict(setup, **out.get("env", {}))
        has = set().union(*(traits(self.world_cls, self.path, env, [
            s for s in steps if s.get("actor", 0) == i]) for i in range(self.actors_in(steps))))
        return excused(self.excuses, check, has, out.get("kmsg", []))

    def explore(self, first: int, count: int, budget_s: float, shrink_s: float) -> dict:
        with self.world_cls.session(self.path):
            return self._explore(first, count, budget_s, shrink_s)

    def _explore(self, first: int, count: int, budget_s: float, shrink_s: float) -> dict:
        """Sequences from number `first` for the budget. The first failure of each check is
        kept and shrunk, and the first of each check that is not a known issue's symptom too:
        a kernel with a known issue can still show a new bug through the same check."""
        start = time.monotonic()
        failures: list[dict] = []
        seen: dict[str, int] = {}
        untangled: dict[str, int] = {}
        k = first
        answers: dict[str, dict[str, int]] = {}    # op: result: steps (the reach)
        load: dict[str, dict[str, int]] = {}       # load: its rounds, and the ones done
        last: tuple[int, dict, dict] | None = None

        def charge_late(late: list[str]) -> None:
            """A splat that came after its sequence was judged fails that sequence, unshrunk
            (a shrink's replays are judged before such a splat shows)."""
            lout = self.charge_late(last[2] if last else None, late)
            if last is None or lout is None:
                return
            check = lout["failure"]["check"]
            known = self.is_excused(last[1], lout, check, lout["steps"])
            key = check + ("~known" if known else "")
            seen[key] = seen.get(key, 0) + 1
            if seen[key] == 1:
                failures.append(self._kept(last[0], last[1], lout, known, 0.0))
        if self.steer:
            self.edges = gcov_edges.flat(gcov_edges.read())
            self.corpus = self.load_corpus()
        while k < first + count and time.monotonic() - start < budget_s:
            setup = self.setup(k)
            late = self.settle()
            if self.steer and self.corpus and self.pick.random() < STEER_SHARE:
                entry = self.pick.choice(self.corpus)
                setup = entry["setup"]
                prefix = entry["steps"][:self.pick.randint(1, len(entry["steps"]))]
                out = self.one(setup, prefix, k=k, extend=True)
                self.steered += 1
            else:
                out = self.one(setup, k=k)
            if self.steer:
                self.learn(setup, out)
            charge_late(late)
            last = (k, setup, out)
            for name, counts in out.get("load", {}).items():
                mine = load.setdefault(name, {"rounds": 0, "ok": 0, "died": 0})
                for c in ("rounds", "ok", "died"):
                    mine[c] += counts.get(c, 0)
                if counts.get("error"):
                    mine.setdefault("error", counts["error"])
            for step in out["steps"]:
                by = answers.setdefault(step["op"], {})
                by[str(step.get("result"))] = by.get(str(step.get("result")), 0) + 1
            f = out["failure"]
            if f is not None:
                check = f["check"]
                known = check != "explorer" and self.is_excused(setup, out, check, out["steps"])
                if known and check not in seen and untangled.get(check, 0) < UNTANGLE_TRIES:
                    # the known issue's steps taken out: does the check still fail?
                    untangled[check] = untangled.get(check, 0) + 1
                    other = self.untangle(setup, out, check)
                    if other is not None:
                        out, known = other, False
                key = check + ("~known" if known else "")
                seen[key] = seen.get(key, 0) + 1
                self.splats_had.update(had for had, _ in splat_keys(out.get("kmsg") or []))
                if seen[key] == 1:
                    failures.append(self._kept(k, setup, out, known, shrink_s))
                    failures += self.kept_in_replays(k, seen)
            k += 1
        time.sleep(LATE_S)          # the last sequence's deferred work
        charge_late(self.settle())
        if self.steer:
            self.save_corpus()
        edges = self.edges if self.steer else gcov_edges.flat(gcov_edges.read())
        return {"path": self.path, "seed": self.seed, "first": first, "next": k,
                "sequences": self.runs, "steps": self.steps_run,
                "seconds": round(time.monotonic() - start, 3), "failures": failures,
                "failed": seen, "answers": answers, **({"load": load} if load else {}),
                **({"edges": len(edges)} if edges else {}),
                **({"corpus": len(self.corpus), "steered": self.steered} if self.steer else {})}

    def corpus_file(self) -> str:
        """The corpus outlives one call of this probe (the host runs a path in slices): kept
        in the guest, per path and seed."""
        return f"/tmp/ringlab-explore-corpus-{self.path}-{self.seed}.json"

    def load_corpus(self) -> list[dict]:
        try:
            with open(self.corpus_file()) as f:
                return json.load(f)
        except (OSError, ValueError):
            return []

    def save_corpus(self) -> None:
        tmp = self.corpus_file() + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.corpus, f)
        os.replace(tmp, self.corpus_file())

    def learn(self, setup: dict, out: dict) -> None:
        """Keep a sequence that ran an edge of the profiled files no earlier one did."""
        now = gcov_edges.flat(gcov_edges.read())
        if now - self.edges and out["failure"] is None and out["steps"]:
            self.corpus.append({"setup": setup, "steps": [
                {k: v for k, v in s.items() if k != "result"} for s in out["steps"]]})
        self.edges |= now

    def untangle(self, setup: dict, out: dict, check: str) -> dict | None:
        """A sequence that failed as a known issue's symptom may hold a new bug too: each step
        whose removal takes a known issue's trait away is removed; if what is left still fails
        the same check, and not as the known symptom, that run is a new failure."""
        env = dict(setup, **out.get("env", {}))
        steps = [{k: v for k, v in s.items() if k != "result"} for s in out["steps"]]

        def has(candidate: list[dict]) -> set[str]:
            return traits(self.world_cls, self.path, env, candidate)
        for i in reversed(range(len(steps))):
            if not excused(self.excuses, check, has(steps), []):
                break
            trial = steps[:i] + steps[i + 1:]
            if len(has(trial)) < len(has(steps)):
                steps = trial
        if excused(self.excuses, check, has(steps), []) or len(steps) == len(out["steps"]):
            return None
        again = self.one(setup, steps)
        self.note_splats(setup, again)
        if again["failure"] is None or again["failure"]["check"] != check or \
                self.is_excused(setup, again, check, steps):
            return None
        return again

    def _kept(self, k: int, setup: dict, out: dict, known: bool, shrink_s: float) -> dict:
        """A failure's record, shrunk to the shortest sequence that fails the same check the
        same way (known issue's symptom or not); a race's (actors, loads) over its schedule
        and steps, each candidate replayed RACE_TRIES times, its smaller setup kept as
        "shrunk_setup"."""
        f = out["failure"]
        record = {"sequence": k, "setup": setup, "env": out["env"], "failure": f,
                  "steps": out["steps"], "kmsg": out.get("kmsg", []), "excused": known}
        env = dict(setup, **out["env"])
        if out.get("load"):
            record["load"] = out["load"]
        steps_run = out["steps"]     # with their results: traits() reads a race's as run
        # what the sequence as run did, every actor and load: the traits of a second splat
        # in its log, which the shrink (of the first) says nothing about (races round 5: a
        # moved mapping's put_snapshot_map WARN beside an nr_dirty_pages WARN took the
        # latter's shrunk steps and traits, and its known issue could not bind it)
        record["traits_as_run"] = sorted(set().union(*(traits(
            self.world_cls, self.path, env, [s for s in steps_run if s.get("actor", 0) == i])
            for i in range(self.actors_in(steps_run))), *(
            explore_load.LOADS[name].traits for name, _ in setup.get("load", []))))
        concurrent = self.actors > 1 or bool(setup.get("load"))
        if f["check"] != "explorer" and concurrent:
            steps = [{k: v for k, v in s.items() if k != "result"} for s in out["steps"]]
            small_setup, small, needed = self.shrink_race(
                setup, steps, f["check"], known if self.excuses else None,
                time.monotonic() + shrink_s)
            if len(small) < len(steps) or small_setup != setup:
                record["shrunk"], record["shrunk_setup"] = small, small_setup
            # a load left beside the race did what its traits say (the subbuf load's size
            # flips): one it was seen to need, or one the shrink's deadline left untried
            # (races round 5: a 1-in-N WARN whose replays never failed kept every load, and
            # lent none of their traits)
            left = [name for name, _ in small_setup.get("load", [])]
            # as it last ran: the shrink's last failing replay, or this run when nothing was
            # dropped (a splat kept from another's replay is not shrunk: its run is `out`)
            ran = self.as_run.get(_run_key(small_setup, small),
                                  out["steps"] if small_setup == setup and len(small) == len(steps)
                                  else small)
            record["traits"] = sorted(set().union(*(traits(
                self.world_cls, self.path, env, [s for s in ran if s.get("actor", 0) == i])
                for i in range(self.actors_in(ran))), *(
                explore_load.LOADS[name].traits for name in dict.fromkeys(needed + left))))
        if f["check"] != "explorer" and not concurrent:
            steps = shrink(out["steps"], lambda s: self.fails_same(
                setup, s, f["check"], known if self.excuses else None),
                deadline=time.monotonic() + shrink_s, simpler=simpler(self.world_cls))
            record["shrunk"] = renumber(steps)
            # as the shrunk sequence last ran: a wrong "ok" there names its known issue
            ran = self.as_run.get(_run_key(setup, steps), steps)
            record["traits"] = sorted(traits(self.world_cls, self.path, env, ran))
        self.as_run.clear()     # this failure's replays: the next one shrinks its own
        return record


# --- shrinking ----------------------------------------------------------------------------------

def shrink(steps: list[dict], fails: Callable[[list[dict]], bool],
           deadline: float = float("inf"),
           simpler: Callable[[dict], list[dict]] = lambda s: []) -> list[dict]:
    """The shortest sub-sequence found that still fails (ddmin: drop chunks, halving their
    size, to a fixpoint), then each step's arguments made simpler where it still fails (a
    software event for the test PMU's, a smaller buffer). Results are dropped: a replay asks
    the kernel again."""
    current = _drop_steps([{k: v for k, v in s.items() if k != "result"} for s in steps],
                          fails, deadline)
    for i in range(len(current)):
        for alt in simpler(current[i]):
            if time.monotonic() >= deadline:
                return current
            candidate = current[:i] + [alt] + current[i + 1:]
            if fails(candidate):
                current = candidate
                break
    return current


def _drop_steps(current: list[dict], fails: Callable[[list[dict]], bool],
                deadline: float) -> list[dict]:
    n = 2
    while len(current) >= 2 and time.monotonic() < deadline:
        chunk = max(1, len(current) // n)
        smaller = False
        for i in range(0, len(current), chunk):
            candidate = current[:i] + current[i + chunk:]
            if candidate and time.monotonic() < deadline and fails(candidate):
                current, smaller = candidate, True
                break
        if smaller:
            n = max(n - 1, 2)
        elif chunk == 1:
            break
        else:
            n = min(len(current), n * 2)
    return current


def _run_key(setup: dict, steps: list[dict]) -> str:
    """A replay's schedule and steps, as the key of its steps as run (with results)."""
    return json.dumps([setup.get("load", []), [(s["id"], s["op"], s.get("args"))
                                               for s in steps]], sort_keys=True)


def with_splat(out: dict, lines: list[str], concurrent: bool) -> dict:
    """A sequence's result with the splat its log holds: the failure when nothing else
    failed, and for actors and loads at once also in place of a failed end state, which is
    judged after every step (races round 6: race mutant 070's KCSAN report rode on a known
    issue's allowance failure at the end, was shrunk as that failure, its loads dropped, and
    no replay showed the race again). The log is kept either way."""
    f = out["failure"]
    if lines and (f is None or (concurrent and f["at"] == "end")):
        out["failure"] = failure(splat_key(lines), "kernel log", "no splat", first_banner(lines))
    if lines:
        out["kmsg"] = lines
    return out


def renumber(steps: list[dict]) -> list[dict]:
    """Steps with ids 0..n-1 and the references ("@ID" arguments) following them."""
    ids = {s["id"]: i for i, s in enumerate(steps)}

    def ref(a: object) -> object:
        if isinstance(a, str) and a.startswith("@") and int(a[1:]) in ids:
            return f"@{ids[int(a[1:])]}"
        return a
    return [dict(s, id=ids[s["id"]], args={k: ref(a) for k, a in s["args"].items()})
            for s in steps]


# --- command line --------------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="probe_explore.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="verb", required=True)
    r = sub.add_parser("run")
    r.add_argument("path", choices=PATHS)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--budget", type=float, default=10.0, help="seconds of sequences")
    r.add_argument("--shrink", type=float, default=30.0, help="seconds to shrink a failure")
    r.add_argument("--first", type=int, default=0, help="the first sequence's number")
    r.add_argument("--count", type=int, default=10**9)
    r.add_argument("--max-steps", type=int, help="steps a sequence makes at the most "
                   "(default: the path's MAX_STEPS)")
    r.add_argument("--actors", type=int, choices=(1, 2, 3, 4), default=1, help="2 to 4: "
                   "threads at once on one world, judged by the end state and the kernel log")
    r.add_argument("--processes", action="store_true", help="with --actors: each actor a "
                   "process of its own (an mm each), not a thread")
    r.add_argument("--load", default="", help="NAME[@CPU],...: loads beside each sequence "
                   "(explore_load.py LOADS), judged like actors")
    r.add_argument("--excuse", default="[]", help="JSON list of known issues' symptoms "
                   "({checks, traits, splats}): such failures do not hide a new one")
    r.add_argument("--steer", action="store_true", help="on a coverage kernel: keep the "
                   "sequences that run new edges (gcov_edges.py) and start some from them")
    r.add_argument("--available", action="store_true", help="only say whether this kernel "
                   "has the path")
    rp = sub.add_parser("replay")
    rp.add_argument("path", choices=PATHS)
    rp.add_argument("file", help="JSON with setup and steps: a file, '-' (stdin) or the JSON "
                    "itself")
    rp.add_argument("--times", type=int, default=1)
    a = p.parse_args(argv)
    world = world_of(a.path)
    missing = world.missing(a.path)
    if a.verb == "run" and a.actors > 1 and world.ONE_ACTOR and not missing:
        missing = f"not with {a.actors} actors: {world.ONE_ACTOR}"
    if a.verb == "run" and a.available:
        probelib.emit({"path": a.path, "missing": missing})
        return 0
    if missing:
        probelib.emit({"path": a.path, "skip": missing})
        return 0
    if a.verb == "run":
        try:
            loads = explore_load.parse(a.load, a.path, os.sysconf("SC_NPROCESSORS_ONLN"))
        except ValueError as err:
            probelib.emit({"path": a.path, "error": str(err)})
            return 2
        e = Explorer(a.path, a.seed, a.max_steps, a.actors, json.loads(a.excuse), a.steer,
                     loads, a.processes)
        probelib.emit(e.explore(a.first, a.count, a.budget, a.shrink))
        return 0
    doc = json.loads(a.file) if a.file.lstrip().startswith("{") else \
        json.load(sys.stdin if a.file == "-" else open(a.file))
    e = Explorer(a.path, 0)
    outs: list[dict] = []
    with world.session(a.path):
        for i in range(a.times + 1):
            if i == a.times:
                time.sleep(LATE_S)  # the last replay's deferred work
            charged = e.charge_late(outs[-1] if outs else None, e.settle())
            if charged is not None:
                outs[-1] = charged
            if i < a.times:
                outs.append(e.one(doc["setup"], doc["steps"]))
    probelib.emit({"path": a.path, "replays": outs})
    return 0


if __name__ == "__main__":
    probelib.run(main)
