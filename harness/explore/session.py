"""An explore on one kernel: the guest runs probes/probe_explore.py in slices of a few seconds
(one SSH round trip per slice, not per step), the host keeps the count, says how it goes,
replaces a guest that died and blames the sequence the console names, then checks every
distinct failure once more on a fresh guest and binds it to a known issue or calls it new."""
from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from harness import arch as arches
from harness.errors import GuestHang, LabError, ModuleError, ProbeError, ProbeTimeout, SSHError
from harness.explore import reproducer
from harness.guest.guest import Guest
from harness.kernellog import splats
from harness.probe_modules import explore_paths, probe_module
from harness.results import known_issues
from harness.resources import Lab

log = logging.getLogger(__name__)
explore_load = probe_module("explore_load")

SLICE_S = 15.0       # one probe call: long enough that SSH costs nothing, short for progress
SHRINK_S = 40.0      # a slice may also spend this shrinking its first failure of a check
# A concurrent failure (actors, loads) is a schedule's: it is replayed on this many fresh
# guests, this many times in each, and reported as k of N guests (a WARN_ONCE fires once a
# boot, so N replays in one guest cannot count it).
CONFIRM_GUESTS = 3
CONFIRM_TIMES = 3
# A race's replays on one fresh guest go on, CONFIRM_TIMES at a time, until it shows or this
# is spent: a schedule that fails once in tens of runs still confirms, with its count said.
RACE_CONFIRM_S = 30.0
MARK = re.compile(r"ringlab-explore: (?P<path>\S+) seed (?P<seed>\d+) sequence (?P<k>\d+)")


@dataclass(frozen=True)
class ExploreRequest:
    """What `./lab explore` was asked, checked where the command line is read."""
    kernel: str | None
    paths: tuple[str, ...]          # empty: every path the kernel has
    budget_s: float                 # per path
    seed: int
    actors: int = 1
    processes: bool = False         # actors as processes (an mm each), not threads of one
    # Loads beside each sequence (probes/explore_load.py): "NAME[@CPU],...", each path taking
    # the ones that go with it.
    load: str = ""
    # On a coverage kernel: sequences that ran new edges are kept and varied (docs/coverage.md).
    steer: bool = False
    keep: bool = False              # write new failures under tests/kernel/explore/
    # Stop at the first failure no known issue explains (what `./lab mutate --explore` asks:
    # one new failure kills a mutant; the rest of the budget would only confirm it).
    stop_at_new: bool = False
    # With stop_at_new: the failure keys (Failure.key) the unmutated kernel's explore had,
    # which stop nothing: a mutant's explore that meets one of them goes on with its budget.
    baseline: tuple[str, ...] = ()
    # Fresh guests a concurrent failure is replayed on (with stop_at_new: until one shows it).
    confirm_guests: int = CONFIRM_GUESTS
    # Off for `./lab mutate`'s unmutated kernel: every failure it saw, confirmed or not, is
    # the baseline, so replays there only cost time (21 min for 2 x 4 min of exploring, races
    # round 4) and their own splats added failures no sequence had.
    confirm: bool = True


@dataclass
class Failure:
    """One distinct failure (a path and a check) with its shortest sequence."""
    path: str
    check: str
    expected: object
    got: object
    at: object
    seed: int
    sequence: int | None            # its number in the seed's stream (replays it)
    setup: dict
    env: dict
    steps: list[dict]               # shrunk, or as run when it could not be shrunk
    shrunk: bool
    traits: list[str]
    kmsg: list[str] = field(default_factory=list)
    splat: str | None = None        # the harness parser's title of the splat
    seen: int = 1                   # sequences that failed this check
    known_issue: str | None = None
    confirmed: bool | None = None   # failed again from its shortest sequence, fresh guest
    confirm_got: object = None
    # A concurrent failure's confirmation: the fresh guests it was replayed on, and in how
    # many of them it failed again (k of N).
    confirm_tries: int = 0
    confirm_hits: int = 0

    @property
    def key(self) -> str:
        return f"{self.path}:{self.splat or self.check}"

    @property
    def site(self) -> str:
        """The key without source lines: the same failure in two builds whose lines moved
        (what a mutant's explore is compared with the unmutated kernel's by)."""
        return f"{self.path}:{splats.without_lines(self.splat) if self.splat else self.check}"

    @property
    def concurrent(self) -> bool:
        """Found with actors or loads: a schedule's failure, which one replay may not show."""
        return bool(self.setup.get("load")) or any(s.get("actor") for s in self.steps)

    @property
    def slot(self) -> str:
        """Where an explore keeps it: one failure per check for each known issue it is, and
        one that is none (a known issue never hides a new failure of the same check)."""
        return f"{self.key}#{self.known_issue}" if self.known_issue else self.key

    def as_dict(self) -> dict:
        return dict(asdict(self), key=self.key)


