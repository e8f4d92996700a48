"""A bisect step judged from its child run (harness/bisect/steps.py): the status git bisect
run is given and the reason steps.jsonl keeps, and steps.jsonl read back."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.bisect import steps
from harness.bisect.steps import ABORT, BAD, GOOD, Step
from harness.runs import child_run


def step_status(code: int, failing: set[str], no_guest: set[str], on_boot_failure: str) -> int:
    """steps.status of a run with exit `code`, whose `failing` tests (those of them in
    `no_guest` for want of a guest) are given as 'file-stem::name'."""
    run = child_run.ChildRun(Path("run"), code, {}, {}, frozenset(failing), frozenset(no_guest),
                             None)
    return steps.status(run, on_boot_failure)


@pytest.mark.parametrize("on_boot_failure, status", [("skip", 125), ("bad", 1), ("abort", 255)])
def test_a_kernel_that_does_not_boot_is_what_on_boot_failure_says(on_boot_failure: str,
                                                                  status: int) -> None:
    no_guest = {"test_a::test_one", "test_a::test_two"}
    assert step_status(1, no_guest, no_guest, on_boot_failure) == status


def test_a_test_failing_on_a_booted_guest_is_bad_whatever_on_boot_failure_says() -> None:
    for on_boot_failure in steps.POLICY:
        assert step_status(1, {"test_a::test_one", "test_b::test_x"},
                           {"test_a::test_one"}, on_boot_failure) == BAD
        assert step_status(0, set(), set(), on_boot_failure) == GOOD
        assert step_status(2, set(), set(), on_boot_failure) == ABORT
        # A failed run we know nothing more of is still bad, as before.
        assert step_status(1, set(), set(), on_boot_failure) == BAD


def test_steps_jsonl_is_read_back_as_written(tmp_path: Path) -> None:
    log = tmp_path / "r" / "steps.jsonl"
    assert steps.read(log) == []
    done = [Step("a" * 40, "one", "good", "", 1.0, 2.0, 3.5),
            Step("b" * 40, "two", "skip", "build failed: x", 4.0, 0.0, 4.0)]
    for s in done:
        steps.record(log, s)
    assert steps.read(log) == done
    assert done[1].line().startswith("bbbbbbbbbbbb skip  build    4.0 s")
    assert done[1].line().endswith("two  [build failed: x]")


def test_a_good_step_names_what_a_known_issue_excused() -> None:
    """The 7.2 demo (docs/results round 9): the commit bringing a known issue back passed
    as xfailed; its line says so, for --known-issues-fail."""
    outcomes = {"tests/kernel/test_trace_mmap.py::test_refused_mappings_fail": "xfailed",
                "tests/kernel/test_trace_mmap.py::test_other": "passed"}
    run = child_run.ChildRun(Path("run"), 0, {}, outcomes, frozenset(), frozenset(), None)
    assert steps.why(run) == steps.EXCUSED + "test_refused_mappings_fail"
    clean = child_run.ChildRun(Path("run"), 0, {}, {"t::a": "passed"}, frozenset(),
                               frozenset(), None)
    assert steps.why(clean) == ""
