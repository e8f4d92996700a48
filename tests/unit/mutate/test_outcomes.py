"""The kill rule (harness/mutate/outcomes.py): only a test the mutant broke on a booted
guest kills it; the kernel's own selftests are judged apart; the kill rate counts only the
mutants the suite could judge."""
from __future__ import annotations

from harness.mutate import outcomes
from harness.mutate.outcomes import (KILLED, NOT_BOOTED, NOT_BUILT, NOT_RUN, SURVIVED,
                                     MutantResult, totals)
from harness.runs import child_run

A, B, C = ("tests/kernel/test_a.py::test_one", "tests/kernel/test_a.py::test_two",
           "tests/kernel/test_b.py::test_three")
BOOTS = [{"cpus": 1, "memory_mb": 1024, "boot_s": 8.0, "accel": "tcg"}]


def _summary(*results: tuple[str, str, str], boots: list | None = None) -> dict:
    return {"boots": BOOTS if boots is None else boots,
            "results": [{"test": t, "outcome": o, "reason": r} for t, o, r in results]}


D = "tests/kernel/test_b.py::test_known"
BASELINE = child_run.of(_summary(
    (A, "passed", ""), (B, "failed", "AssertionError: broken already"), (C, "passed", ""),
    (D, "xfailed", "known kernel issue k")), 1)


def judge(summary: dict | None, no_guest: frozenset[str] | set[str] = frozenset()
          ) -> tuple[str, list[str], str]:
    """mutate.judge of a mutant's run with this summary.json and these tests without a
    guest."""
    return outcomes.judge(BASELINE, child_run.of(summary, 1, no_guest))


def test_a_known_issue_test_that_fails_outside_its_symptom_kills_the_mutant() -> None:
    # xfailed unmutated: the known issue excused exactly its symptom; failed on the mutant:
    # something the known issue does not excuse broke.
    run = _summary((A, "passed", ""), (C, "passed", ""),
                   (D, "failed", "check resize: expected ok, got EBUSY"))
    assert judge(run) == (KILLED, [D], "test_known: check resize: expected ok, got EBUSY")
    assert judge(_summary((A, "passed", ""), (D, "xfailed", "known kernel issue k")))[0] \
        == SURVIVED


def test_a_test_that_passed_unmutated_and_fails_on_the_mutant_kills_it() -> None:
    run = _summary((A, "failed", "AssertionError: 1+3 pages accepted\nmore"), (B, "failed", ""),
                   (C, "passed", ""))
    outcome, killers, why = judge(run)
    assert (outcome, killers) == (KILLED, [A])
    assert why == "test_one: AssertionError: 1+3 pages accepted"


def test_a_test_that_failed_unmutated_never_kills() -> None:
    run = _summary((A, "passed", ""), (B, "failed", "x"), (C, "passed", ""))
    assert judge(run)[:2] == (SURVIVED, [])


def test_a_test_the_unmutated_run_did_not_run_never_kills() -> None:
    run = _summary(("tests/kernel/test_c.py::test_new", "failed", "x"))
    assert judge(run)[0] == SURVIVED


def test_a_flaky_failure_is_not_a_kill() -> None:
    run = _summary((A, "rerun", "guest died"), (A, "passed", ""))
    assert judge(run)[0] == SURVIVED


def test_a_failure_on_the_rerun_too_is_a_kill() -> None:
    run = _summary((A, "rerun", "first"), (A, "failed", "second"))
    assert judge(run)[:2] == (KILLED, [A])


def test_a_guest_that_did_not_boot_is_never_a_kill() -> None:
    run = _summary((A, "failed", "    | [ 1.0] Kernel panic"), (C, "failed", "x"), boots=[])
    assert judge(run, {"test_a::test_one", "test_b::test_three"})[0] == NOT_BOOTED
    # No boot at all, whatever the reasons say.
    assert judge(_summary((A, "failed", "x"), boots=[]))[0] in (KILLED, NOT_BOOTED)
    assert judge(run, {"test_a::test_one", "test_b::test_three"})[1] == []


def test_a_boot_failure_of_one_guest_does_not_kill_but_a_real_failure_does() -> None:
    run = _summary((A, "failed", "x"), (C, "failed", "AssertionError: y"))
    outcome, killers, _ = judge(run, {"test_a::test_one"})
    assert (outcome, killers) == (KILLED, [C])


def test_no_summary_is_not_run_and_no_test_selected_is_survived() -> None:
    assert judge(None)[0] == NOT_RUN
    assert judge(_summary(boots=[])) == (SURVIVED, [], "no test of the selection ran")
    # A mutated kernel that could not be prepared (./lab run's {"not_run": why}) ran nothing:
    # not judged, so not a survivor that would lower the kill rate.
    assert judge({"not_run": "kernel src: the build failed"}) == \
        (NOT_RUN, [], "not run: kernel src: the build failed")


