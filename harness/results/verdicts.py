"""A test's verdict from everything it showed: its failed checks, its exception, its splats.

A test records ABI checks with the `check` fixture (`Checks`): a failed check does not stop the
test, so one run shows every rule the kernel broke. `judge` then decides: a failure that a
known issue of this test explains (its check id and `when` predicate, or its splat title) is
XFAIL; anything else (another failed check, an exception, an unexplained splat) fails the test,
whatever else was explained. A known issue whose symptom did not show is reported as not seen.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.results.known_issues import CheckFailure, KnownIssue


class Checks:
    """The `check` fixture: check(id, ok, message, **observed) records a failed ABI check and
    lets the test go on; returns ok, so a test can still branch on it."""

    def __init__(self) -> None:
        self.failures: list[CheckFailure] = []

    def __call__(self, check_id: str, ok: bool, message: str, **observed: Any) -> bool:
        if not ok:
            self.failures.append(CheckFailure(check_id, message, observed))
        return bool(ok)


@dataclass(frozen=True)
class Verdict:
    outcome: str                              # passed, failed or xfailed
    reason: str = ""                          # why it failed, or the known issue it showed
    seen: tuple[str, ...] = ()                # known issues whose symptom showed
    not_seen: tuple[str, ...] = ()            # known issues of this test that did not show
    unexplained: list[str] = field(default_factory=list)   # one line per unexplained failure


def judge(failures: list[CheckFailure], splat_titles: list[str], issues: list[KnownIssue],
          raised: str | None = None) -> Verdict:
    """The verdict of one test. `raised` is the first line of the exception the test ended
    with (None if it returned); `issues` the known issues covering this test."""
    seen: list[KnownIssue] = []
    unexplained: list[str] = []
    explained: list[str] = []

    def explain(what: str, issue: KnownIssue | None) -> None:
        if issue is None:
            unexplained.append(what)
            return
        explained.append(f"{what} (known issue {issue.id})")
        if issue not in seen:
            seen.append(issue)

    for f in failures:
        explain(f"check {f.id}: {f.message}", next((i for i in issues if i.explains_check(f)),
                                                    None))
    for title in splat_titles:
        explain(f"the kernel splatted during this test: {title}", next((i for i in issues if i.explains_splat(title)),
                                               None))
    not_seen = tuple(i.id for i in issues if i not in seen)
    if raised is not None:
        unexplained.insert(0, raised)
    if unexplained:
        return Verdict("failed", "\n".join(unexplained + explained), tuple(i.id for i in seen),
                       not_seen, unexplained)
    if seen:
        return Verdict("xfailed", "; ".join(i.summary for i in seen), tuple(i.id for i in seen),
                       not_seen)
    return Verdict("passed", "", (), not_seen)
