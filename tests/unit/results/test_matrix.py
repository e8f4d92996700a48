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


def test_each_column_names_its_arch_and_page_size(tmp_path: Path) -> None:
    """A table across arches: a rule that differs by page size must show which column is which."""
    a = tmp_path / "a" / "summary.json"
    a.parent.mkdir()
    a.write_text(json.dumps({"release": "6.12.117-cloud-amd64", "arch": "x86_64",
                             "kernel_facts": {"page size": "4096"}, "counts": {},
                             "results": [{"test": "t.py::test_x", "outcome": "passed"}]}))
    b = tmp_path / "b" / "summary.json"
    b.parent.mkdir()
    b.write_text(json.dumps({"release": "6.12.117-arm64-16k", "arch": "arm64",
                             "kernel_facts": {"page size": "16384"}, "counts": {},
                             "results": [{"test": "t.py::test_x", "outcome": "passed"}]}))
    text = matrix.render(matrix.build({"cloud": a, "16k": b}))
    assert ("cloud (6.12.117-cloud-amd64, x86_64, 4 KiB pages), "
            "16k (6.12.117-arm64-16k, arm64, 16 KiB pages)") in text, text


def test_a_kernel_that_could_not_be_had_is_not_run_with_why(tmp_path: Path) -> None:
    a = write(tmp_path / "a" / "summary.json", "6.12.117", [
        {"test": "t.py::test_x", "outcome": "passed"}])
    b = tmp_path / "b" / "summary.json"
    b.parent.mkdir()
    b.write_text(json.dumps({"kernel": "b", "not_run": "kernels.b: no package linux-image-x "
                             "in trixie", "counts": {}}))
    table = matrix.build({"a": a, "b": b})
    assert table["kernels"]["b"]["error"] == "not run: kernels.b: no package linux-image-x in trixie"
    assert table["tests"] == {"t.py::test_x": {"a": "passed"}}
    assert "b (not run: kernels.b: no package" in matrix.render(table)


def test_a_test_another_column_did_not_run_is_no_different_outcome(tmp_path: Path) -> None:
    # ./lab bench nightly -k A -k B: each cell runs other tests; none differs.
    a = write(tmp_path / "a" / "summary.json", "6.12.117", [
        {"test": "t.py::test_x", "outcome": "passed"}])
    b = write(tmp_path / "b" / "summary.json", "6.12.117", [
        {"test": "t.py::test_y", "outcome": "passed"}, {"test": "t.py::test_z", "outcome": "failed"}])
    text = matrix.render(matrix.build({"a": a, "b": b}))
    assert "3 tests, 0 with different outcomes across kernels" in text


def test_a_column_the_lab_could_not_prove_it_sees_splats_on_is_said_up_front(
        tmp_path: Path) -> None:
    a = write(tmp_path / "a" / "summary.json", "6.12.117", [])
    b = tmp_path / "b" / "summary.json"
    b.parent.mkdir()
    b.write_text(json.dumps({"release": "7.2.13", "counts": {}, "results": [],
                             "splat_detection": {"proved": True, "seen": {"warn": ["w"]}}}))
    lines = matrix.render(matrix.build({"a": a, "b": b})).splitlines()
    assert lines[1].startswith("a: WARNING: splat detection not proved on this kernel: ")
    assert not any(line.startswith("b: ") for line in lines)


def test_the_kernels_own_selftests_are_counted_per_column(tmp_path: Path) -> None:
    st = "tests/kernel/kselftest/test_kselftest.py::test_selftest"
    a = write(tmp_path / "a" / "summary.json", "6.12.117", [
        {"test": "t.py::test_x", "outcome": "passed"},
        {"test": f"{st}[perf_events/mmap/perf_mmap.rb.map]", "outcome": "passed"},
        {"test": f"{st}[ftrace/remotes/trace]", "outcome": "skipped"}])
    b = write(tmp_path / "b" / "summary.json", "7.2.13", [
        {"test": "t.py::test_x", "outcome": "failed"}])
    text = matrix.render(matrix.build({"a": a, "b": b}))
    assert text.endswith("kernel selftests (tools/testing/selftests, run beside ours):\n"
                         "  a: 1 passed, 1 skipped\n  b: not run\n")
    assert "no selftests" not in matrix.render(matrix.build({"b": b})) and \
        "kernel selftests" not in matrix.render(matrix.build({"b": b}))
