"""Known kernel issues bound to their symptom: the list's validation, and verdicts on real probe
outputs (tests/unit/data/known-issues/, recorded on Debian's 6.12.107 and on the 7.2.13 race
build) run through the kernel tests' own code: symptom present (XFAIL), absent (passes, "not
seen"), present beside a second failure (FAIL)."""
from __future__ import annotations

import copy
import importlib.util
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from harness import paths
from harness.errors import ConfigError
from harness.results import known_issues, verdicts
from harness.results.known_issues import CheckFailure

DATA = Path(__file__).resolve().parents[1] / "data" / "known-issues"
KERNEL_TESTS = paths.KERNEL_SUITE
SUITE = "tests/kernel/test_trace_mmap.py"
GOOD = """
issues:
  - id: a
    test: "tests/kernel/test_x.py::test_y*"
    checks: ["rule-*"]
    when: "got == 'ok' and n > 0"
    splats: ["WARNING at .* f\\\\+"]
    seen_on: ["6.12.107"]
    not_seen_on: ["7.3.4"]
    reason: why
    link: https://example.invalid/a
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "known-issues.yaml"
    p.write_text(text)
    return p


def recorded(name: str, release: str = "6.12.107") -> dict[str, Any]:
    return json.loads((DATA / f"{name}-{release}.json").read_text())


# The fixtures of the kernel test modules that run a check of their probe (aux("truncated"),
# trace("first-mapping") ...: conftest.py ProbeCheck bound to the module's probe).
PROBE_CHECKS = ("ring", "aux", "trace", "inpage")


def answering(data: dict[str, Any]) -> Any:
    """A probe-check fixture answering every check with a recorded probe output."""
    return lambda check, *args, **kw: data


def run_kernel_test(test: Any, probe: dict[str, Any], **fixtures: Any
                    ) -> tuple[verdicts.Checks, str | None]:
    """Run a kernel test's own function on a recorded probe output (given as its probe-check
    fixture, or as the fixtures named): its failed checks, and the first line of the
    exception it ended with."""
    checks = verdicts.Checks()
    if not fixtures:
        fixtures = {name: answering(probe) for name in inspect.signature(test).parameters
                    if name in PROBE_CHECKS}
    try:
        test(check=checks, **fixtures)
    except AssertionError as e:
        return checks, f"AssertionError: {str(e).splitlines()[0]}"
    return checks, None


def kernel_test(module: str, name: str) -> Any:
    """A test function of tests/kernel/, loaded from its file (tests/ is no package)."""
    path = KERNEL_TESTS / f"{module}.py"
    spec = importlib.util.spec_from_file_location(f"ringlab_kernel_{module}", path)
    assert spec is not None and spec.loader is not None, path
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


def first_mapping_test() -> Any:
    return kernel_test("test_trace_mmap", "test_refused_mappings_fail_on_an_unmapped_buffer")


def issues_of(nodeid: str) -> list[known_issues.KnownIssue]:
    return known_issues.for_test(known_issues.load(), nodeid)


def test_the_checked_in_list_loads_and_names_a_symptom_for_each_issue() -> None:
    issues = known_issues.load()
    assert issues and all(i.reason and i.link and i.tests for i in issues)
    assert all(i.checks or i.splats for i in issues)


def test_symptom_present_is_xfail() -> None:
    r = recorded("first-mapping")
    checks, raised = run_kernel_test(first_mapping_test(), r["probe"])
    assert [f.id for f in checks.failures] == [
        "first-map-prot_write", "first-map-prot_exec", "first-map-map_private",
        "first-map-off_subbuf_boundary", "first-map-past_the_end"]
    v = verdicts.judge(checks.failures, r["splats"], issues_of(r["test"]), raised)
    assert v.outcome == "xfailed", v.reason
    assert v.seen == ("trace-mmap-first-map-error-dropped",)
    assert "known kernel issue trace-mmap-first-map-error-dropped" in v.reason


def test_symptom_absent_passes_and_says_not_seen() -> None:
    r = recorded("first-mapping")
    fixed = dict(r["probe"], prot_write="EPERM", prot_exec="EPERM", map_private="EPERM",
                 off_subbuf_boundary="EINVAL", past_the_end="EINVAL")
    checks, raised = run_kernel_test(first_mapping_test(), fixed)
    v = verdicts.judge(checks.failures, [], issues_of(r["test"]), raised)
    assert v.outcome == "passed"
    assert v.not_seen == ("trace-mmap-first-map-error-dropped",)


def test_symptom_beside_a_second_failure_fails() -> None:
    r = recorded("first-mapping")
    # A kernel that drops the error (the known issue) and also breaks the good mapping after.
    checks, raised = run_kernel_test(first_mapping_test(), dict(r["probe"], map_after="EINVAL"))
    v = verdicts.judge(checks.failures, r["splats"], issues_of(r["test"]), raised)
    assert v.outcome == "failed"
    assert v.unexplained == ["AssertionError: a good mapping after the refused ones must work"]
    assert "(known issue trace-mmap-first-map-error-dropped)" in v.reason


def test_another_wrong_errno_is_not_the_known_issue() -> None:
    r = recorded("first-mapping")
    # EINVAL where EPERM is due is a wrong errno, not the dropped error the issue describes.
    checks, raised = run_kernel_test(first_mapping_test(), dict(r["probe"], prot_write="EINVAL"))
    v = verdicts.judge(checks.failures, r["splats"], issues_of(r["test"]), raised)
    assert v.outcome == "failed"
    assert v.unexplained == ["check first-map-prot_write: the first mapping of a CPU buffer, "
                             "prot_write: expected EPERM, got EINVAL"]


def test_a_splat_symptom_excuses_its_splat_only() -> None:
    r = recorded("lifetime-fork")
    issues = issues_of(r["test"])
    assert verdicts.judge([], r["splats"], issues).outcome == "xfailed"
    other = r["splats"] + ["BUG: KASAN: use-after-free in ring_buffer_map_get_reader+0x1/0x2"]
    v = verdicts.judge([], other, issues)
    assert v.outcome == "failed" and v.unexplained == [f"the kernel splatted during this test: {other[-1]}"]
    # The same splat in a test the issue does not cover is not excused.
    assert verdicts.judge([], r["splats"], issues_of(f"{SUITE}::test_partial_munmap_is_refused")
                          ).outcome == "failed"


def test_predicates_over_the_check_data(tmp_path: Path) -> None:
    [issue] = known_issues.load(write(tmp_path, GOOD))
    assert issue.covers("tests/kernel/test_x.py::test_y[4-0]")
    assert not issue.covers("tests/kernel/test_x.py::test_z")
    assert issue.explains_check(CheckFailure("rule-1", "m", {"got": "ok", "n": 2}))
    assert not issue.explains_check(CheckFailure("rule-1", "m", {"got": "EINVAL", "n": 2}))
    assert not issue.explains_check(CheckFailure("other", "m", {"got": "ok", "n": 2}))
    # A name the check did not record: not this symptom (false), never an error.
    assert not issue.explains_check(CheckFailure("rule-1", "m", {"got": "ok"}))
    # ...and only its own clause of an `or`, so one predicate holds a clause for each check.
    either = "entries > 0 or read == '0 bytes' or (late > 0 and early == 0)"
    assert known_issues.predicate_holds(either, {"entries": 2})
    assert known_issues.predicate_holds(either, {"late": 3, "early": 0})
    assert not known_issues.predicate_holds(either, {"late": 3, "early": 1})
    assert not known_issues.predicate_holds(either, {"late": 3})
    assert not known_issues.predicate_holds("not late", {})
    assert issue.explains_splat("WARNING at kernel/x.c:1 f+0x1/0x2")
    assert "seen on 6.12.107; not seen on 7.3.4" in issue.summary


def test_a_test_without_checks_or_splats_is_judged_by_its_exception() -> None:
    assert verdicts.judge([], [], [], None).outcome == "passed"
    v = verdicts.judge([], [], [], "AssertionError: x")
    assert v.outcome == "failed" and v.reason == "AssertionError: x"


def test_the_check_fixture_goes_on_after_a_failure() -> None:
    check = verdicts.Checks()
    assert check("a", False, "first", got=1) is False
    assert check("b", True, "fine") is True
    assert check("c", 0, "third") is False
    assert [(f.id, f.data) for f in check.failures] == [("a", {"got": 1}), ("c", {})]


@pytest.mark.parametrize("text, culprit", [
    ("issues: 3", "issues: expected a list"),
    ("issues:\n  - {id: a, test: t, checks: [c], reason: r}", r"issues\[0\]\.link"),
    ("issues:\n  - {id: a, test: t, reason: r, link: l}", r"issues\[0\]: expected a symptom"),
    ("issues:\n  - {id: a, test: t, checks: [c], when: 'import os', reason: r, link: l}",
     r"issues\[0\]\.when: expected a predicate"),
    ("issues:\n  - {id: a, test: t, checks: [c], when: '__import__(\"os\")', reason: r, "
     "link: l}", r"issues\[0\]\.when: .*no call allowed"),
    ("issues:\n  - {id: a, test: t, splats: [x], when: 'a == 1', reason: r, link: l}",
     r"issues\[0\]\.when: expected `checks` beside it"),
    ("issues:\n  - {id: a, test: t, splats: ['(x'], reason: r, link: l}",
     r"issues\[0\]\.splats\[0\]: expected a regular expression"),
    ("issues:\n  - {id: a, test: [], checks: [c], reason: r, link: l}",
     r"issues\[0\]\.test: expected a test node id"),
    ("issues:\n  - {id: a, test: t, checks: [c], reason: r, link: l, versions: ['>=6']}",
     r"issues\[0\]\.versions: unknown key"),
    ("issues:\n  - {id: a, test: t, checks: [c], reason: r, link: l}\n"
     "  - {id: a, test: t, checks: [c], reason: r, link: l}", r"issues\[1\]\.id"),
    ("issues:\n  - {id: a, test: t, checks: [c], reason: r, link: l, not_seen_on: 7}",
     r"issues\[0\]\.not_seen_on: expected a list of kernel releases"),
    ("issues:\n  - {id: a, test: t, checks: [c], reason: r, link: l, fixes: 0c8a4e4139ad}",
     r"issues\[0\]\.fixes: expected a commit as Fixes: names it"),
    ("issues:\n  - {id: a, test: t, checks: [c], reason: r, link: l, code: [perf_mmap_rb]}",
     r"issues\[0\]\.code\[0\]: expected FILE.c:FUNCTION"),
    ("issues: [", "not valid YAML"),
])
def test_mistakes_name_file_and_key(tmp_path: Path, text: str, culprit: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=culprit) as e:
        known_issues.load(path)
    assert str(path) in str(e.value)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        known_issues.load(tmp_path / "nope.yaml")


def test_meta_page_lost_events_always_zero() -> None:
    test = kernel_test("test_trace_mmap", "test_overflow_lost_events_reach_the_meta_page")
    r = recorded("overflow")
    issues = issues_of(r["test"])
    assert r["probe"]["meta_after_drain"]["overrun"] > 0 and not any(
        r["probe"]["drain"]["lost_events"])
    checks, raised = run_kernel_test(test, r["probe"], overflow=r["probe"])
    assert verdicts.judge(checks.failures, [], issues, raised).outcome == "xfailed"
    # Fixed: the swaps' lost_events sum to the overrun.
    overrun = r["probe"]["meta_after_drain"]["overrun"]
    fixed = copy.deepcopy(r["probe"])
    fixed["drain"]["lost_events"] = [overrun] + [0] * (len(fixed["drain"]["lost_events"]) - 1)
    checks, raised = run_kernel_test(test, fixed, overflow=fixed)
    v = verdicts.judge(checks.failures, [], issues, raised)
    assert v.outcome == "passed" and v.not_seen == ("trace-mmap-meta-lost-events-always-zero",)
    # A count that reaches user space but is wrong is another bug, not this one.
    wrong = copy.deepcopy(r["probe"])
    wrong["drain"]["lost_events"][0] = 5
    checks, raised = run_kernel_test(test, wrong, overflow=wrong)
    assert verdicts.judge(checks.failures, [], issues, raised).outcome == "failed"


def test_aux_truncation_that_does_not_stop_the_event() -> None:
    test = kernel_test("test_perf_aux", "test_a_truncation_stops_the_event")
    r = recorded("aux-truncated")
    issues = issues_of(r["test"])
    fixtures = {"aux": answering(r["probe"]), "test_pmu": 1}
    checks, raised = run_kernel_test(test, r["probe"], **fixtures)
    assert verdicts.judge(checks.failures, [], issues, raised).outcome == "xfailed"
    # The same symptom beside aux_head moving after the probe stopped: a second bug, FAIL.
    moved = dict(r["probe"], head_moved_after_stop=True)
    checks, raised = run_kernel_test(test, moved, aux=answering(moved), test_pmu=1)
    v = verdicts.judge(checks.failures, [], issues, raised)
    assert v.outcome == "failed" and "aux_head moved after the probe stopped" in v.unexplained[0]
    # Fixed: one TRUNCATED record, the last one.
    fixed = dict(r["probe"], truncated=[r["probe"]["records"] - 1])
    checks, raised = run_kernel_test(test, fixed, aux=answering(fixed), test_pmu=1)
    assert verdicts.judge(checks.failures, [], issues, raised).outcome == "passed"


SUBBUF_ISSUE = ("trace-subbuf-change-keeps-dropped-entries",)


def _recorded_subbuf_xfail(name: str, check: str) -> tuple[Any, dict, Any, list]:
    """The 7.2.13 recording of a subbuf-change test, judged: XFAIL under the known issue.
    (the test, the recording, its issues, the checks that failed)"""
    test = kernel_test("test_trace_mmap", name)
    r = recorded(check, "7.2.13")
    issues = issues_of(r["test"])
    checks, raised = run_kernel_test(test, r["probe"])
    v = verdicts.judge(checks.failures, r["splats"], issues, raised)
    assert v.outcome == "xfailed" and v.seen == SUBBUF_ISSUE, v.reason
    return test, r, issues, checks.failures


def test_a_new_subbuf_size_that_reports_the_old_overrun_as_missed() -> None:
    """7.2.13: after 124 events were overwritten and a new sub-buffer size, the first page a
    read() gives and the first mapped sub-buffer carry RB_MISSED_EVENTS and the count 124;
    the mapped reader on the writer's page WARNs (the splat) and is told nothing."""
    test, r, issues, failures = _recorded_subbuf_xfail(
        "test_a_new_subbuf_size_reports_nothing_missed_on_its_new_pages", "subbuf-change-missed")
    assert [(f.id, f.data["flagged"], f.data["stale"]) for f in failures] == \
        [("subbuf-change-missed", 2, 2)]
    # Fixed: nothing flagged, no WARN.
    fixed = copy.deepcopy(r["probe"])
    for name in ("read", "mapped"):
        fixed[name].update(missed=False, stored_lost=None)
    checks, raised = run_kernel_test(test, fixed)
    v = verdicts.judge(checks.failures, [], issues, raised)
    assert v.outcome == "passed" and v.not_seen == SUBBUF_ISSUE
    # A count that is not the overrun before the change is another bug.
    wrong = copy.deepcopy(r["probe"])
    wrong["read"]["stored_lost"] = 5
    checks, raised = run_kernel_test(test, wrong)
    assert verdicts.judge(checks.failures, r["splats"], issues, raised).outcome == "failed"


