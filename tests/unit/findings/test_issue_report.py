"""harness/findings/issue_report.py: the report folder of a known issue, written with the
reproducer's build and runs stood in for (no gcc, no guest): what lands in the folder, what
is said, and the exit code the runs give."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import config
from harness.errors import LabError
from harness.findings import issue_report, repro
from harness.findings.mail import ReproRun

ISSUE = "perf-mmap-second-mapping-charged"


def an_issue(**changes: object) -> issue_report.known_issues.KnownIssue:
    """The issue as known-issues.yaml has it, quoting no code unless told (no tree here)."""
    return dataclasses.replace(issue_report.known(ISSUE), **{"code": (), **changes})  # type: ignore[arg-type]


def test_an_unknown_issue_is_one_error_listing_the_known_ones() -> None:
    assert issue_report.known(ISSUE).id == ISSUE
    with pytest.raises(LabError, match=f"'nope' is not an issue of .*{ISSUE}"):
        issue_report.known("nope")


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch):
    """The reproducer kept, written and built without gcc, run with the statuses given."""
    def plan(statuses: dict[str, int] | None) -> list[tuple[str, Path]]:
        ran: list[tuple[str, Path]] = []
        monkeypatch.setattr(repro, "kept_failure",
                            lambda issue_id: None if statuses is None else object())

        def write(out: Path, kept: object) -> list[Path]:
            files = [out / "repro.py", out / "repro.c"]
            for f in files:
                f.write_text("x\n")
            return files

        def build(source: Path) -> Path:
            binary = source.with_suffix("")
            binary.write_text("binary")
            return binary

        def run_on(lab: object, kernel: str, binary: Path, console: Path) -> ReproRun:
            assert binary.exists(), "the binary lives until every kernel ran it"
            ran.append((kernel, console))
            return ReproRun(kernel, f"{kernel}-release", f"Debian {kernel}", statuses[kernel],
                            ("TAP version 13",))   # type: ignore[index]
        monkeypatch.setattr(repro, "write", write)
        monkeypatch.setattr(repro, "build", build)
        monkeypatch.setattr(repro, "run_on", run_on)
        return ran
    return plan


def test_without_a_kept_failure_the_mail_names_the_test_and_the_fix_is_attached(
        stand_ins, tmp_path: Path) -> None:
    stand_ins(None)
    issue = an_issue()
    said: list[str] = []
    req = issue_report.ReportRequest(issue, ("k",), "src")
    written = issue_report.write(SimpleNamespace(), req, tmp_path, said.append)  # type: ignore[arg-type]
    assert written.exit_code == 0 and written.runs == []
    assert "none standalone yet" in written.text and issue.tests[0] in written.text
    assert (tmp_path / "report.txt").read_text() == written.text == said[0]
    assert (tmp_path / "runs.json").read_text() == "[]\n"
    assert (tmp_path / "fix.patch").read_text().startswith("From ")
    assert said[1] == f"report of {ISSUE} in {tmp_path}: report.txt fix.patch"


@pytest.mark.parametrize("statuses, code", [({"a": 0, "b": 0}, 1), ({"a": 1, "b": 0}, 0)])
def test_the_reproducer_runs_on_each_kernel_and_passing_everywhere_is_exit_1(
        stand_ins, tmp_path: Path, statuses: dict[str, int], code: int) -> None:
    ran = stand_ins(statuses)
    said: list[str] = []
    req = issue_report.ReportRequest(an_issue(fix=""), ("a", "b"), "src")
    written = issue_report.write(SimpleNamespace(), req, tmp_path, said.append)  # type: ignore[arg-type]
    assert ran == [("a", tmp_path / "console-a.log"), ("b", tmp_path / "console-b.log")]
    assert written.exit_code == code
    assert not (tmp_path / "repro").exists(), "the binary is not left in the report"
    assert not (tmp_path / "fix.patch").exists()
    runs = json.loads((tmp_path / "runs.json").read_text())
    assert [(r["kernel"], r["verdict"]) for r in runs] == \
        [(k, "PASS" if s == 0 else "FAIL") for k, s in statuses.items()]
    assert "Reproducer: repro.c (attached)" in written.text
    assert said[1].endswith("report.txt repro.py repro.c")


def test_code_is_quoted_only_from_a_build_kernel(tmp_path: Path) -> None:
    p = tmp_path / "lab.yaml"
    p.write_text("default_kernel: k\nkernels:\n  k: {debian: {suite: trixie, flavour: "
                 "cloud-amd64}}\n")
    lab = SimpleNamespace(config=config.load(p))
    assert issue_report.quotes(lab, an_issue(), "k") == ("", [])  # type: ignore[arg-type]
    with pytest.raises(LabError, match="--source k: not a `build` kernel of .*lab.yaml"):
        issue_report.quotes(lab, an_issue(code=("kernel/events/core.c:perf_mmap",)),  # type: ignore[arg-type]
                            "k")


@pytest.mark.parametrize("runs, code", [([], 0), ([0], 1), ([4], 1), ([0, 1], 0)])
def test_the_exit_code_is_1_only_when_the_reproducer_showed_nothing(
        runs: list[int], code: int) -> None:
    written = issue_report.Written("", runs=[ReproRun("k", "r", "d", s, ()) for s in runs])
    assert written.exit_code == code
