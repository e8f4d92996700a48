"""One bisect step on the commit checked out in a tree: build it (a build failure is what
--on-build-failure says), run the selection in a child `./lab run`, and answer git bisect
run (steps.status); anything the lab itself cannot do aborts the bisect. Every step is
appended to steps.jsonl."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.bisect import steps
from harness.bisect.steps import ABORT, POLICY, RESULT, Step
from harness.config import KernelSpec, LabConfig, with_build
from harness.errors import BuildError, LabError
from harness.kernels import trees
from harness.resources import Lab
from harness.runs import child_run, request


@dataclass(frozen=True)
class StepRequest:
    """What a step is asked: `cfg` holds `spec` (resolved once, by the verb)."""
    cfg: LabConfig
    spec: KernelSpec
    tree: Path
    selection: str | None
    steps_log: Path
    report_dir: Path
    pytest_args: tuple[str, ...] = ()
    on_build_failure: str = "skip"
    on_boot_failure: str = "skip"


def run(req: StepRequest) -> int:
    """The step on the commit checked out in req.tree; the exit status git bisect run
    understands."""
    start = time.monotonic()
    commit = trees.git(req.tree, "rev-parse", "HEAD")
    subject = trees.git(req.tree, "show", "-s", "--format=%s", "HEAD", check=False)
    build_s = test_s = 0.0

    def done(result: str, why: str) -> None:
        steps.record(req.steps_log, Step(commit, subject, result, why, build_s, test_s,
                                         time.monotonic() - start))
    try:
        try:
            Lab(with_build(req.cfg, req.spec.name, tree=req.tree)).kernel(req.spec.name)
        except BuildError as e:
            build_s = time.monotonic() - start
            code = POLICY[req.on_build_failure]
            done(RESULT[code], f"build failed: {e.message}")
            print(f"bisect-step {commit[:12]}: build failed: {e}", file=sys.stderr)
            return code
        build_s = time.monotonic() - start
        run_dir = req.report_dir / f"step-{len(steps.read(req.steps_log)) + 1}-{commit[:12]}"
        t = time.monotonic()
        child = child_run.run(request.make(req.cfg, req.spec, run_dir, tree=req.tree,
                                           selection=req.selection,
                                           pytest_args=req.pytest_args))
        test_s = time.monotonic() - t
    except LabError as e:
        done("abort", e.message)
        print(f"bisect-step {commit[:12]}: {e}", file=sys.stderr)
        return ABORT
    code = steps.status(child, req.on_boot_failure)
    done(RESULT[code], steps.why(child))
    return code
