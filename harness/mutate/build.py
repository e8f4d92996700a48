"""Building the kernel from the workspace: the unmutated one, then each mutant's, whose
prepared kernel is dropped from the cache once judged (it is never booted again)."""
from __future__ import annotations

import contextlib
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from harness.config import with_build
from harness.errors import BuildError
from harness.kernels.mutants import Mutant
from harness.kernels.kbuild import BuildReport
from harness.kernels.kernel import BootableKernel
from harness.mutate.outcomes import NOT_BUILT, NOT_RUN, MutantResult
from harness.mutate.plan import Plan
from harness.mutate.workspace import Workspace
from harness.resources import Lab


def build(plan: Plan, tree: Path) -> tuple[BootableKernel, BuildReport]:
    """Build the kernel from `tree` (incrementally); (kernel, build report)."""
    lab = Lab(with_build(plan.cfg, plan.name, tree=tree))
    k = lab.kernel(plan.name)
    return k, lab.builds[plan.name]


def outs(k: BootableKernel, report: BuildReport) -> list[Path]:
    """The build folders a mutant's object is dropped from when it is reverted."""
    return [report.out] if report.out else ([k.build_dir] if k.build_dir else [])


def new_result(plan: Plan, m: Mutant) -> tuple[MutantResult, Path]:
    """A mutant's result, not run yet, and the folder its run reports to."""
    run_dir = plan.report_dir / "mutants" / m.id
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    return MutantResult(m.id, m.file, m.rule, NOT_RUN, fixes_revert=m.fixes_revert,
                        report=str(run_dir)), run_dir


@contextlib.contextmanager
def mutant_built(plan: Plan, ws: Workspace, m: Mutant, build_outs: list[Path],
                 r: MutantResult) -> Iterator[bool]:
    """The mutant applied and its kernel rebuilt for the body (True), or NOT_BUILT in `r`
    (False); reverted after, its prepared kernel dropped from the cache."""
    with ws.applied(m, build_outs):
        t = time.monotonic()
        try:
            with _quiet():
                k, _ = build(plan, ws.src)
        except BuildError as e:
            r.build_s = round(time.monotonic() - t, 1)
            r.outcome, r.why = NOT_BUILT, e.message.splitlines()[0][:300]
            yield False
            return
        r.build_s = round(time.monotonic() - t, 1)
        try:
            yield True
        finally:
            forget(k.vmlinuz.parent)


def forget(entry: Path) -> None:
    """Drop a mutant's prepared kernel from the cache: it is never booted again, and a
    defconfig kernel's entry (image + modules) is tens of MB a mutant."""
    if entry.parent.name == "kernels" and entry.name.startswith("build-"):
        shutil.rmtree(entry, ignore_errors=True)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep the per-build progress lines off the screen: one line per mutant is the report."""
    screen = logging.getLogger("ringlab")
    level = screen.level
    screen.setLevel(logging.WARNING)
    try:
        yield
    finally:
        screen.setLevel(level)
