"""The night's report: a cell stored once, the merged KCIDB document, the summary and its
exit status."""
from __future__ import annotations

import json
import time
from pathlib import Path

from harness.nightly import report
from harness.nightly.cell import BUILD_FAILED, FAILED, PASSED, CellResult, pack
from harness.results import kcidb


def _doc(release: str, outcome: str, started: float) -> dict:
    return kcidb.from_summary({"release": release, "kernel": "k", "results": [
        {"test": "tests/kernel/test_a.py::test_x", "outcome": outcome}]}, started)


def test_merged_kcidb_keeps_every_cell_once_and_is_valid() -> None:
    now = time.time()
    merged = kcidb.merge({"a": _doc("6.12", "passed", now), "b": _doc("6.12", "failed", now + 1),
                          "c": kcidb.failed_build("src.debug", "build failed: x.c:1", now)})
    kcidb.SCHEMA.validate(merged)
    assert len(merged["checkouts"]) == 2          # the shared release's checkout once
    assert sorted(b["misc"]["nightly_cell"] for b in merged["builds"]) == ["a", "b", "c"]
    assert sorted(b["status"] for b in merged["builds"]) == ["FAIL", "PASS", "PASS"]
    assert sorted(t["status"] for t in merged["tests"]) == ["FAIL", "PASS"]
    assert len({t["id"] for t in merged["tests"]}) == 2


def test_a_cell_is_stored_once(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "summary.json").write_text("{}")
    first = CellResult("deb", PASSED, archive=pack(src))
    again = CellResult("deb", FAILED, why="second", archive=b"")
    out = tmp_path / "out"
    out.mkdir()
    assert report.store(first, out) == out / "deb"
    report.store(again, out)
    assert json.loads((out / "deb" / "cell.json").read_text())["status"] == PASSED
    assert (out / "deb" / "summary.json").exists()
    assert sorted(p.name for p in out.iterdir()) == ["deb"]  # no temporary folder left


def test_the_report_has_every_cell_and_fails_unless_all_passed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "deb").mkdir(parents=True)
    summary = {"release": "6.12", "kernel": "deb", "results": [
        {"test": "tests/kernel/test_a.py::test_x", "outcome": "passed"}]}
    (out / "deb" / "summary.json").write_text(json.dumps(summary))
    (out / "deb" / "kcidb.json").write_text(json.dumps(kcidb.from_summary(summary, 0.0)))
    (out / "src.v").mkdir()
    results = [CellResult("deb", PASSED), CellResult("src.v", BUILD_FAILED, why="x.c:1")]
    text, code = report.write(out, results, tmp_path / "history", "c" * 40, time.time(), "here")
    assert code == 1
    assert "2 cell(s), 1 passed" in text and "BUILD FAILED" in text
    merged = json.loads((out / "kcidb.json").read_text())
    assert sorted(b["misc"]["nightly_cell"] for b in merged["builds"]) == ["deb", "src.v"]
    doc = json.loads((out / "summary.json").read_text())
    assert [c["name"] for c in doc["cells"]] == ["deb", "src.v"]
    assert doc["matrix"]["kernels"]["src.v"]["error"] == "build failed: x.c:1"
    assert len(list((tmp_path / "history" / "deb").glob("*.json"))) == 1
    assert (out / "deb" / "history.txt").exists() and not (out / "src.v" / "history.txt").exists()
    _, ok = report.write(out, results[:1], tmp_path / "history", "c" * 40, time.time(), "here")
    assert ok == 0


def test_a_known_issue_back_where_its_test_passed_last_night_makes_the_night_red(
        tmp_path: Path) -> None:
    # Issue 44: every cell green (the xfail excuses the known bug), yet its test had passed.
    out = tmp_path / "out"
    (out / "deb").mkdir(parents=True)
    t = "tests/kernel/test_a.py::test_x"

    def night(outcome: str, reason: str = "") -> tuple[str, int]:
        summary = {"release": "6.12", "kernel": "deb", "results": [
            {"test": t, "outcome": outcome, "reason": reason}]}
        (out / "deb" / "summary.json").write_text(json.dumps(summary))
        time.sleep(0.01)  # history files are named by time
        return report.write(out, [CellResult("deb", PASSED)], tmp_path / "history", "c" * 40,
                            time.time(), "here")

    assert night("passed")[1] == 0
    text, code = night("xfailed", "known kernel issue k: its symptom")
    assert code == 1
    assert f"REGRESSION: a known issue came back where its test passed before: deb: {t}" in text
    assert f"KNOWN BACK    {t}" in (out / "deb" / "history.txt").read_text()
    assert night("xfailed", "known kernel issue k: its symptom")[1] == 0  # known, as last night