def test_a_new_subbuf_size_that_delays_the_watermark() -> None:
    """7.2.13: after four sub-buffer size changes over read events, poll() never gives
    POLLIN in 16 steps where the same fill without them gives it from step 13 (and
    nr_dirty_pages() WARNs: the splat)."""
    test, r, issues, failures = _recorded_subbuf_xfail(
        "test_a_new_subbuf_size_keeps_the_buffer_percent_watermark", "subbuf-change-watermark")
    assert [(f.id, f.data["late"], f.data["early"]) for f in failures] == \
        [("subbuf-change-watermark", 4, 0)]
    fixed = copy.deepcopy(r["probe"])
    fixed["flipped"].update(polls=fixed["control"]["polls"],
                            first_pollin=fixed["control"]["first_pollin"])
    checks, raised = run_kernel_test(test, fixed)
    v = verdicts.judge(checks.failures, [], issues, raised)
    assert v.outcome == "passed" and v.not_seen == SUBBUF_ISSUE
    # POLLIN too early after the changes: not this issue.
    early = copy.deepcopy(r["probe"])
    early["flipped"]["polls"] = [1] * len(early["flipped"]["polls"])
    checks, raised = run_kernel_test(test, early)
    assert verdicts.judge(checks.failures, [], issues, raised).outcome == "failed"
    # No POLLIN in the control either: the check says nothing, the test fails saying so.
    mute = copy.deepcopy(r["probe"])
    mute["control"]["polls"] = [0] * len(mute["control"]["polls"])
    checks, raised = run_kernel_test(test, mute)
    v = verdicts.judge(checks.failures, [], issues, raised)
    assert v.outcome == "failed" and "the check says nothing" in v.reason
    # The race explorer's failure with the subbuf load (its size flips) and this WARN.
    [issue] = [i for i in issues if i.id == SUBBUF_ISSUE[0]]
    assert issue.explains_explore("trace-mmap", "splat", ["subbuf-changed-with-events"],
                                  splat=r["splats"][0])


def test_recorded_outputs_are_not_changed_by_the_tests() -> None:
    r = recorded("first-mapping")
    before = copy.deepcopy(r)
    run_kernel_test(first_mapping_test(), r["probe"])
    assert r == before


def test_the_issue_a_reason_names_is_read_back_also_when_two_are_named() -> None:
    assert known_issues.named_in("known kernel issue perf-x: it did") == "perf-x"
    assert known_issues.named_in("known kernel issue a-b+c.d: two at once") == "a-b+c.d"
    assert known_issues.named_in("no issue here") is None
