"""What one selftest case's run means for its pytest test (pure: output in, verdict out).

The kernel's own words are kept: a SKIP's reason, a failure's diagnostics. A case that
printed no result of its own (killed at its timeout, crashed, a harness that bailed out) fails
with the exit status and the output's tail, since the case did not finish.
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.selftests import catalog, ktap
from harness.selftests.catalog import SelftestCase

TIMEOUT_STATUS = 124  # timeout(1)'s exit status when it killed the case
TAIL_LINES = 25


@dataclass(frozen=True)
class Outcome:
    """passed, failed, skipped or xfailed, and the message pytest shows."""
    kind: str
    message: str = ""


def judge(case: SelftestCase, output: str, exit_status: int, timeout_s: int) -> Outcome:
    """The verdict of `case` from its combined output and exit status."""
    report = ktap.parse(output)
    if case.target == "ftrace":
        results = report.cases  # the case, and its instance run when flagged `instance`
    else:
        found = report.find(case.case)
        results = [found] if found is not None else []
    if not results or (report.planned is not None and len(results) < report.planned
                       and case.target == "ftrace"):
        why = (f"killed at its {timeout_s} s timeout" if exit_status == TIMEOUT_STATUS
               else f"exit status {exit_status}")
        if report.bailed_out:
            why += f", bailed out: {report.bailed_out}"
        return Outcome("failed", f"{case.program}: no KTAP result for {case.case} ({why})\n"
                       + _tail(output))
    failed = [r for r in results if r.outcome in ("failed", "xpassed")]
    if failed:
        return Outcome("failed", "\n".join(
            [f"{case.program}: not ok {r.number} {r.name}"
             + (f" # {r.directive} {r.reason}".rstrip() if r.directive else "")
             for r in failed] + [""] + _diagnostics(failed, output)))
    if all(r.outcome == "skipped" for r in results):
        return Outcome("skipped", _skip_reason(case, results, report.trailing))
    if any(r.outcome == "xfailed" for r in results):
        return Outcome("xfailed", "; ".join(f"{r.name}: XFAIL {r.reason}".strip()
                                            for r in results if r.outcome == "xfailed"))
    return Outcome("passed")


def _skip_reason(case: SelftestCase, results: list[ktap.Case], trailing: list[str]) -> str:
    reasons = sorted({r.reason for r in results if r.reason})
    if reasons:
        return f"{case.program}: SKIP " + "; ".join(reasons)
    if (checked := _before_exit(trailing)):
        return f"{case.program}: SKIP (UNSUPPORTED after: {checked})"
    if case.requires:
        return (f"{case.program}: SKIP, no reason printed (the case requires: {case.requires}; "
                "it may check more itself)")
    return f"{case.program}: SKIP (no reason given)"


def _before_exit(trailing: list[str]) -> str:
    """From an ftracetest case's log tail (its `set -x` trace): the commands just before it
    gave up (exit_unsupported, or the requires: check's own message)."""
    log = [t[len(catalog.FTRACE_LOG):] for t in trailing if t.startswith(catalog.FTRACE_LOG)]
    for i, line in enumerate(log):
        if "exit_unsupported" in line or "exit_unresolved" in line:
            return "; ".join(x.lstrip("+ ").strip() for x in log[max(0, i - 3):i]
                             if x.strip() and "exit_" not in x)
    return ""


def _diagnostics(failed: list[ktap.Case], output: str) -> list[str]:
    """The failed cases' own messages; else (ftracetest prints a failing case's log after its
    result line) the output's tail, long enough for the command that failed."""
    lines = [d for r in failed for d in r.diagnostics]
    if lines:
        return lines[-TAIL_LINES * 2:]
    return output.rstrip().splitlines()[-TAIL_LINES * 2:]


def _tail(output: str) -> str:
    return "\n".join(output.rstrip().splitlines()[-TAIL_LINES:])
