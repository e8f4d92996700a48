"""harness/pytest_plugin/phases.py: the order the lab's steps take on each report. Without a
guest only the call is judged; at setup a guest death fails the setup only if the setup failed;
at the call, a guest already dead is a death (not observed, not judged), else the guest's log
is observed, then the test judged (TCG from the guest's plan), then its health noted; at the
teardown the late splats come before the look at whether the guest was left changed; every
report gets its record and the events to send. The other plugins are recording fakes."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from harness.pytest_plugin import record
from harness.pytest_plugin.guests import GUEST_KEY
from harness.pytest_plugin.phases import Phases


class _Steps:
    """Observation, Verdict, Health and Sender in one: each call is logged by name."""

    def __init__(self, dead_before: str | None = None, dead_observed: str | None = None
                 ) -> None:
        self.log: list[tuple[str, Any]] = []
        self.dead_before = dead_before
        self.dead_observed = dead_observed

    def death(self, call: Any, report: Any, g: Any) -> str | None:
        self.log.append(("death", call.when))
        return self.dead_before

    def observe(self, item: Any, report: Any, g: Any, rec: Any) -> tuple[list, str | None]:
        self.log.append(("observe", None))
        return ["splat"], self.dead_observed

    def judge(self, item: Any, report: Any, call: Any, found: list, tcg: bool, rec: Any) -> None:
        self.log.append(("judge", (found, tcg)))

    def note_call(self, item: Any, report: Any, found: list) -> None:
        self.log.append(("note_call", found))

    def died(self, item: Any, report: Any, g: Any, dead: str, rec: Any) -> None:
        self.log.append(("died", dead))

    def late_splats(self, item: Any, report: Any, g: Any, rec: Any) -> None:
        self.log.append(("late_splats", None))

    def after_teardown(self, item: Any, report: Any, g: Any, rec: Any) -> None:
        self.log.append(("after_teardown", None))

    def send(self, rec: record.Record) -> None:
        rec.events = [{"kind": "fact", "name": "n", "value": "v"}]
        self.log.append(("send", None))


def _run(steps: _Steps, when: str, outcome: str = "passed", guest: bool = True,
         accel: str = "tcg") -> tuple[pytest.TestReport, Any]:
    item = SimpleNamespace(nodeid="t.py::t", stash=pytest.Stash(), user_properties=[])
    if guest:
        item.stash[GUEST_KEY] = SimpleNamespace(plan=SimpleNamespace(accel=accel), probe_log=[])
    phases = Phases(steps, steps, steps, steps)  # type: ignore[arg-type]
    report = pytest.TestReport("t.py::t", ("t.py", 1, "t"), {}, outcome, None, when)
    hook = phases.pytest_runtest_makereport(item, SimpleNamespace(when=when))  # type: ignore[arg-type]
    next(hook)
    with pytest.raises(StopIteration) as done:
        hook.send(report)
    assert done.value.value is report
    return report, item


def _names(steps: _Steps) -> list[str]:
    return [name for name, _ in steps.log]


def test_without_a_guest_only_the_call_is_judged() -> None:
    s = _Steps()
    _run(s, "call", guest=False)
    assert s.log == [("judge", ([], False)), ("send", None)]
    s = _Steps()
    _run(s, "setup", guest=False)
    assert _names(s) == ["send"]


def test_a_healthy_call_is_observed_then_judged_then_noted() -> None:
    s = _Steps()
    _run(s, "call", accel="tcg")
    assert _names(s) == ["death", "observe", "judge", "note_call", "send"]
    assert dict(s.log)["judge"] == (["splat"], True)
    s = _Steps()
    _run(s, "call", accel="kvm")
    assert dict(s.log)["judge"] == (["splat"], False)


def test_a_guest_dead_at_the_call_is_a_death_not_judged() -> None:
    s = _Steps(dead_before="QEMU exited")
    _run(s, "call")
    assert s.log[:2] == [("death", "call"), ("died", "QEMU exited")]
    assert "observe" not in _names(s) and "judge" not in _names(s)


def test_a_death_the_observation_finds_is_not_judged_either() -> None:
    s = _Steps(dead_observed="Kernel panic")
    _run(s, "call")
    assert _names(s) == ["death", "observe", "died", "send"]


def test_a_death_at_setup_counts_only_if_the_setup_failed() -> None:
    s = _Steps(dead_before="gone")
    _run(s, "setup", outcome="passed")
    assert "died" not in _names(s)
    s = _Steps(dead_before="gone")
    _run(s, "setup", outcome="failed")
    assert ("died", "gone") in s.log and "judge" not in _names(s)


def test_the_teardown_takes_late_splats_before_the_guests_state() -> None:
    s = _Steps(dead_before="never asked")
    _run(s, "teardown")
    assert _names(s) == ["late_splats", "after_teardown", "send"]


def test_every_report_carries_its_record_with_the_events_sent() -> None:
    report, _ = _run(_Steps(), "setup")
    assert record.of(report).events == [{"kind": "fact", "name": "n", "value": "v"}]
