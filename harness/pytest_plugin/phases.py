"""The one place that orders what the lab does with each test report: observe what the guest
said, then judge the test, then look after the guest's health; after the teardown, the splats
logged since the test returned, then whether the torn-down test left the guest changed."""
from __future__ import annotations

from collections.abc import Generator

import pytest

from harness.pytest_plugin import record
from harness.pytest_plugin.guests import GUEST_KEY
from harness.pytest_plugin.health import Health
from harness.pytest_plugin.ledger import Sender
from harness.pytest_plugin.observation import Observation, properties
from harness.pytest_plugin.verdict import Verdict


class Phases:
    """Calls the other plugins' steps in the order a report needs them."""

    def __init__(self, observation: Observation, verdict: Verdict, health: Health,
                 sender: Sender) -> None:
        self.observation = observation
        self.verdict = verdict
        self.health = health
        self.sender = sender

    # trylast: the innermost wrapper, so every other plugin's wrapper sees the report as the
    # lab judged it. pytest-rerunfailures records a phase's failure inside its own wrapper; as
    # the outer one, this turned a passing body whose guest died into a failure it had not
    # recorded, and it dropped that report (neither rerun nor logged): the test vanished.
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        rec = record.Record()
        self._review(item, call, report, rec)
        if call.when == "call":
            item.user_properties.extend(properties(item, rec))
        self.sender.send(rec)
        record.save(report, rec)
        return report

    def _review(self, item: pytest.Item, call: pytest.CallInfo[None],
                report: pytest.TestReport, rec: record.Record) -> None:
        g = item.stash.get(GUEST_KEY, None)
        if g is None:  # no guest, no splats: its checks are still judged
            if call.when == "call":
                self.verdict.judge(item, report, call, [], False, rec)
            return
        if call.when == "teardown":  # every fixture of the test has been torn down
            self.observation.late_splats(item, report, g, rec)
            self.health.after_teardown(item, report, g, rec)
            return
        dead = self.health.death(call, report, g)
        if call.when == "setup":  # a fixture's probe may be what the guest died under
            if dead is not None and not report.passed:
                self.health.died(item, report, g, dead, rec)
            return
        if dead is None:
            found, dead = self.observation.observe(item, report, g, rec)
            if dead is None:
                self.verdict.judge(item, report, call, found, g.plan.accel == "tcg", rec)
                self.health.note_call(item, report, found)
        if dead is not None:
            self.health.died(item, report, g, dead, rec)
