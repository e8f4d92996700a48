"""harness/results/matrix.py: one table with a column per kernel."""
from __future__ import annotations

import json
from pathlib import Path

from harness.results import matrix


def write(path: Path, release: str, results: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"release": release, "counts": {}, "results": results}))
    return path


def test_a_column_per_kernel_and_a_missing_run_says_why(tmp_path: Path) -> None:
    a = write(tmp_path / "a" / "summary.json", "6.12.107", [
        {"test": "t.py::test_x", "outcome": "passed"},
        {"test": "t.py::test_y", "outcome": "xfailed"}])
    b = write(tmp_path / "b" / "summary.json", "6.18.2", [
        {"test": "t.py::test_x", "outcome": "rerun"}, {"test": "t.py::test_x", "outcome": "passed"},
        {"test": "t.py::test_y", "outcome": "passed"}])
    table = matrix.build({"a": a, "b": b, "c": tmp_path / "c" / "summary.json"})
    assert table["tests"] == {"t.py::test_x": {"a": "passed", "b": "flaky"},
                              "t.py::test_y": {"a": "xfailed", "b": "passed"}}
    assert table["kernels"]["c"]["release"] is None and "no summary" in table["kernels"]["c"]["error"]
    text = matrix.render(table)
    assert "a (6.12.107), b (6.18.2), c (no summary" in text
    assert "test_y" in text and "xfail" in text and "2 tests, 2 with different outcomes" in text
