"""The whole mutation run: the workspace opened on the kernel's tree, each mutant's patch for
that tree found before hours are spent, the unmutated kernel built, every mutant judged (by
the suite or the explorer), and the kill table written and printed."""
from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, replace

from harness import cache
from harness.config import BuildKernel
from harness.errors import LabError
from harness.kernels import mutants as catalogs
from harness.mutate import build, by_explore, by_suite

from harness.mutate.outcomes import SURVIVED, Judged, totals
from harness.mutate.plan import Plan
from harness.mutate.table import render
from harness.mutate.workspace import Workspace
from harness.resources import Lab

log = logging.getLogger(__name__)

def run(plan: Plan) -> int:
    """The mutation run; prints the kill table. Exit 0 when every built and booted mutant was
    killed, 1 when some survived."""
    spec = plan.spec
    if not isinstance(spec.source, BuildKernel):
        raise LabError(f"kernel {plan.name} is not a `build` kernel of {plan.cfg.path}: "
                       "./lab mutate rebuilds the kernel with each mutant")
    start = time.monotonic()
    tree = Lab(plan.cfg).builder().tree(spec, spec.source)
    ws = Workspace(tree, cache.cache_root(plan.cfg.cache_dir))
    with ws.opened():
        # Each mutant's patch for this tree; every mutant must have one before hours are spent.
        kept, newer = catalogs.since_split(list(plan.mutants), ws.src)
        for line in newer:
            log.info("mutate: %s", line)
        plan = replace(plan, mutants=tuple(catalogs.for_tree_all(kept, ws.src, ws.tree)))
        log.info("mutate: building the unmutated kernel %s from %s", plan.name, ws.src)
        t = time.monotonic()
        k, report = build.build(plan, ws.src)
        base_build = time.monotonic() - t
        judge = by_explore.judge_all if plan.explore_s else by_suite.judge_all
        judged = judge(plan, ws, k.release, build.outs(k, report),
                       plan.report_dir / "unmutated", base_build)
    doc = document(plan, k.release, str(tree), judged, base_build, time.monotonic() - start)
    text = render(doc)
    (plan.report_dir / "mutate.json").write_text(json.dumps(doc, indent=2) + "\n")
    (plan.report_dir / "mutate.txt").write_text(text)
    print(text, end="")
    log.info("mutate reports in %s", plan.report_dir)
    return 1 if doc["totals"][SURVIVED] else 0

def document(plan: Plan, release: str, tree: str, judged: Judged, base_build_s: float,
             wall_s: float) -> dict:
    """mutate.json: the run, the unmutated kernel and every mutant's row, with the totals."""
    return {"kernel": plan.name, "release": release, "tree": tree,
            "selection": judged.selection, "whole_suite": judged.whole_suite,
            "wall_s": round(wall_s, 1),
            "unmutated": {"counts": judged.base_counts, "build_s": round(base_build_s, 1),
                          "run_s": round(judged.base_run_s, 1), "report": judged.base_report},
            "totals": totals(judged.results),
            "mutants": [asdict(r) for r in judged.results]}
