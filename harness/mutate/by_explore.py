"""Mutants judged by the explorer (`./lab mutate --explore`): the unmutated kernel explored
on every path the mutants' files serve, then each mutant on its own file's paths; a kill is a
confirmed failure the unmutated kernel's explore did not have: one no known issue explains,
or a known issue's the unmutated kernel did not show ("newly known": the known bug brought
back, a regression as in by_suite).
With --selftests the kernel's own selftests also run on each mutant's build (judged apart, as
by_suite does), so one build gives both columns."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.config import with_build
from harness.errors import LabError
from harness.explore import report
from harness.explore.session import Explore, ExploreRequest
from harness.kernels.mutants import Mutant, watchers_of_folder
from harness.mutate import build, by_suite

from harness.mutate.outcomes import (KILLED, NOT_BOOTED, NOT_RUN, SURVIVED, ExploreRun, Judged,
                                     selftest_killers, selftests_that_cannot_kill)
from harness.mutate.plan import Plan
from harness.mutate.workspace import Workspace
from harness.probe_modules import explore_paths as explore_paths_of_probes
from harness.resources import Lab
from harness.runs.child_run import ChildRun
from harness.selftests import catalog

log = logging.getLogger(__name__)
# The explorer's paths a kernel file serves; a file not named, those of its folder
# (mutants.WATCHERS_OF_FOLDER); a file of neither (a user's mutant of mm/mmap.c), every path.
# Only where a file serves fewer paths than its folder: perf's ring_buffer.c is no pinning path.
EXPLORE_PATHS = {"kernel/events/ring_buffer.c": ("perf-ring", "perf-aux")}
KNOWN = "known:"    # the key of a known issue's failures in Found.failures


@dataclass
class Found:
    """What one explore found. `failures`: {key: what failed}, keyed by site, a known issue's
    by KNOWN + its id (once). `sites`: the site of every failure of the unmutated kernel's
    explore, bound to a known issue or not: the same WARN unbound in a mutant's run (a path
    the issue's traits do not name) is no kill."""
    failures: dict[str, str] = field(default_factory=dict)
    sites: frozenset[str] = frozenset()

    def baseline(self) -> tuple[str, ...]:
        """What a mutant's failure must differ from, as the explorer compares it."""
        return tuple(dict.fromkeys([*self.failures, *sorted(self.sites)]))

    def new_in(self, mutant: Found) -> list[str]:
        """What the mutant's explore found that this (the unmutated kernel's) did not."""
        return [v for key, v in mutant.failures.items()
                if key not in self.failures and key not in self.sites]


def explore_paths(file: str) -> tuple[str, ...]:
    """The explorer's paths that can see a change to `file` (a path in the tree)."""
    if file in EXPLORE_PATHS:
        return EXPLORE_PATHS[file]
    watchers = watchers_of_folder(file)
    return watchers.explore_paths if watchers else explore_paths_of_probes()