@dataclass
class PathResult:
    path: str
    skipped: str | None = None
    stopped: str | None = None      # why the path ended before its budget (it went away)
    sequences: int = 0
    steps: int = 0
    seconds: float = 0.0
    crashes: int = 0
    failures: dict[str, Failure] = field(default_factory=dict)
    # every step the kernel answered, by operation and answer: what the explore reached
    answers: dict[str, dict[str, int]] = field(default_factory=dict)
    # On a coverage kernel: edges of the profiled files run so far (the guest's union at the
    # path's last slice), and when steered the corpus size and the sequences drawn from it.
    edges: int | None = None
    corpus: int | None = None
    steered: int = 0
    # Each load's rounds beside the path's sequences, the ones the kernel did, the sequences
    # it died in, and the first reason it gave (a dead load is the lab's error).
    load: dict[str, dict[str, int | str]] = field(default_factory=dict)

    def add_load(self, more: dict[str, dict[str, int | str]]) -> None:
        """A slice's load counts added to the path's; a dead load's reason kept, not added
        (races round 5: the first dead load's reason stopped the whole mutate run with a
        TypeError)."""
        for name, counts in more.items():
            mine = self.load.setdefault(name, {"rounds": 0, "ok": 0})
            for c, n in counts.items():
                if isinstance(n, int):
                    old = mine.get(c, 0)
                    mine[c] = (old if isinstance(old, int) else 0) + n
                else:
                    mine.setdefault(c, n)

    def add_answers(self, more: dict[str, dict[str, int]]) -> None:
        for op, by in more.items():
            mine = self.answers.setdefault(op, {})
            for result, n in by.items():
                mine[result] = mine.get(result, 0) + n

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0


def guest_cpus(req: ExploreRequest) -> int | None:
    """vCPUs of an explore's guest: two when actors or loads run at once (None: lab.yaml's)."""
    return 2 if req.actors > 1 or req.load else None


def loads_for(spec: str, path: str) -> str:
    """The loads of `spec` ("NAME[@CPU],...") that go with `path` (explore_load.LOADS)."""
    return ",".join(f"{name}@{cpu}" if cpu else name for name, cpu in explore_load.split(spec)
                    if path in explore_load.LOADS[name].paths)


def check_loads(spec: str) -> None:
    """Every load of `spec` is one explore_load.LOADS names, with a whole CPU number; else one
    LabError naming the culprit."""
    for name, cpu in explore_load.split(spec):
        part = f"{name}@{cpu}" if cpu else name
        if name not in explore_load.LOADS:
            raise LabError(f"--load {part!r}: {name!r} is not one of "
                           f"{', '.join(explore_load.LOADS)}")
        if cpu and not cpu.isdigit():
            raise LabError(f"--load {part!r}: the CPU after '@' must be a number")


def _splat_title(lines: list[str]) -> str | None:
    found = splats.find(lines)
    return found[0].title if found else None


def _splat_titles(lines: list[str]) -> list[str]:
    """Every distinct splat title of a kernel log, in order."""
    return list(dict.fromkeys(s.title for s in splats.find(lines)))


