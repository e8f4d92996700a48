"""harness/results/report.py: results reach disk as they come, and a failing report folder loses
nothing (the files go to a rescue folder, and the run says so and fails)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness import paths
from harness.results import report

REPO = paths.REPO


def test_result_log_appends_one_line_per_test(tmp_path: Path) -> None:
    log = report.ResultLog(tmp_path / "results.jsonl")
    log.append({"test": "a", "outcome": "passed"})
    log.append({"test": "b", "outcome": "failed"})
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert [json.loads(x)["test"] for x in lines] == ["a", "b"] and log.error is None


def test_result_log_notes_a_folder_that_went_away(tmp_path: Path) -> None:
    log = report.ResultLog(tmp_path / "gone" / "results.jsonl")
    log.append({"test": "a"})
    assert log.error is not None and "gone/results.jsonl" in log.error


def test_files_go_to_a_rescue_folder_when_the_report_folder_fails(
        tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("RINGLAB_CACHE", raising=False)  # it would win over the cache given here
    blocked = tmp_path / "reports"
    blocked.write_text("a file where the folder should be")
    written = report.write_files(blocked, {"summary.txt": "3 passed\n"}, tmp_path / "cache",
                                 "k")
    assert written.error is not None and "reports" in written.error
    assert written.folder.parent == tmp_path / "cache" / "rescued-reports"
    assert (written.folder / "summary.txt").read_text() == "3 passed\n"
    assert not list(written.folder.glob(".summary.txt.*")), "a temporary file was left"


def test_a_run_whose_report_folder_disappears_keeps_every_result(tmp_path: Path) -> None:
    run = tmp_path / "run"
    env = dict(os.environ, RINGLAB_CACHE=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "harness.pytest_plugin",
                        "-p", "no:cacheprovider", str(REPO / "tests/suites/suite_report_dir_lost.py"),
                        "--lab-report-dir", str(run)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stdout[-2000:] + p.stderr[-2000:]
    assert "could not write the reports to" in p.stdout
    rescued, = (tmp_path / "cache" / "rescued-reports").iterdir()
    assert str(rescued) in p.stdout
    summary = json.loads((rescued / "summary.json").read_text())
    assert [r["outcome"] for r in summary["results"]] == ["passed", "passed", "failed"]
    jsonl = (rescued / "results.jsonl").read_text().splitlines()
    assert len(jsonl) == 3