def paths_of(mutants: tuple[Mutant, ...], only: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The explorer's paths the mutants' files serve, each once, in order (of `only`'s, if
    named)."""
    return tuple(dict.fromkeys(p for m in mutants for p in mutant_paths(m, only)))


def mutant_paths(m: Mutant, only: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The paths a mutant is explored on: its file's, narrowed to `only` (--paths)."""
    return tuple(p for p in explore_paths(m.file) if not only or p in only)


def check_paths(mutants: tuple[Mutant, ...], only: tuple[str, ...]) -> None:
    """--paths: each a path the explorer models, and each mutant keeps one; else one error
    naming the culprit."""
    known = explore_paths_of_probes()
    for p in only:
        if p not in known:
            raise LabError(f"--paths {p}: not a path the explorer models ({', '.join(known)})")
    for m in mutants:
        if only and not mutant_paths(m, only):
            raise LabError(f"--paths {','.join(only)}: mutant {m.id} ({m.file}) is explored on "
                           f"{', '.join(explore_paths(m.file))}, none of them; leave it out "
                           f"with --mutants or name one of its paths")

def runs_of(plan: Plan) -> list[tuple[int, bool]]:
    """The explores every kernel gets, (seed, steered): per seed the modes take turns, so
    that a host busier at one moment does not weigh on one mode alone."""
    return [(seed, steer) for seed in plan.seeds for steer in plan.modes]


def run_name(seed: int, steer: bool) -> str:
    return f"seed{seed}-{'steered' if steer else 'blind'}"


def judge_all(plan: Plan, ws: Workspace, release: str, outs: list[Path], base_dir: Path,
              base_build_s: float) -> Judged:
    paths = paths_of(plan.mutants, plan.paths)
    runs = runs_of(plan)
    many = len(runs) > 1
    log.info("mutate: exploring the unmutated kernel %s (%s, %.0f s each%s)", release,
             ", ".join(paths), plan.explore_s,
             f"; {len(runs)} explores: " + ", ".join(run_name(*r) for r in runs) if many else "")
    bases: dict[tuple[int, bool], Found] = {}
    base_run = 0.0
    for seed, steer in runs:
        found, took = explore(plan, ws.src, paths,
                              base_dir / run_name(seed, steer) if many else base_dir,
                              seed, steer, stop_at_new=False)
        bases[(seed, steer)], base_run = found, base_run + took
    unexplained = sorted({v for base in bases.values() for key, v in base.failures.items()
                          if not key.startswith(KNOWN)})
    log.info("mutate: unmutated kernel: %d failure(s) no known issue explains: %s",
             len(unexplained), "; ".join(unexplained) or "none")
    base_st = selftests_base(plan, ws, base_dir) if plan.selftests else None
    no_verdict = selftests_that_cannot_kill(base_st) if base_st is not None else ()
    results = []
    for i, m in enumerate(plan.mutants, 1):
        r, run_dir = build.new_result(plan, m)
        with build.mutant_built(plan, ws, m, outs, r) as built:
            if built:
                try:
                    r.explored = [explore_mutant(plan, ws.src, m, run_dir, seed, steer,
                                                 bases[(seed, steer)], many)
                                  for seed, steer in runs]
                    r.run_s = round(sum(e.seconds for e in r.explored), 1)
                except LabError as e:
                    r.outcome, r.why = NOT_BOOTED, e.message.splitlines()[0][:300]
                if base_st is not None:
                    theirs = catalog.selection_for(m.file)
                    child, _ = by_suite.run_tests(plan, ws.src, theirs, run_dir / "selftests",
                                                  theirs, no_verdict)
                    if child.summary is not None and not child.not_run:
                        r.selftest_killers = selftest_killers(base_st, child)
        if r.outcome == NOT_RUN:
            kills = [e for e in r.explored or [] if e.killed]
            r.outcome = KILLED if kills else SURVIVED
            r.killed_by = list(dict.fromkeys(e.by for e in kills))
            r.why = kills[0].by if kills else ""
        results.append(r)
        log.info("mutant %d/%d %s: %s%s (build %.0f s, explore %.0f s)%s%s", i,
                 len(plan.mutants), m.id, r.outcome.upper(), f": {r.why}" if r.why else "",
                 r.build_s, r.run_s,
                 "; " + ", ".join(f"{run_name(e.seed, e.steered)} "
                                  f"{'killed' if e.killed else 'survived'} {e.seconds:.0f} s"
                                  for e in r.explored or []) if many else "",
                 "" if r.selftest_killers is None else
                 "; kernel selftests: " + ("KILLED" if r.selftest_killers else "survived"))
    how = (f"./lab explore {' '.join(paths)} --budget {plan.explore_s:g}s --seed "
           + ",".join(map(str, plan.seeds))
           + ("" if plan.modes == (False,) else " --steer" if plan.modes == (True,)
              else ", blind and --steer"))
    return Judged(results, how, False, {"failures no known issue explains": len(unexplained)}, base_run,
                  str(base_dir))


def explore_mutant(plan: Plan, tree: Path, m: Mutant, run_dir: Path, seed: int, steer: bool,
                   base: Found, many: bool) -> ExploreRun:
    """One explore of the mutant's kernel: killed when it confirms a failure the unmutated
    kernel's explore with the same seed and mode did not have."""
    found, took = explore(plan, tree, mutant_paths(m, plan.paths),
                          run_dir / run_name(seed, steer) if many else run_dir, seed, steer,
                          baseline=base.baseline())
    new = base.new_in(found)
    return ExploreRun(seed, steer, bool(new), new[0] if new else "", round(took, 1))


def selftests_base(plan: Plan, ws: Workspace, base_dir: Path) -> ChildRun:
    """The kernel's own selftests on the unmutated kernel: only a case that passes there can
    kill."""
    log.info("mutate: the kernel's own selftests on the unmutated kernel")
    run_dir = base_dir / "selftests"
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    theirs = catalog.selection_for_all([m.file for m in plan.mutants])
    child, run_s = by_suite.run_tests(plan, ws.src, theirs, run_dir, theirs)
    if child.summary is None or child.exit_code not in (0, 1):
        raise LabError(f"the kernel's selftests could not run on the unmutated kernel (exit "
                       f"{child.exit_code}); see {run_dir}.log")
    counts = child.summary.get("counts", {})
    log.info("mutate: unmutated kernel's selftests: %s (%.0f s)",
             ", ".join(f"{v} {o}" for o, v in sorted(counts.items())), run_s)
    return child


def explore(plan: Plan, tree: Path, paths: tuple[str, ...], out_dir: Path, seed: int,
            steer: bool, stop_at_new: bool = True, baseline: tuple[str, ...] = ()
            ) -> tuple[Found, float]:
    """`./lab explore` of the kernel built from `tree` on `paths`: its confirmed failures (the
    unmutated kernel's unconfirmed ones too, and all their sites), and the wall time. The
    unmutated kernel's (stop_at_new off) replays nothing: seen once, a failure is its own."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lab = Lab(with_build(plan.cfg, plan.name, tree=tree))
    run = Explore(lab, ExploreRequest(plan.name, paths, plan.explore_s or 60, seed=seed,
                                      actors=plan.actors, load=plan.load, steer=steer,
                                      processes=plan.processes,
                                      stop_at_new=stop_at_new, baseline=baseline,
                                      confirm=stop_at_new), out_dir,
                  say=lambda line: log.debug("%s", line))
    start = time.monotonic()
    try:
        run.run_all()
    finally:
        run.stop_guest()
        # every failure, known or new, with its reproducers: why a mutant was judged so
        report.write(out_dir, run.req, plan.name, run.kernel.release, run.results, False)
    found: dict[str, str] = {}
    sites: set[str] = set()
    # The unmutated kernel's explore (stop_at_new off) gives every failure it saw, confirmed
    # or not: a race the unmutated kernel shows 1 time in N is no mutant's kill.
    for f in (f for r in run.results for f in r.failures.values()
              if f.confirmed or not stop_at_new and f.check != "explorer"):
        if not stop_at_new:
            sites.add(f.site)
        if f.known_issue:
            found.setdefault(f"{KNOWN}{f.known_issue}",
                             f"newly known {f.known_issue}: {f.key}: {f.got}"[:200])
        else:
            # by site: a mutant that moves lines must not turn the unmutated kernel's WARN new
            odds = f" ({str(f.confirm_got).split(':')[0]})" if f.confirm_tries else ""
            found[f.site] = f"{f.key}: {str(f.got)[:120]}{odds}"[:240]
    return Found(found, frozenset(sites)), time.monotonic() - start
