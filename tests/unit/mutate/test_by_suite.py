"""Mutants judged by the suite (harness/mutate/by_suite.py): the child run each is asked for
(the resolved kernel, the workspace as its tree, the selection narrowed by the mutant's
Tests: header), and its judgement against the unmutated run."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness import config
from harness.config import BuildKernel
from harness.kernels.mutants import Mutant
from harness.mutate import build, by_suite
from harness.mutate.outcomes import KILLED, MutantResult
from harness.mutate.plan import Plan
from harness.runs import child_run
from harness.runs.request import RunRequest

A = "tests/kernel/test_a.py::test_one"
BOOTS = [{"cpus": 1}]


def test_two_selections_narrow_each_other() -> None:
    assert by_suite.both("a", "b") == "(a) and (b)"
    assert by_suite.both(None, "b") == "b" and by_suite.both("a", None) == "a"
    assert by_suite.both(None, None) is None


@pytest.fixture
def plan(tmp_path: Path) -> Plan:
    (tmp_path / "linux").mkdir()
    (tmp_path / "lab.yaml").write_text(f"default_kernel: mine\nkernels:\n  mine:\n    build:\n"
                                       f"      tree: {tmp_path / 'linux'}\n")
    cfg = config.load(tmp_path / "lab.yaml")
    spec = cfg.kernel(None)
    return Plan(cfg.with_kernel(spec), spec, (), "mmap", ("-x",), tmp_path, selftests=True)


def test_a_mutants_run_is_asked_with_the_resolved_kernel_and_its_tests(
        plan: Plan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[RunRequest] = []

    def run(req: RunRequest, **streams: Any) -> child_run.ChildRun:
        asked.append(req)
        return child_run.of({"boots": BOOTS, "results": [
            {"test": A, "outcome": "failed", "reason": "AssertionError: 3 pages\nmore"}]}, 1)

    @contextlib.contextmanager
    def built(*a: Any) -> Iterator[bool]:
        yield True

    monkeypatch.setattr(child_run, "run", run)
    monkeypatch.setattr(build, "mutant_built", built)
    slow = "tests/kernel/kselftest/test_kselftest.py::test_selftest[ftrace/remotes/slow]"
    baseline = child_run.of({"boots": BOOTS, "results": [
        {"test": A, "outcome": "passed", "reason": ""},
        {"test": slow, "outcome": "failed", "reason": "killed at its 900 s timeout"}]}, 1)
    m = Mutant("001-x", tmp_path / "001-x.patch", "kernel/events/core.c", "r", None,
               "perf_mmap", "")
    ws: Any = SimpleNamespace(src=tmp_path / "ws")
    r = by_suite.one(plan, ws, m, [], baseline)
    assert isinstance(r, MutantResult) and (r.outcome, r.killed_by) == (KILLED, [A])
    assert r.why == "test_one: AssertionError: 3 pages"
    assert r.selftest_killers is None   # none of the kernel's own ran: they judged nothing
    (req,) = asked
    assert isinstance(req.kernel.source, BuildKernel) and req.kernel.source.tree == tmp_path / "ws"
    assert req.selection == "((mmap) and (perf_mmap)) or (kselftest and (perf_events))"
    # a selftest that failed unmutated cannot kill: left out
    assert (req.kernel.name, req.selftests, req.pytest_args) == (
        plan.name, True, ("-x", f"--deselect={slow}"))
    assert req.jobs == "1"   # ./lab mutate -j: the guests of each run
    assert (tmp_path / "mutants" / "001-x.log").read_text().startswith("$ ")
