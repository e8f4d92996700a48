"""harness/pytest_plugin/context.py: the run's frozen context. Run by hand, it comes from
lab.yaml and the options (the report folder named after the kernel unless given, and made);
from `--lab-request`, from the request as it is; the in-process Lab is taken from a Given
plugin; the known issues of a test are those covering it; no git is a '?' commit."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.pytest_plugin import context
from harness.runs import given

ISSUES = """issues:
  - id: k-1
    test: "tests/kernel/test_a.py::*"
    checks: ["a.*"]
    reason: r
    link: https://example/1
"""


def _config(tmp_path: Path, plugins: tuple = (), **options: Any) -> SimpleNamespace:
    lab_yaml = tmp_path / "lab.yaml"
    lab_yaml.write_text(f"reports:\n  dir: {tmp_path / 'reports'}\nkernels:\n  deb:\n"
                        "    debian: {suite: trixie, flavour: cloud-amd64}\n")
    issues = tmp_path / "known-issues.yaml"
    issues.write_text(ISSUES)
    opts = {"--lab-request": None, "--lab-config": str(lab_yaml), "--kernel": "deb",
            "--lab-report-dir": None, "--keep-guest": False, "--gdb-on-failure": True,
            "--known-issues": str(issues), **options}
    return SimpleNamespace(getoption=lambda name: opts[name],
                           pluginmanager=SimpleNamespace(get_plugins=lambda: list(plugins)))


@pytest.fixture(autouse=True)
def no_git(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(context, "git_commit", lambda: "c0ffee")


def test_by_hand_the_report_folder_is_named_after_the_kernel_and_made(tmp_path: Path) -> None:
    ctx = context.build(_config(tmp_path))  # type: ignore[arg-type]
    assert ctx.kernel_name == "deb" and ctx.report_dir.parent == tmp_path / "reports"
    assert ctx.report_dir.name.endswith("-deb") and ctx.report_dir.is_dir()
    assert ctx.request.gdb_on_failure and not ctx.request.keep_guest
    assert ctx.lab_config.kernels["deb"] == ctx.request.kernel
    assert (ctx.worker, ctx.commit, ctx.lab) == (None, "c0ffee", None)


def test_a_report_folder_given_is_used(tmp_path: Path) -> None:
    ctx = context.build(_config(tmp_path, **{"--lab-report-dir": str(tmp_path / "r")}))  # type: ignore[arg-type]
    assert ctx.report_dir == tmp_path / "r" and (tmp_path / "r").is_dir()


def test_a_request_file_is_taken_as_it_is(tmp_path: Path) -> None:
    by_hand = context.build(_config(tmp_path, **{"--lab-report-dir": str(tmp_path / "r")}))  # type: ignore[arg-type]
    req = dataclasses.replace(by_hand.request, report_dir=tmp_path / "r2", selection="ring")
    path = tmp_path / "request.json"
    path.write_text(req.to_json())
    ctx = context.build(_config(tmp_path, **{"--lab-request": str(path), "--kernel": "ignored"}))  # type: ignore[arg-type]
    assert ctx.request == req and ctx.report_dir.is_dir()


def test_the_in_process_lab_comes_from_a_given_plugin(tmp_path: Path) -> None:
    lab = object()
    ctx = context.build(_config(tmp_path, plugins=(object(), given.Given(lab))))  # type: ignore[arg-type]
    assert ctx.lab is lab


def test_a_workers_context_knows_its_worker(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    cfg.workerinput = {"workerid": "gw1"}
    assert context.build(cfg).worker == "gw1"  # type: ignore[arg-type]


def test_the_known_issues_of_a_test_are_those_covering_it(tmp_path: Path) -> None:
    ctx = context.build(_config(tmp_path))  # type: ignore[arg-type]
    assert [i.id for i in ctx.issues_for("tests/kernel/test_a.py::test_x")] == ["k-1"]
    assert ctx.issues_for("tests/kernel/test_b.py::test_x") == []


def test_known_issues_none_excuses_nothing(tmp_path: Path) -> None:
    # bisect --known-issues-fail: a known bug's symptom must fail its test.
    ctx = context.build(_config(tmp_path, **{"--known-issues": "none"}))  # type: ignore[arg-type]
    assert ctx.known == () and ctx.issues_for("tests/kernel/test_a.py::test_x") == []


def test_no_git_is_a_question_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()

    def run(*a: Any, **kw: Any) -> None:
        raise FileNotFoundError("git")
    monkeypatch.setattr(context.subprocess, "run", run)
    assert context.git_commit() == "?"
