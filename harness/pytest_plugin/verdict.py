"""The verdict plugin: a test's outcome from its failed checks, its exception and its splats
(harness/results/verdicts.judge), with the known issues of the test excusing exactly their own
symptom; and the `check` fixture that records an ABI check without stopping the test."""
from __future__ import annotations

import pytest

from harness.kernellog import splats
from harness.pytest_plugin.context import RunContext
from harness.pytest_plugin.record import Record
from harness.results import summary, verdicts

CHECKS_KEY = pytest.StashKey[verdicts.Checks]()
VERDICT_KEY = pytest.StashKey[verdicts.Verdict]()
# Tests that make allocations fail (probes/fault_inject.py): warn_alloc()'s reports of the
# probes' own task are theirs (fail-nth fails only the thread that armed it).
INJECTS_MARKER = "injects_allocation_failures"
PROBE_TASK = "python3"  # the comm of probes/runner.py, which runs every check


class Verdict:
    """Judges the call phase of every test, with or without a guest."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    @pytest.fixture
    def check(self, request: pytest.FixtureRequest) -> verdicts.Checks:
        """check(id, ok, message, **observed): an ABI check that does not stop the test. The
        plugin fails the test with every failed check, unless a known issue of this test
        (kernels/known-issues.yaml) explains exactly that check."""
        checks = verdicts.Checks()
        request.node.stash[CHECKS_KEY] = checks
        return checks

    def judge(self, item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo,
              found: list[splats.Splat], tcg: bool, record: Record) -> None:
        """Set the call report's outcome and reason from everything the test showed; `tcg`:
        its guest ran under TCG, whose artefacts fail nothing."""
        checks = item.stash.get(CHECKS_KEY, None)
        raised = None
        if report.failed and call.excinfo is not None:
            raised = summary.first_line(call.excinfo.exconly()) or "the test failed"
        elif report.failed:
            raised = reason(report)
        injected = item.get_closest_marker(INJECTS_MARKER) is not None
        bugs = [s.title for s in found if not (tcg and s.tcg_artefact)
                and not (injected and s.task == PROBE_TASK)]
        v = verdicts.judge(checks.failures if checks else [], bugs,
                           self.ctx.issues_for(item.nodeid), raised)
        item.stash[VERDICT_KEY] = v
        record.not_seen = list(v.not_seen)
        if v.outcome == "failed" and raised is None:
            report.outcome = "failed"
            report.longrepr = v.reason + "".join(
                f"\n\n{s.text}" for s in found if s.title in bugs)
        elif v.outcome == "failed" and len(v.unexplained) > 1:  # the exception and more
            report.sections.append(("ringlab verdict", v.reason + "\n"))
            record.also = v.unexplained[1:]
        elif v.outcome == "xfailed":
            report.outcome = "skipped"
            setattr(report, "wasxfail", v.reason)  # pytest's own mark of an expected failure


def reason(report: pytest.TestReport) -> str:
    """Why a test failed, what first: the rule's own message (an assertion's first line, the
    plugin's verdict) rather than where it was raised."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return str(crash.message)[:2000]
    return (str(report.longrepr).strip() if report.longrepr else "")[:2000]