def test_the_kernels_own_selftests_are_judged_apart_from_ours() -> None:
    st = "tests/kernel/kselftest/test_kselftest.py::test_selftest[ring-buffer/map_test/x]"
    base = child_run.of(_summary((A, "passed", ""), (st, "passed", "")), 1)
    only_theirs = child_run.of(_summary((A, "passed", ""), (st, "failed", "not ok 1 x")), 1)
    assert outcomes.judge(base, only_theirs)[:2] == (SURVIVED, [])
    assert outcomes.selftest_killers(base, only_theirs) == [st]
    both = child_run.of(_summary((A, "failed", "y"), (st, "passed", "")), 1)
    assert outcomes.judge(base, both)[:2] == (KILLED, [A])
    assert outcomes.selftest_killers(base, both) == []
    # Theirs alone (-k kselftest): ours saw nothing; theirs judged it.
    theirs = child_run.of(_summary((st, "failed", "not ok 1 x")), 1)
    assert outcomes.judge(base, theirs) == (
        SURVIVED, [], "none of our tests in the selection ran (only the kernel's own)")
    assert outcomes.selftest_killers(base, theirs) == [st]


def test_selftests_that_had_no_guest_or_did_not_run_judge_nothing() -> None:
    st = "tests/kernel/kselftest/test_kselftest.py::test_selftest[ring-buffer/map_test/x]"
    base = child_run.of(_summary((A, "passed", ""), (st, "passed", "")), 1)
    no_boot = child_run.of(_summary((st, "failed", "no guest"), boots=[]), 1,
                           frozenset({"test_kselftest::test_selftest[ring-buffer/map_test/x]"}))
    assert outcomes.selftest_killers(base, no_boot) is None
    ours_only = child_run.of(_summary((A, "passed", "")), 1)
    assert outcomes.selftest_killers(base, ours_only) is None


def test_a_test_that_xpassed_unmutated_and_fails_on_the_mutant_kills_it() -> None:
    # compare.broke: an xpass is a reliable verdict (the known issue not seen), so failing
    # on the mutant is evidence the mutant broke it.
    base = child_run.of(_summary((A, "xpassed", "")), 1)
    assert outcomes.judge(base, child_run.of(_summary((A, "failed", "x")), 1))[:2] == (
        KILLED, [A])


def test_totals_rate_only_mutants_the_suite_could_judge() -> None:
    rs = [MutantResult(str(i), "f", "r", o) for i, o in
          enumerate([KILLED, KILLED, KILLED, SURVIVED, NOT_BUILT, NOT_BOOTED])]
    t = totals(rs)
    assert (t[KILLED], t[SURVIVED], t[NOT_BUILT], t[NOT_BOOTED], t["judged"]) == (3, 1, 1, 1, 4)
    assert t["kill_rate"] == 0.75


def test_a_selftest_without_a_verdict_on_the_unmutated_kernel_is_left_out_of_mutants() -> None:
    st = "tests/kernel/kselftest/test_kselftest.py::test_selftest[ftrace/%s]"
    base = child_run.of(_summary((A, "failed", "ours"), (st % "a", "passed", ""),
                                 (st % "slow", "failed", "killed at its 900 s timeout"),
                                 (st % "hv", "skipped", "requires: remotes/hypervisor")), 1)
    assert outcomes.selftests_that_cannot_kill(base) == (st % "slow", st % "hv")


def test_a_failure_for_the_lab_s_own_fault_never_kills() -> None:
    # mutate -j 2 before the module lock: two workers built ringlab_aux at once, one failed,
    # and perf_mmap's cases failed with "the lab's error: ..." on a kernel that was fine.
    st = "tests/kernel/kselftest/test_kselftest.py::test_selftest[perf_events/mmap/rb.map]"
    base = child_run.of(_summary((A, "passed", ""), (st, "passed", "")), 1)
    fault = "Failed: the lab's error: test module ringlab_aux does not build for k"
    mutant = child_run.of(_summary((A, "failed", fault), (st, "failed", fault)), 1)
    assert outcomes.judge(base, mutant)[0] != KILLED
    assert outcomes.selftest_killers(base, mutant) == []


def test_a_known_issue_that_comes_back_where_the_test_passed_kills_the_mutant() -> None:
    # Issue 44: a 7.2 build with the known issue's bug put back turned the test from passed
    # into XFAIL, and mutate called it SURVIVED. Passed unmutated, xfailed here: a regression.
    run = _summary((A, "xfailed", "known kernel issue trace-mmap-first-map-error-dropped: "
                    "a refused first mapping returns 0 (https://example)"), (C, "passed", ""))
    assert judge(run) == (KILLED, [A], "test_one: the known issue "
                          "trace-mmap-first-map-error-dropped came back (the test passed on "
                          "the unmutated kernel)")


def test_a_known_issue_seen_unmutated_too_is_no_kill() -> None:
    # D xfailed on both: the known issue excuses exactly its symptom, on either kernel.
    run = _summary((A, "passed", ""), (D, "xfailed", "known kernel issue k: x"))
    assert judge(run)[:2] == (SURVIVED, [])


def test_a_failure_names_the_kill_before_a_known_issue_that_came_back() -> None:
    run = _summary((A, "xfailed", "known kernel issue k: x"), (C, "failed", "broken"))
    assert judge(run) == (KILLED, [C, A], "test_three: broken")
