"""A mutant's outcome, judged from its child run against the unmutated kernel's. A kill is a
test the mutant broke (harness/results/compare.py `broke`: a reliable verdict on the unmutated
kernel, failing on the mutant) on a guest that booted."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.errors import LAB_FAULT
from harness.results import compare, known_issues, matrix
from harness.runs.child_run import ChildRun

KILLED, SURVIVED, NOT_BUILT, NOT_BOOTED, NOT_RUN = (
    "killed", "survived", "not built", "not booted", "not run")
OUTCOMES = (KILLED, SURVIVED, NOT_BUILT, NOT_BOOTED, NOT_RUN)


@dataclass
class MutantResult:
    """One row of the kill table."""
    id: str
    file: str
    rule: str
    outcome: str                                 # killed, survived, not built, ...
    killed_by: list[str] = field(default_factory=list)
    why: str = ""                                # first failure line, build error, ...
    build_s: float = 0.0
    run_s: float = 0.0
    fixes_revert: str | None = None
    report: str = ""                             # the mutant's ./lab run report folder
    selftest_killers: list[str] | None = None    # with --selftests: the kernel's own that failed
    explored: list[ExploreRun] | None = None     # with --explore: one per (seed, mode)


@dataclass
class ExploreRun:
    """One explore of a mutant's kernel: its seed, blind or steered, whether it found a
    failure the unmutated kernel's explore (same seed and mode) did not, and its wall time
    (an explore stops at its first such failure, once confirmed: the time to kill)."""
    seed: int
    steered: bool
    killed: bool
    by: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Judged:
    """The mutants' rows and the unmutated kernel's line of the kill table."""
    results: list[MutantResult]
    selection: str | None          # what judged them: a -k expression, an explore command
    whole_suite: bool
    base_counts: dict[str, int]    # the unmutated kernel's outcome counts
    base_run_s: float
    base_report: str


def _broken(baseline: ChildRun, child: ChildRun) -> list[str]:
    """Tests the mutant broke (compare.broke), on a guest that booted, not for the lab's own
    fault (a test module that did not build: its reason starts LAB_FAULT)."""
    last = {r["test"]: (r.get("reason") or "").removeprefix("Failed: ")
            for r in (child.summary or {}).get("results", [])}   # a test's last attempt
    return [t for t in compare.broke(baseline.outcomes, child.outcomes)
            if not child.without_guest(t) and not last.get(t, "").startswith(LAB_FAULT)]


def _first_reason(child: ChildRun, test: str) -> str:
    """The reason the test's first result that is not a rerun gives: its failure's, or the
    known issue an xfail names."""
    results: list[dict[str, Any]] = (child.summary or {}).get("results", [])
    first = next((r for r in results if r["test"] == test and r["outcome"] != "rerun"), {})
    return (first.get("reason") or "").strip()


def judge(baseline: ChildRun, child: ChildRun) -> tuple[str, list[str], str]:
    """(outcome, killing tests, why) of a mutant's run against the unmutated run. A kill
    needs a test the mutant broke (passed, xpassed or xfailed on the unmutated kernel, failed
    here) for a reason other than a guest that did not boot, or a test that passed on the
    unmutated kernel and xfails here: the mutant brought a known issue's symptom back (a
    regression, not an excuse). An xfail is a known kernel issue excusing
    exactly its symptom; the same test failing means a check outside that symptom failed
    (048 on 6.12.107: the known issue drops the refused first map's error, the mutant then
    leaves resize disabled, and the test fails on that)."""
    if child.summary is None:
        return NOT_RUN, [], "the test run wrote no summary.json"
    if child.not_run:  # the mutated kernel could not be prepared: nothing was judged
        return NOT_RUN, [], f"not run: {child.not_run}"
    if not child.summary.get("results"):  # the selection holds no test for this mutant
        return SURVIVED, [], "no test of the selection ran"
    if all(matrix.SELFTEST in r["test"] for r in child.summary["results"]):
        # as above: ours saw nothing of it (-k picked only the kernel's own: their column)
        return SURVIVED, [], "none of our tests in the selection ran (only the kernel's own)"
    killers = [t for t in _broken(baseline, child) if matrix.SELFTEST not in t]
    back = [t for t in compare.returned(baseline.outcomes, child.outcomes)
            if matrix.SELFTEST not in t and not child.without_guest(t)]
    if back and not killers:
        # Passed unmutated, xfails here: the mutant brought a known issue's symptom back.
        issue = known_issues.named_in(_first_reason(child, back[0])) or "?"
        return KILLED, back, (f"{back[0].split('::')[-1]}: the known issue {issue} came back "
                              "(the test passed on the unmutated kernel)")
    killers += back
    if killers:
        line = _first_reason(child, killers[0]).splitlines()
        return KILLED, killers, f"{killers[0].split('::')[-1]}: {line[0] if line else ''}"
    failed = compare.failing(child.outcomes)
    if not child.booted or any(child.without_guest(t) for t in failed):
        return NOT_BOOTED, [], "the guest did not boot"
    return SURVIVED, [], ""


def selftests_that_cannot_kill(baseline: ChildRun) -> tuple[str, ...]:
    """The kernel's own cases with no reliable verdict on the unmutated kernel (failed,
    skipped, timed out): they cannot kill, so a mutant's run leaves them out. On the 7.3 tree
    under TCG `ftrace/remotes/trace_pipe` alone runs into our 900 s guard."""
    return tuple(t for t, o in baseline.outcomes.items()
                 if matrix.SELFTEST in t and o not in compare.HELD)


def selftest_killers(baseline: ChildRun, child: ChildRun) -> list[str] | None:
    """The kernel's own selftest cases that passed on the unmutated kernel and fail here;
    None when none of them ran on a booted guest (nothing judged)."""
    ran = any(matrix.SELFTEST in r["test"] and not child.without_guest(r["test"])
              for r in (child.summary or {}).get("results", []))
    if not child.booted or not ran:
        return None
    return [t for t in _broken(baseline, child) if matrix.SELFTEST in t]


def totals(results: list[MutantResult]) -> dict:
    """Counts per outcome and the kill rate over the mutants the suite could judge (built
    and booted)."""
    counts = {o: sum(r.outcome == o for r in results) for o in OUTCOMES}
    judged = counts[KILLED] + counts[SURVIVED]
    return {**counts, "judged": judged,
            "kill_rate": round(counts[KILLED] / judged, 3) if judged else None}
