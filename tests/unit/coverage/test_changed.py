"""Changed lines of a series, judged against a run's counters."""
from __future__ import annotations

from pathlib import Path

from harness.coverage import changed, functions


def _trees(tmp_path: Path) -> tuple[Path, Path]:
    base, patched = tmp_path / "base", tmp_path / "patched"
    for t in (base, patched):
        (t / "kernel/events").mkdir(parents=True)
    (base / "kernel/events/core.c").write_text("a\nb\nc\nd\n")
    (patched / "kernel/events/core.c").write_text("a\nB\nc\nnew1\nnew2\nd\n")
    (base / "tools/x.py").parent.mkdir(parents=True)
    return base, patched


def test_changed_lines_are_the_patched_files_added_and_replaced_lines(tmp_path: Path) -> None:
    base, patched = _trees(tmp_path)
    got = changed.changed_lines(base, patched, {"kernel/events/core.c", "tools/x.py"})
    assert got == {"kernel/events/core.c": {2, 4, 5}}


def _trace(counts: dict[int, int]) -> dict:
    return {"files": [{"file": "kernel/events/core.c", "lines": [
        {"line_number": n, "count": c} for n, c in counts.items()]}]}


def test_judge_counts_code_lines_only_and_names_the_missed() -> None:
    j = changed.judge({"kernel/events/core.c": {2, 4, 5, 7}, "kernel/events/internal.h": {3}},
                      _trace({2: 5, 4: 0, 5: 0, 6: 1}))
    assert j.run == {"kernel/events/core.c": [2]}
    assert j.not_run == {"kernel/events/core.c": [4, 5]}
    assert j.unprofiled == ["kernel/events/internal.h"]
    assert j.verdict() == ("coverage: the suite did not execute 2 of the 3 changed lines of "
                           "code: kernel/events/core.c:4-5 (2 other changed lines: comments, "
                           "braces, declarations or unprofiled files)")


def test_every_changed_line_run_says_so() -> None:
    j = changed.judge({"kernel/events/core.c": {2}}, _trace({2: 1}))
    assert j.verdict() == "coverage: the suite executed the one changed line of code"


def test_ranges() -> None:
    assert functions.ranges([9, 3, 4, 5, 11, 12]) == "3-5,9,11-12"