def _kernel_log(g: Guest) -> list[str]:
    """The guest's kernel log, or its console where the guest cannot be asked: race mutant
    063's WARN flood (5318 WARNs in 3 s) left the probe runner unable to answer the read of
    the log, and that GuestHang, raised here, ended the explore as the lab's own error (NOT
    BOOTED) while the console held the mutant's WARN after the sequence's mark."""
    try:
        return g.kmsg()
    except LabError:
        return g.vm.console_text().splitlines()


def _splatted_since_mark(path: str, kmsg: list[str]) -> bool:
    """The kernel splatted after the path's last sequence mark: a probe that timed out then,
    no thread in D state, is the kernel's hang, not the lab's (race mutant 063: a WARN flood,
    its GET_READER spinning in the kernel in R state)."""
    text = "\n".join(kmsg)
    marks = [m for m in MARK.finditer(text) if m["path"] == path]
    return bool(marks) and _splat_title(text[marks[-1].end():].splitlines()) is not None


def _check_kind(check: str) -> str:
    """A probe's check as a Failure keeps it: every `splat:<kind>` is one check, "splat"
    (the kind is in the splat's title)."""
    return "splat" if check.startswith("splat:") else check


def _is_new(f: Failure, baseline: tuple[str, ...]) -> bool:
    """No known issue explains f, it is not the explorer's own error, and the baseline (the
    unmutated kernel's explore) did not have its site."""
    return f.known_issue is None and f.check != "explorer" and f.site not in baseline


def _failures(path: str, seed: int, rec: dict) -> list[Failure]:
    """A failed sequence's failures: one per distinct splat it left (a known or baseline
    splat first in the log must not hide a new one after it: race mutant 063's WARN flood
    came after the unmutated kernel's put_snapshot_map WARN), else the one."""
    f = _failure(path, seed, rec)
    if f.splat is None:
        return [f]
    # A later splat was not what the shrink kept: it goes with the sequence as run and the
    # traits of all it did (a moved mapping's WARN beside another WARN, races round 5).
    as_run = [{k: v for k, v in s.items() if k != "result"} for s in rec["steps"]]
    return [f, *(replace(f, splat=t, steps=as_run, shrunk=False, setup=rec["setup"],
                         traits=rec.get("traits_as_run", f.traits))
                 for t in _splat_titles(rec.get("kmsg", []))[1:])]


def _failure(path: str, seed: int, rec: dict) -> Failure:
    f = rec["failure"]
    check = _check_kind(f["check"])
    steps = rec.get("shrunk") or [{k: v for k, v in s.items() if k != "result"}
                                  for s in rec["steps"]]
    return Failure(path=path, check=check, expected=f["expected"], got=f["got"], at=f["at"],
                   seed=seed, sequence=rec.get("sequence"),
                   setup=rec.get("shrunk_setup") or rec["setup"],
                   env=rec.get("env", {}), steps=steps, shrunk="shrunk" in rec,
                   traits=rec.get("traits", []), kmsg=rec.get("kmsg", []),
                   splat=_splat_title(rec.get("kmsg", [])))


def explore_cmdline(arch_name: str) -> str:
    """The explorer's guests boot with the persistent trace buffers its trace-mmap model maps
    (probes/explore_trace.py PERSISTENT), where the arch can place one."""
    return probe_module("explore_trace").persistent_cmdline(arches.get(arch_name).fixed_ram)


