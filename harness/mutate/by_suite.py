"""Mutants judged by the suite: the unmutated kernel's `./lab run`, then each mutant's on the
same selection (narrowed by its Tests: header unless --whole-suite), in a child run as review
and bisect do; a kill is what outcomes.judge says."""
from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path

from harness.errors import LabError
from harness.kernels.mutants import Mutant
from harness.mutate import build

from harness.mutate.outcomes import (NOT_RUN, Judged, MutantResult, judge, selftest_killers,
                                     selftests_that_cannot_kill)
from harness.mutate.plan import Plan
from harness.mutate.workspace import Workspace
from harness.runs import child_run, request
from harness.selftests import catalog
from harness.runs.child_run import ChildRun

log = logging.getLogger(__name__)

def judge_all(plan: Plan, ws: Workspace, release: str, outs: list[Path], base_dir: Path,
              base_build_s: float) -> Judged:
    """The unmutated kernel's run (it must have booted and run), then each mutant's."""
    log.info("mutate: running the tests on the unmutated kernel %s (%s)", release,
             plan.selection or "the whole suite")
    base, base_run = run_tests(plan, ws.src, plan.selection, base_dir,
                               catalog.selection_for_all([m.file for m in plan.mutants]))
    if base.summary is None or base.exit_code not in (0, 1):
        raise LabError(f"the tests could not run on the unmutated kernel (exit "
                       f"{base.exit_code}); see {base_dir}.log")
    if not base.booted:
        raise LabError(f"the unmutated kernel did not boot; see {base_dir}")
    counts = base.summary.get("counts", {})
    log.info("mutate: unmutated kernel: %s (build %.0f s, run %.0f s)",
             ", ".join(f"{v} {o}" for o, v in sorted(counts.items())), base_build_s, base_run)
    results = []
    for i, m in enumerate(plan.mutants, 1):
        r = one(plan, ws, m, outs, base)
        results.append(r)
        log.info("mutant %d/%d %s: %s%s (build %.0f s, run %.0f s)", i, len(plan.mutants),
                 m.id, r.outcome.upper(), f": {r.why}" if r.why else "", r.build_s, r.run_s)
    return Judged(results, plan.selection, plan.whole_suite, counts, base_run, str(base_dir))

def one(plan: Plan, ws: Workspace, m: Mutant, outs: list[Path], baseline: ChildRun
        ) -> MutantResult:
    """One mutant built, run and judged against the unmutated run."""
    r, run_dir = build.new_result(plan, m)
    with build.mutant_built(plan, ws, m, outs, r) as built:
        if not built:
            return r
        tests = plan.selection if plan.whole_suite else both(plan.selection, m.tests)
        child, run_s = run_tests(plan, ws.src, tests, run_dir, catalog.selection_for(m.file),
                                 selftests_that_cannot_kill(baseline))
        r.run_s = round(run_s, 1)
    r.outcome, r.killed_by, r.why = judge(baseline, child)
    if plan.selftests and child.summary is not None and not child.not_run:
        r.selftest_killers = selftest_killers(baseline, child)
    if r.outcome == NOT_RUN:
        r.why = f"./lab run exit {child.exit_code}; see {run_dir}.log"
    return r

def both(a: str | None, b: str | None) -> str | None:
    """Two -k expressions, each narrowing the other."""
    if a and b:
        return f"({a}) and ({b})"
    return a or b

def run_tests(plan: Plan, tree: Path, selection: str | None, run_dir: Path,
              selftests: str = catalog.KSELFTEST, left_out: tuple[str, ...] = ()
              ) -> tuple[ChildRun, float]:
    """`./lab run` of the kernel built from `tree`, in a child; its output goes to
    run_dir.log. Stopped (and its guests with it) if we are interrupted. With --selftests
    the kernel's own that `selftests` (a -k) picks run too, but for the `left_out` node ids
    (pytest --deselect)."""
    if plan.selftests and selection:
        selection = catalog.with_selftests(selection, selftests)
    req = request.make(plan.cfg, plan.spec, run_dir, selection=selection, tree=tree,
                       selftests=plan.selftests, jobs=str(plan.jobs),
                       pytest_args=plan.pytest_args + tuple(f"--deselect={t}" for t in left_out))
    start = time.monotonic()
    with open(f"{run_dir}.log", "w") as out:
        out.write("$ " + " ".join(child_run.argv(req)) + "\n")
        out.flush()
        child = child_run.run(req, stdout=out, stderr=subprocess.STDOUT)
    return child, time.monotonic() - start
