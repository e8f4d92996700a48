"""One bisect step (harness/bisect/step.py) judged from its child run's folder (child_run.of):
the commit's build, the child run asked with the resolved kernel and the step's tree, the
exit status git bisect run gets and the line steps.jsonl keeps."""
from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness import config
from harness.bisect import step, steps
from harness.bisect.step import StepRequest
from harness.config import BuildKernel
from harness.errors import BuildError, ConfigError
from harness.runs import child_run
from harness.runs.request import RunRequest

A = "tests/kernel/test_a.py::test_one"


@pytest.fixture
def req(tmp_path: Path) -> StepRequest:
    tree = tmp_path / "linux"
    tree.mkdir()
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "the subject"], check=True)
    (tmp_path / "lab.yaml").write_text(f"kernels:\n  mine:\n    build:\n      tree: {tree}\n")
    cfg = config.load(tmp_path / "lab.yaml")
    spec = cfg.kernel("mine")
    return StepRequest(cfg.with_kernel(spec), spec, tree, "mmap", tmp_path / "steps.jsonl",
                       tmp_path / "report", ("-x",))


class Built:
    """A Lab whose kernel builds (or fails to)."""
    fails: str | None = None

    def __init__(self, cfg: config.LabConfig) -> None:
        self.cfg = cfg

    def kernel(self, name: str) -> None:
        if self.fails:
            raise BuildError(self.fails)


def _child(monkeypatch: pytest.MonkeyPatch, summary: dict | None, code: int,
           no_guest: frozenset[str] = frozenset()) -> list[RunRequest]:
    asked: list[RunRequest] = []

    def run(r: RunRequest, **streams: Any) -> child_run.ChildRun:
        asked.append(r)
        return child_run.of(summary, code, no_guest, r.report_dir)

    monkeypatch.setattr(step, "Lab", Built)
    monkeypatch.setattr(child_run, "run", run)
    return asked


def _results(*pairs: tuple[str, str]) -> dict:
    return {"boots": [{}], "results": [{"test": t, "outcome": o, "reason": ""}
                                       for t, o in pairs]}


def test_a_passing_run_is_good_and_asked_with_the_resolved_kernel_on_the_tree(
        req: StepRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _child(monkeypatch, _results((A, "passed")), 0)
    assert step.run(req) == steps.GOOD
    (r,) = asked
    assert isinstance(r.kernel.source, BuildKernel) and r.kernel.source.tree == req.tree
    assert (r.kernel.name, r.selection, r.pytest_args) == ("mine", "mmap", ("-x",))
    assert r.report_dir.parent == req.report_dir and r.report_dir.name.startswith("step-1-")
    (s,) = steps.read(req.steps_log)
    assert (s.result, s.why, s.subject) == ("good", "", "the subject")


def test_a_test_failing_on_a_booted_guest_is_bad_and_named(
        req: StepRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    _child(monkeypatch, _results((A, "failed"), ("t::b", "passed")), 1)
    assert step.run(req) == steps.BAD
    assert steps.read(req.steps_log)[0].why == "failed: test_one"


def test_a_kernel_that_did_not_boot_is_skipped_by_default(
        req: StepRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    _child(monkeypatch, _results((A, "failed")), 1, frozenset({"test_a::test_one"}))
    assert step.run(req) == steps.SKIP
    (s,) = steps.read(req.steps_log)
    assert s.result == "skip" and s.why.startswith("the kernel did not boot (1 test(s)")


def test_a_run_that_could_not_judge_aborts(req: StepRequest,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _child(monkeypatch, None, 3)
    assert step.run(req) == steps.ABORT
    assert "could not judge this commit (pytest exit 3" in steps.read(req.steps_log)[0].why


def test_a_build_failure_is_what_on_build_failure_says(
        req: StepRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _child(monkeypatch, None, 0)
    monkeypatch.setattr(Built, "fails", "make: *** [vmlinux] Error 2")
    assert step.run(req) == steps.SKIP
    assert step.run(replace(req, on_build_failure="bad")) == steps.BAD
    assert not asked
    assert [s.result for s in steps.read(req.steps_log)] == ["skip", "bad"]
    assert steps.read(req.steps_log)[0].why == "build failed: make: *** [vmlinux] Error 2"


def test_a_lab_error_aborts_the_bisect(req: StepRequest,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(r: RunRequest, **streams: Any) -> child_run.ChildRun:
        raise ConfigError("no rootfs")

    _child(monkeypatch, None, 0)
    monkeypatch.setattr(child_run, "run", fails)
    assert step.run(req) == steps.ABORT
    assert steps.read(req.steps_log)[0].result == "abort"