def parse_budget(text: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*", text)
    if not m:
        raise LabError(f"--budget {text!r}: expected a duration like 90s, 10m or 1h")
    seconds = float(m[1]) * {"s": 1, "m": 60, "h": 3600, None: 1}[m[2]]
    if seconds <= 0:
        raise LabError(f"--budget {text!r}: the budget must be more than 0")
    return seconds


class Explore:
    """One kernel, the request's paths, one guest at a time."""

    def __init__(self, lab: Lab, request: ExploreRequest, out_dir: Path,
                 say: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> None:
        self.lab, self.req, self.out_dir, self.say = lab, request, out_dir, say
        self.kernel = lab.kernel(request.kernel)
        self.console_log = out_dir / "console.log"
        self.guest: Guest | None = None
        self.boots = 0
        self.results: list[PathResult] = []

    # --- guests ---
    def fresh_guest(self) -> Guest:
        self.stop_guest()
        self.guest = self.lab.boot(self.kernel.name, self.console_log,
                                   cpus=guest_cpus(self.req),
                                   cmdline=explore_cmdline(self.kernel.arch))
        self.boots += 1
        try:
            self.guest.insmod(self.lab.module("ringlab_aux", self.kernel.name))
        except ModuleError as e:
            log.info("no test PMU on %s (%s): perf-aux is skipped, pinning maps no AUX",
                     self.kernel.name, e)
        return self.guest

    def stop_guest(self) -> None:
        if self.guest is not None:
            self.guest.stop()
            self.guest = None

    def _probe(self, args: list[str], timeout: float) -> dict:
        g = self.guest or self.fresh_guest()
        return g.probe("probe_explore", args, timeout=timeout).data

    # --- one path ---
    def run_path(self, path: str, res: PathResult,
                 issues: Sequence[known_issues.KnownIssue] = ()) -> None:
        first = 0
        excuses = json.dumps([{"checks": list(i.explore_checks), "traits": list(i.explore_traits),
                               "splats": list(i.splats)}
                              for i in issues if path in i.explore_paths])
        avail = self._probe(["run", path, "--available", "--actors", str(self.req.actors)], 60)
        if avail.get("missing"):
            res.skipped = avail["missing"]
            self.say(f"{path}: skipped: {res.skipped}")
            return
        start = time.monotonic()
        while (left := self.req.budget_s - (time.monotonic() - start)) > 0.5:
            slice_s = min(SLICE_S, left)
            try:
                out = self._probe(["run", path, "--seed", str(self.req.seed), "--first",
                                   str(first), "--budget", f"{slice_s:.1f}", "--shrink",
                                   str(SHRINK_S), "--actors", str(self.req.actors),
                                   *(["--processes"] if self.req.processes else []),
                                   "--load", loads_for(self.req.load, path),
                                   "--excuse", excuses,
                                   *(["--steer"] if self.req.steer else [])],
                                  slice_s + 2 * SHRINK_S + 90)
            except (ProbeError, SSHError, GuestHang) as e:
                first = self._crashed(path, res, first, e)
                # a mutant's crash or hang is its kill as soon as it is confirmed: race mutant
                # 063 hung every sequence, 186 s each, for its whole budget (races round 5)
                if self.req.stop_at_new and self.new_found(res, self.req.baseline) \
                        and self.confirm_new(res):
                    self.say(f"{path}: stopping at a confirmed failure no known issue explains")
                    return
                continue
            if "skip" in out:   # the path went away between two slices: what it found stays
                res.stopped = f"{out['skip']} (after {res.sequences} sequences)"
                self.say(f"{path}: stopped: {res.stopped}")
                return
            first = out["next"]
            res.add_answers(out.get("answers", {}))
            res.add_load(out.get("load", {}))
            res.sequences += out["sequences"]
            res.steps += out["steps"]
            res.seconds += out["seconds"]
            if "edges" in out:
                res.edges = out["edges"]
            if "corpus" in out:
                res.corpus = out["corpus"]
                res.steered += out.get("steered", 0)
            for f in (f for rec in out["failures"] for f in _failures(path, self.req.seed, rec)):
                self.bind(f, issues)
                if f.slot in res.failures:
                    res.failures[f.slot].seen += 1
                else:
                    res.failures[f.slot] = f
                    self.say(f"{path}: failure {f.key}: {f.got} after {len(f.steps)} "
                             f"step(s){' (known issue ' + f.known_issue + ')' if f.known_issue else ''}")
            for key, n in out.get("failed", {}).items():
                check, known = key.removesuffix("~known"), key.endswith("~known")
                for f in res.failures.values():
                    if f.check == _check_kind(check) \
                            and (f.known_issue is not None) == known:
                        f.seen = max(f.seen, n)
            self.say(f"{path}: {res.sequences} sequences, {res.steps} steps "
                     f"({res.steps_per_s:.0f}/s), {len(res.failures)} distinct failure(s), "
                     f"{max(0.0, self.req.budget_s - (time.monotonic() - start)):.0f} s left")
            if self.req.stop_at_new and self.new_found(res, self.req.baseline) \
                    and self.confirm_new(res):
                self.say(f"{path}: stopping at a confirmed failure no known issue explains")
                return

    @staticmethod
    def new_found(res: PathResult, baseline: tuple[str, ...] = ()) -> bool:
        """A failure no known issue explains, the explorer's own errors aside, none the
        baseline (the unmutated kernel's explore) had, and not already refused by a fresh
        guest."""
        return any(_is_new(f, baseline) and f.confirmed is not False
                   for f in res.failures.values())

    def confirm_new(self, res: PathResult) -> bool:
        """Confirm the new failures now, so that one a fresh guest does not show again stops
        nothing and the budget goes on (a race shows in some schedules only)."""
        for f in res.failures.values():
            if _is_new(f, self.req.baseline) and f.confirmed is None:
                self.confirm(f)
                self.say(f"{res.path}: {f.key}: "
                         f"{'confirmed' if f.confirmed else 'NOT confirmed'} ({f.confirm_got})")
        return any(f.confirmed and _is_new(f, self.req.baseline)
                   for f in res.failures.values())

    def _crashed(self, path: str, res: PathResult, first: int, error: LabError) -> int:
        """The guest died (or stopped answering) in a slice: the console's last
        `ringlab-explore:` line names the sequence; it is a failure of its own (a crash), the
        guest is replaced, and the explore goes on after it. A probe that failed in a live
        guest is the lab's own error and stops the explore."""
        g = self.guest
        dead = g.health() if g is not None else "no guest"
        hung = isinstance(error, ProbeTimeout) and bool(error.in_kernel)
        kmsg = _kernel_log(g) if g is not None and dead is None else []
        if isinstance(error, ProbeTimeout) and not hung and g is not None and dead is None:
            hung = _splatted_since_mark(path, kmsg)
        if g is not None and dead is None and isinstance(error, ProbeError) and not hung:
            raise error
        console = g.vm.console_text() if g is not None else ""
        if hung and g is not None and dead is None:   # the marks also sit in the kernel log
            console += "\n" + "\n".join(kmsg)
        marks = [m for m in MARK.finditer(console) if m["path"] == path]
        k = int(marks[-1]["k"]) if marks else first
        tail = console[marks[-1].end():] if marks else console[-8000:]
        lines = tail.splitlines()
        title = _splat_title(lines)
        res.crashes += 1
        said = str(error).splitlines()
        # a hang: a thread of the sequence stuck in the kernel, its stacks the evidence
        check, expected, got, kmsg = (
            ("hang", "every call returns", said[0][:300], said[1:40] + lines[-20:]) if hung
            else ("crash", "the guest lives", str(dead or error), lines[-60:]))
        f = Failure(path=path, check=check, expected=expected, got=got, at="guest",
                    seed=self.req.seed, sequence=k, setup={}, env={}, steps=[], shrunk=False,
                    traits=[], kmsg=kmsg, splat=title)
        # one per distinct splat, as a failed sequence: race mutant 063's crash took the known
        # nr_dirty_pages WARN, first in the tail, and hid its own rb_advance_reader race
        for one in [f, *(replace(f, splat=t) for t in _splat_titles(lines)[1:])]:
            res.failures.setdefault(one.slot, one)
        self.say(f"{path}: the guest {'hung' if hung else 'died'} in sequence {k} "
                 f"({dead or said[0][:160]}); a fresh guest goes on after it")
        self.stop_guest()
        return k + 1

    def run_all(self) -> None:
        """Every requested path for its budget, then each failure bound and confirmed; the
        results so far stay in self.results when Ctrl-C stops it."""
        issues = known_issues.load()
        for path in self.req.paths or explore_paths():
            res = PathResult(path)
            self.results.append(res)
            self.run_path(path, res, issues)
            if self.req.stop_at_new and self.new_found(res, self.req.baseline):
                break
        for res in self.results:
            for f in res.failures.values():
                if f.check == "explorer" or f.confirmed is not None:   # nothing (more) to do
                    continue
                if self.req.stop_at_new and f.known_issue:   # only the new one is asked
                    continue
                if not self.req.confirm:
                    f.confirm_got = "not replayed (a baseline: seen once is enough)"
                    continue
                self.confirm(f)
                if f.known_issue is None:   # the sequence as run may have more traits
                    self.bind(f, issues)
                where = f"in {str(f.confirm_got).split(':')[0]}" if f.confirm_tries \
                    else "on a fresh guest"
                self.say(f"{res.path}: {f.key}: "
                         f"{'confirmed' if f.confirmed else 'NOT confirmed'} {where}"
                         f"{' (known issue ' + f.known_issue + ')' if f.known_issue else ' (new)'}")

    # --- after the explore ---
    def bind(self, f: Failure, issues: Sequence[known_issues.KnownIssue]) -> None:
        """The known issue that explains the failure's check (and its splat); or two at once,
        one the check's and the other the splat's (each by a trait of the sequence: a fork's
        closed reader and a moved mapping's WARN, 7.2.13 round 10), named "A+B"."""
        for issue in issues:
            if issue.explains_explore(f.path, f.check, f.traits, f.splat, f.got):
                f.known_issue = issue.id
                return
        if f.splat is None or f.check == "splat":
            return
        by_check = next((i for i in issues
                         if i.explains_explore(f.path, f.check, f.traits, None, f.got)), None)
        by_splat = next((i for i in issues
                         if i.explains_explore(f.path, "splat", f.traits, f.splat)), None)
        if by_check is not None and by_splat is not None:
            f.known_issue = f"{by_check.id}+{by_splat.id}"

    def confirm(self, f: Failure) -> None:
        """The shortest sequence once more, on a fresh guest: the same check must fail."""
        if f.concurrent or guest_cpus(self.req):   # a race explore's, even shrunk to one actor
            self.confirm_concurrent(f)
            return
        if f.check in ("crash", "hang") and f.sequence is not None:
            args = self._as_run(f)
        else:
            args = ["replay", f.path, reproducer.replay_json(f)]
        self.fresh_guest()
        try:
            out = self._probe(args, 90 if f.check == "hang" else 300)
        except (ProbeError, SSHError, GuestHang) as e:
            f.confirmed = f.check in ("crash", "hang")
            f.confirm_got = f"the guest died: {self.guest.health() if self.guest else e}"
            self.stop_guest()
            return
        runs = out.get("replays") or [{"failure": r["failure"], "kmsg": r.get("kmsg", [])}
                                      for r in out.get("failures", [])]
        got = runs[0]["failure"] if runs else None
        if got is None:
            f.confirmed, f.confirm_got = False, "no failure"
            return
        check = _check_kind(got["check"])
        titles = _splat_titles(runs[0].get("kmsg", []))
        title = f.splat if f.splat in titles else (titles[0] if titles else None)
        f.confirmed = check == f.check and (f.splat is None or f.splat in titles)
        f.confirm_got = got["got"] if not title else title
        if not f.confirmed and check == f.check and f.splat and f.shrunk \
                and f.sequence is not None:
            self.confirm_as_run(f)

    def confirm_concurrent(self, f: Failure) -> None:
        """A schedule's failure: its sequences (every actor's, the loads beside them) replayed
        on each of up to req.confirm_guests fresh guests, CONFIRM_TIMES at a time until one
        shows it again or RACE_CONFIRM_S is spent on that guest (race mutant 066, round 4:
        its ring_buffer_map WARN came 5 times in 400 sequences, and 3 replays a guest never
        showed it); confirmed when one guest did (with stop_at_new, the first such ends
        it), said with its replays: a race that shows once in N is reported with N."""
        as_run = f.check in ("crash", "hang") and f.sequence is not None
        args = self._as_run(f) if as_run \
            else ["replay", f.path, reproducer.replay_json(f), "--times", str(CONFIRM_TIMES)]
        seen: list[str] = []
        replays = 0
        for _ in range(max(1, self.req.confirm_guests)):
            self.fresh_guest()
            f.confirm_tries += 1
            until = time.monotonic() + RACE_CONFIRM_S
            hit = False
            while not hit:
                try:
                    out = self._probe(args, 90 if f.check == "hang" else 300 * CONFIRM_TIMES)
                except (ProbeError, SSHError, GuestHang) as e:
                    hit = f.check in ("crash", "hang")
                    seen.append(f"the guest died: {self.guest.health() if self.guest else e}")
                    self.stop_guest()
                    replays += 1
                    break
                runs = out.get("replays") or out.get("failures", [])
                replays += len(runs) or 1
                hits = [r for r in runs if self._same(f, r)]
                hit = bool(hits)
                got = hits[0] if hits else next((r for r in runs if r.get("failure")), None)
                if got or hit:
                    seen.append(self._got(got) if got else "no failure")
                if as_run or time.monotonic() >= until:
                    break
            if not seen:
                seen.append("no failure")
            f.confirm_hits += hit
            if hit and self.req.stop_at_new:
                break
        f.confirmed = f.confirm_hits > 0
        f.confirm_got = (f"{f.confirm_hits} of {f.confirm_tries} fresh guests, "
                         f"{replays} replays: " + "; ".join(dict.fromkeys(seen)))

    @staticmethod
    def _same(f: Failure, run: dict) -> bool:
        """A replay failed f's check (and showed its splat, when f has one). A crash's or
        hang's splat shown by a replay whose guest lived is the same bug (race mutant 063:
        the WARN flood that hung one guest came back as WARNs in another)."""
        got = run.get("failure")
        if not got:
            return False
        check = _check_kind(got["check"])
        shown = f.splat is not None and f.splat in _splat_titles(run.get("kmsg", []))
        if f.check in ("crash", "hang") and check == "splat":
            return shown
        return check == f.check and (f.splat is None or shown)

    @staticmethod
    def _got(run: dict) -> str:
        title = _splat_title(run.get("kmsg", []))
        return title or str(run["failure"]["got"])[:200]

    def confirm_as_run(self, f: Failure) -> None:
        """The shrunk sequence kept the check but lost the splat that came with it: a
        WARN_ONCE fires once a boot, so the shrink, judged by the check in the same guest,
        could not keep it (7.3~rc7 seed 52, round 5). The sequence as it ran, on a fresh
        guest; if the splat comes back, that sequence is the failure's (its reproducers too)."""
        self.fresh_guest()
        try:
            out = self._probe(self._as_run(f), 300)
        except (ProbeError, SSHError, GuestHang) as e:
            f.confirm_got = f"{f.confirm_got}; the sequence as run: the guest died ({e})"
            self.stop_guest()
            return
        runs = out.get("failures", [])
        titles = _splat_titles(runs[0].get("kmsg", [])) if runs else []
        if f.splat not in titles:
            f.confirm_got = (f"{f.confirm_got}; the sequence as run: "
                             f"{titles[0] if titles else 'no splat'}")
            return
        f.confirmed, f.confirm_got, f.shrunk = True, f.splat, False
        f.steps = [{k: v for k, v in s.items() if k != "result"} for s in runs[0]["steps"]]
        f.traits = sorted(probe_module("probe_explore").traits(
            reproducer.world(f.path), f.path, dict(f.setup, **f.env), f.steps))

    def _as_run(self, f: Failure) -> list[str]:
        """The probe's arguments that run f's sequence again as the seed drew it, unshrunk."""
        return ["run", f.path, "--seed", str(f.seed), "--first", str(f.sequence), "--count",
                "1", "--shrink", "0", "--actors", str(self.req.actors),
                *(["--processes"] if self.req.processes else []),
                "--load", loads_for(self.req.load, f.path)]
