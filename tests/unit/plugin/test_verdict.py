"""harness/pytest_plugin/verdict.py: the call phase judged from the test's failed checks, its
exception and its splats. A test that returned but failed a check or splatted fails with the
verdict's reason; a test that raised keeps its exception and gets the rest as a section; a
known issue explaining exactly the symptom makes it an expected failure; TCG's artefacts fail
nothing under TCG. Driven with real TestReports and a fake item, no pytester."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from _pytest._code.code import ReprFileLocation

from harness.pytest_plugin.record import Record
from harness.pytest_plugin.verdict import CHECKS_KEY, INJECTS_MARKER, VERDICT_KEY, Verdict, reason
from harness.results import verdicts
from harness.results.known_issues import KnownIssue

NODE = "tests/kernel/test_x.py::test_x"


def _issue(checks: tuple[str, ...] = (), splats: tuple[str, ...] = ()) -> KnownIssue:
    return KnownIssue(id="k-1", tests=(NODE,), checks=checks, when=None, splats=splats,
                      seen_on=(), reason="a known kernel bug", link="https://example/1")


def _judge(outcome: str = "passed", excinfo: Any = None, checks: verdicts.Checks | None = None,
           found: list[Any] | None = None, tcg: bool = False,
           issues: list[KnownIssue] | None = None, longrepr: Any = None,
           markers: tuple[str, ...] = ()) -> tuple[pytest.TestReport, Record, Any]:
    item = SimpleNamespace(nodeid=NODE, stash=pytest.Stash(),
                           get_closest_marker=lambda name: name if name in markers else None)
    if checks is not None:
        item.stash[CHECKS_KEY] = checks
    report = pytest.TestReport(NODE, ("f", 1, "test_x"), {}, outcome, longrepr, "call")
    rec = Record()
    ctx = SimpleNamespace(issues_for=lambda nodeid: list(issues or []))
    Verdict(ctx).judge(item, report, SimpleNamespace(excinfo=excinfo), found or [],  # type: ignore[arg-type]
                       tcg, rec)
    return report, rec, item.stash[VERDICT_KEY]


def _splat(title: str, tcg_artefact: bool = False, task: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(title=title, tcg_artefact=tcg_artefact, task=task,
                           text=f"[ 1.0] {title}\n...")


def test_a_test_that_injects_allocation_failures_owns_their_warnings_and_no_other_splat(
        ) -> None:
    failure = _splat("vmalloc error", task="python3")
    elsewhere = _splat("vmalloc error", task="kworker/0:1")
    warning = _splat("WARNING: at kernel/events/core.c:1")
    assert _judge(found=[failure], markers=(INJECTS_MARKER,))[0].outcome == "passed"
    assert _judge(found=[failure])[0].outcome == "failed"
    assert _judge(found=[failure, warning], markers=(INJECTS_MARKER,))[0].outcome == "failed"
    assert _judge(found=[elsewhere], markers=(INJECTS_MARKER,))[0].outcome == "failed"


def test_a_passing_test_with_a_failed_check_fails_with_the_check() -> None:
    checks = verdicts.Checks()
    checks("perf.aux.offset", False, "aux_offset moved", got=4096)
    report, rec, v = _judge(checks=checks)
    assert report.outcome == "failed" and v.outcome == "failed"
    assert "aux_offset moved" in str(report.longrepr)


def test_a_splat_fails_a_passing_test_with_its_text() -> None:
    report, _, _ = _judge(found=[_splat("WARNING: at kernel/trace/ring_buffer.c:1")])
    assert report.outcome == "failed"
    assert "[ 1.0] WARNING: at kernel/trace/ring_buffer.c:1" in str(report.longrepr)


def test_a_tcg_artefact_fails_nothing_under_tcg_only() -> None:
    artefact = _splat("TCG thing", tcg_artefact=True)
    assert _judge(found=[artefact], tcg=True)[0].outcome == "passed"
    assert _judge(found=[artefact], tcg=False)[0].outcome == "failed"


def test_a_raising_test_keeps_its_exception_and_gets_the_rest_as_a_section() -> None:
    excinfo = SimpleNamespace(exconly=lambda: "AssertionError: head moved\nassert 1 == 2")
    report, rec, v = _judge("failed", excinfo=excinfo, found=[_splat("BUG: oops")])
    assert report.outcome == "failed" and report.longrepr is None  # pytest's own, untouched
    [(title, text)] = report.sections
    assert title == "ringlab verdict" and "BUG: oops" in text
    assert rec.also == v.unexplained[1:] and len(rec.also) == 1


def test_a_known_issue_explaining_the_check_is_an_expected_failure() -> None:
    checks = verdicts.Checks()
    checks("perf.aux.offset", False, "aux_offset moved")
    report, rec, v = _judge(checks=checks, issues=[_issue(checks=("perf.aux.*",))])
    assert v.outcome == "xfailed" and report.outcome == "skipped"
    assert report.wasxfail == v.reason and "k-1" in v.reason  # type: ignore[attr-defined]


def test_a_known_issue_that_did_not_show_is_recorded() -> None:
    _, rec, _ = _judge(issues=[_issue(checks=("perf.aux.*",))])
    assert rec.not_seen == ["k-1"]


def test_a_known_issue_does_not_excuse_another_symptom() -> None:
    checks = verdicts.Checks()
    checks("trace.meta", False, "meta page wrong")
    report, _, _ = _judge(checks=checks, issues=[_issue(checks=("perf.aux.*",))])
    assert report.outcome == "failed"


def test_the_reason_is_the_rules_message_first() -> None:
    crash = ReprFileLocation("f.py", 3, "AssertionError: the message")
    report = pytest.TestReport(NODE, ("f", 1, "t"), {}, "failed",
                               SimpleNamespace(reprcrash=crash), "call")
    assert reason(report) == "AssertionError: the message"
    plain = pytest.TestReport(NODE, ("f", 1, "t"), {}, "failed", "  x" * 1000 + "  ", "call")
    assert len(reason(plain)) == 2000 and not reason(plain).startswith(" ")
    assert reason(pytest.TestReport(NODE, ("f", 1, "t"), {}, "failed", None, "call")) == ""
