"""What changed for each test between two runs of the suite: the one comparison of outcomes.

The nightly history (history.py: a run against the previous run of its kernel line), `./lab
review` (review.py: base kernel against base + series), bisect (the good commit against a
step) and mutate (the unmutated kernel against a mutant) all compare two maps of final
outcomes (history.outcomes: test -> passed, xpassed, failed, error, skipped, xfailed or
flaky). They used to say it each their own way and disagreed: the history called only
failed -> passed "fixed", review called anything that ended passed or xfailed "newly
passing" (flaky -> passed, skipped -> passed, and failed -> xfailed, which the history said
explicitly was not fixed). Here each change has one meaning.

Outcomes fall in groups: pass = passed, xpassed (the checks held; an xpass is a known issue
not seen); known = xfailed (the known kernel issue's symptom, kernels/known-issues.yaml);
fail = failed, error; flaky = failed, then passed on its rerun in a fresh guest (a kernel
finding: not a pass); skip = skipped (no verdict; an outcome this module does not know
counts as skip); - = not in that run. Rows: the previous outcome; columns: the current one.

           pass            known              fail           flaky        skip           -
    pass   unchanged       newly known        new failure    newly flaky  newly skipped  gone
    known  known not seen  unchanged          new failure    newly flaky  newly skipped  gone
    fail   fixed           failure now known  still failing  still flaky  newly skipped  gone
    flaky  fixed           failure now known  new failure    still flaky  newly skipped  gone
    skip   newly passing   newly known        new failure    newly flaky  unchanged      gone
    -      new test        new test           new test       new test     new test

Why these meanings:
- fixed: failing or flaky before, passing now: what a kernel developer calls fixed. Failing
  before and now the known issue's xfail is not fixed (the bug is still there): "failure now
  known". Skipped before and passing now was never seen failing: "newly passing".
- gone: a test in the previous run and not in this one, whatever it was: a failing test that
  is gone is not fixed, it is no longer looked at.
- new failure: failing now and not failing before, including flaky -> failing (it no longer
  passes even on its rerun) and skipped -> failing.
- still flaky: flaky now, and flaky or failing before: not fixed and no new finding.
- broke (the stricter question of bisect and mutate): failing now after a reliable verdict
  before (pass or known), so that what changed between the two runs broke the test; a
  flaky or skipped test before is no such evidence.
- returned (mutate's): passing before and now the known issue's xfail: the known bug's
  symptom came back where the test had shown it gone. A regression as much as a failure
  (DEVELOPERS.md: a known issue excuses its symptom, it does not make it welcome back).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

FAILING = frozenset({"failed", "error"})
PASSING = frozenset({"passed", "xpassed"})
KNOWN = "xfailed"
FLAKY = "flaky"
SKIPPED = "skipped"
HELD = PASSING | {KNOWN}      # a reliable verdict: what `broke` needs before

# The changes (the table in the module docstring).
UNCHANGED = "unchanged"
NEW_FAILURE = "new failure"
STILL_FAILING = "still failing"
FIXED = "fixed"
NEWLY_FLAKY = "newly flaky"
STILL_FLAKY = "still flaky"
NEWLY_SKIPPED = "newly skipped"
NEWLY_PASSING = "newly passing"
KNOWN_NOT_SEEN = "known not seen"
NEWLY_KNOWN = "newly known"
FAILURE_NOW_KNOWN = "failure now known"
NEW_TEST = "new test"
GONE = "gone"

_PASS, _KNOWN, _FAIL, _FLAKY, _SKIP = "pass", "known", "fail", "flaky", "skip"
_TABLE: dict[tuple[str, str], str] = {
    (_PASS, _PASS): UNCHANGED, (_PASS, _KNOWN): NEWLY_KNOWN, (_PASS, _FAIL): NEW_FAILURE,
    (_PASS, _FLAKY): NEWLY_FLAKY, (_PASS, _SKIP): NEWLY_SKIPPED,
    (_KNOWN, _PASS): KNOWN_NOT_SEEN, (_KNOWN, _KNOWN): UNCHANGED, (_KNOWN, _FAIL): NEW_FAILURE,
    (_KNOWN, _FLAKY): NEWLY_FLAKY, (_KNOWN, _SKIP): NEWLY_SKIPPED,
    (_FAIL, _PASS): FIXED, (_FAIL, _KNOWN): FAILURE_NOW_KNOWN, (_FAIL, _FAIL): STILL_FAILING,
    (_FAIL, _FLAKY): STILL_FLAKY, (_FAIL, _SKIP): NEWLY_SKIPPED,
    (_FLAKY, _PASS): FIXED, (_FLAKY, _KNOWN): FAILURE_NOW_KNOWN, (_FLAKY, _FAIL): NEW_FAILURE,
    (_FLAKY, _FLAKY): STILL_FLAKY, (_FLAKY, _SKIP): NEWLY_SKIPPED,
    (_SKIP, _PASS): NEWLY_PASSING, (_SKIP, _KNOWN): NEWLY_KNOWN, (_SKIP, _FAIL): NEW_FAILURE,
    (_SKIP, _FLAKY): NEWLY_FLAKY, (_SKIP, _SKIP): UNCHANGED,
}


def group(outcome: str) -> str:
    """An outcome's row/column of the table: pass, known, fail, flaky or skip."""
    if outcome in PASSING:
        return _PASS
    if outcome == KNOWN:
        return _KNOWN
    if outcome in FAILING:
        return _FAIL
    if outcome == FLAKY:
        return _FLAKY
    return _SKIP


def change(before: str | None, after: str | None) -> str:
    """A test's change from its previous outcome to its current one (None: not in that run)."""
    if after is None:
        return GONE
    if before is None:
        return NEW_TEST
    return _TABLE[group(before), group(after)]


@dataclass(frozen=True)
class Change:
    """One test's outcomes in the two runs and what that change is called."""
    test: str
    before: str | None
    after: str | None
    kind: str


def changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[Change]:
    """Every test of either run (unchanged ones too), by name."""
    return [Change(t, before.get(t), after.get(t), change(before.get(t), after.get(t)))
            for t in sorted(before.keys() | after.keys())]


def of_kind(found: Iterable[Change], *kinds: str) -> list[str]:
    """The tests whose change is one of `kinds`, in the order given."""
    return [c.test for c in found if c.kind in kinds]


def failing(outcomes: Mapping[str, str]) -> list[str]:
    """The tests of one run that failed or errored, in the run's order."""
    return [t for t, o in outcomes.items() if o in FAILING]


def new_failures(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Tests that fail now and were in the previous run without failing (NEW_FAILURE), in the
    order of `after` (the run's order)."""
    return [t for t in failing(after) if t in before and before[t] not in FAILING]


def fixed(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Tests that failed or were flaky before and pass now (FIXED), in the order of `after`."""
    return [t for t, o in after.items() if change(before.get(t), o) == FIXED]


def broke(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Tests that gave a reliable verdict before (passed, xpassed or xfailed) and fail now:
    the evidence that what changed between the runs broke them (bisect's good commit against
    a step, mutate's unmutated kernel against a mutant). In the order of `after`. An xfail
    before counts: the known issue excuses exactly its symptom, and failing means a check
    outside it failed."""
    return [t for t in failing(after) if before.get(t) in HELD]


def returned(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Tests that passed (or xpassed) before and xfail now under their known issue: its
    symptom came back (NEWLY_KNOWN from pass). In the order of `after`."""
    return [t for t, o in after.items() if o == KNOWN and before.get(t) in PASSING]
