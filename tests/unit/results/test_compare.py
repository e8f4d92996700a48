"""harness/results/compare.py: one meaning per change of a test's outcome between two runs,
and the history and review reports built on it agreeing."""
from __future__ import annotations

import pytest

from harness.results import compare, history, review

# The module docstring's table: previous group -> current group -> change.
TABLE: dict[str | None, dict[str | None, str]] = {
    "passed": {"passed": "unchanged", "xfailed": "newly known", "failed": "new failure",
               "flaky": "newly flaky", "skipped": "newly skipped", None: "gone"},
    "xfailed": {"passed": "known not seen", "xfailed": "unchanged", "failed": "new failure",
                "flaky": "newly flaky", "skipped": "newly skipped", None: "gone"},
    "failed": {"passed": "fixed", "xfailed": "failure now known", "failed": "still failing",
               "flaky": "still flaky", "skipped": "newly skipped", None: "gone"},
    "flaky": {"passed": "fixed", "xfailed": "failure now known", "failed": "new failure",
              "flaky": "still flaky", "skipped": "newly skipped", None: "gone"},
    "skipped": {"passed": "newly passing", "xfailed": "newly known", "failed": "new failure",
                "flaky": "newly flaky", "skipped": "unchanged", None: "gone"},
    None: {"passed": "new test", "xfailed": "new test", "failed": "new test",
           "flaky": "new test", "skipped": "new test"},
}
CASES = [(b, a, kind) for b, row in TABLE.items() for a, kind in row.items()]


@pytest.mark.parametrize(("before", "after", "kind"), CASES)
def test_each_change_has_one_name(before: str | None, after: str | None, kind: str) -> None:
    assert compare.change(before, after) == kind


def test_outcomes_of_a_group_change_alike() -> None:
    """xpassed counts as a pass, error as a failure, an unknown outcome as a skip."""
    assert compare.change("error", "xpassed") == compare.FIXED
    assert compare.change("xfailed", "xpassed") == compare.KNOWN_NOT_SEEN
    assert compare.change("passed", "xpassed") == compare.UNCHANGED
    assert compare.change("xpassed", "error") == compare.NEW_FAILURE
    assert compare.change("error", "failed") == compare.STILL_FAILING
    assert compare.change("deselected", "passed") == compare.NEWLY_PASSING


def test_fixed_means_failing_or_flaky_before_and_passing_now() -> None:
    before = {"f": "failed", "fl": "flaky", "s": "skipped", "k": "failed", "gone": "failed"}
    after = {"f": "passed", "fl": "passed", "s": "passed", "k": "xfailed"}
    assert compare.fixed(before, after) == ["f", "fl"]
    found = compare.changes(before, after)
    assert compare.of_kind(found, compare.GONE) == ["gone"]   # gone, not fixed
    assert compare.of_kind(found, compare.NEWLY_PASSING) == ["s"]
    assert compare.of_kind(found, compare.FAILURE_NOW_KNOWN) == ["k"]


def test_changes_list_every_test_of_either_run_by_name() -> None:
    found = compare.changes({"b": "passed", "a": "failed"}, {"c": "passed", "b": "passed"})
    assert [(c.test, c.before, c.after, c.kind) for c in found] == [
        ("a", "failed", None, "gone"), ("b", "passed", "passed", "unchanged"),
        ("c", None, "passed", "new test")]


def test_new_failures_and_broke_keep_the_runs_order() -> None:
    before = {"p": "passed", "x": "xfailed", "s": "skipped", "fl": "flaky", "f": "failed",
              "xp": "xpassed"}
    after = {"xp": "error", "x": "failed", "s": "failed", "fl": "failed", "f": "failed",
             "p": "failed", "new": "failed"}
    assert compare.failing(after) == ["xp", "x", "s", "fl", "f", "p", "new"]
    assert compare.new_failures(before, after) == ["xp", "x", "s", "fl", "p"]
    # broke: only after a reliable verdict (a pass or the known issue's xfail).
    assert compare.broke(before, after) == ["xp", "x", "p"]


def test_returned_means_a_pass_before_and_the_known_issue_now() -> None:
    before = {"p": "passed", "xp": "xpassed", "x": "xfailed", "s": "skipped", "f": "failed"}
    after = {t: "xfailed" for t in ("f", "s", "x", "xp", "p", "new")}
    assert compare.returned(before, after) == ["xp", "p"]


def _summary(**outcomes: str) -> dict:
    results: list[dict] = []
    for test, o in outcomes.items():
        if o == "flaky":
            results += [{"test": test, "outcome": "rerun", "reason": ""},
                        {"test": test, "outcome": "passed", "reason": ""}]
        else:
            results.append({"test": test, "outcome": o, "reason": ""})
    return {"kernel": "k", "results": results}


def test_history_and_review_agree_on_every_change() -> None:
    """Every cell of the table, through both reports: what one calls fixed, new failure or
    gone, the other does too."""
    before: dict[str, str] = {}
    after: dict[str, str] = {}
    for b, a, _ in CASES:
        name = f"{b}-{a}"
        if b is not None:
            before[name] = b
        if a is not None:
            after[name] = a
    kinds = {f"{b}-{a}": kind for b, a, kind in CASES}
    c = history.compare(_summary(**before), _summary(**after), "previous.json")
    r = review.compare(_summary(**before), _summary(**after))

    def named(kind: str) -> list[str]:
        return sorted(t for t, k in kinds.items() if k == kind)

    assert c.fixed == named("fixed") == ["failed-passed", "flaky-passed"]
    assert c.new_failures == r.newly_failing == named("new failure")
    assert c.still_failing == named("still failing")
    assert c.gone_tests == r.gone_tests == named("gone")
    assert c.new_tests == r.new_tests == named("new test")
    assert r.newly_flaky == named("newly flaky")
    assert r.newly_skipped == named("newly skipped")
    assert r.newly_passing == sorted(named("fixed") + named("newly passing"))
    assert r.newly_known == named("newly known") and r.now_known == named("failure now known")
    assert r.known_not_seen == named("known not seen")
    assert c.flaky == sorted(t for t, o in after.items() if o == "flaky")
