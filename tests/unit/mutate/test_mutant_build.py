"""A mutant's build (harness/mutate/build.py): where its run reports, which build folders its
object is dropped from, and that only a mutant's own prepared kernel leaves the cache."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness import config
from harness.kernels.mutants import Mutant
from harness.mutate import build
from harness.mutate.outcomes import NOT_RUN
from harness.mutate.plan import Plan
from harness.paths import REPO


def plan(report_dir: Path) -> Plan:
    cfg = config.load(REPO / "lab.yaml")
    spec = cfg.kernel(None)
    return Plan(cfg.with_kernel(spec), spec, (), None, (), report_dir)


def test_a_new_result_is_not_run_and_reports_under_mutants(tmp_path: Path) -> None:
    m = Mutant("007-x", tmp_path / "007-x.patch", "kernel/trace/trace.c", "a rule", "abc",
               None, "")
    r, run_dir = build.new_result(plan(tmp_path), m)
    assert run_dir == tmp_path / "mutants" / "007-x" and run_dir.parent.is_dir()
    assert (r.id, r.outcome, r.fixes_revert, r.report) == ("007-x", NOT_RUN, "abc",
                                                          str(run_dir))


def test_the_build_folder_is_the_reports_else_the_kernels() -> None:
    k: Any = SimpleNamespace(build_dir=Path("/k/build"))
    built: Any = SimpleNamespace(out=Path("/o"))
    elsewhere: Any = SimpleNamespace(out=None)
    assert build.outs(k, built) == [Path("/o")]
    assert build.outs(k, elsewhere) == [Path("/k/build")]


def test_only_a_build_kernels_cache_entry_is_forgotten(tmp_path: Path) -> None:
    mine = tmp_path / "kernels" / "build-abc"
    other = tmp_path / "kernels" / "debian-trixie"
    for d in (mine, other):
        d.mkdir(parents=True)
    build.forget(mine)
    build.forget(other)
    assert not mine.exists() and other.exists()
