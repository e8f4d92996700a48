"""The fail-nth sweep, against a simulated task: the Nth allocation of a call fails."""
from __future__ import annotations

import errno
from pathlib import Path

import pytest

import fault_inject
import probelib


class Task:
    """What the kernel keeps per task: fail_nth, counted down by each allocation."""

    def __init__(self) -> None:
        self.fail_nth = 0

    def allocate(self) -> None:
        if self.fail_nth:
            self.fail_nth -= 1
            if self.fail_nth == 0:
                raise OSError(errno.ENOMEM, "injected")


@pytest.fixture
def task(monkeypatch: pytest.MonkeyPatch) -> Task:
    t = Task()

    class FailNth:
        def arm(self, nth: int) -> None:
            t.fail_nth = nth

        def disarm(self) -> bool:
            left, t.fail_nth = t.fail_nth, 0
            return left == 0

        def close(self) -> None:
            pass

    monkeypatch.setattr(fault_inject, "FailNth", FailNth)
    return t


def test_the_sweep_fails_each_allocation_once_then_runs_the_call_whole(task: Task) -> None:
    made = []

    def call(state: int) -> None:
        for _ in range(3):
            task.allocate()
        made.append(state)

    judged = []
    attempts = fault_inject.sweep(lambda: len(judged), call,
                                  lambda state, outcome: judged.append(outcome) or {"s": state})
    assert [(a.nth, a.outcome, a.injected) for a in attempts] == [
        (1, "ENOMEM", True), (2, "ENOMEM", True), (3, "ENOMEM", True), (4, "ok", False)]
    assert made == [3] and [a.after for a in attempts] == [{"s": i} for i in range(4)]
    assert fault_inject.summary(attempts)["injected"] == 3
    assert fault_inject.summary(attempts)["completed"] is True


def test_a_failure_the_call_recovers_from_is_ok_and_still_injected(task: Task) -> None:
    def call(state: None) -> None:
        try:
            task.allocate()  # a fallback: the large allocation fails, a small one is made
        except OSError:
            pass
        task.allocate()

    attempts = fault_inject.sweep(lambda: None, call, lambda s, o: {})
    assert [(a.outcome, a.injected) for a in attempts] == [
        ("ok", True), ("ENOMEM", True), ("ok", False)]


def test_the_sweep_stops_at_the_limit_and_says_it_did_not_complete(task: Task) -> None:
    def call(state: None) -> None:
        for _ in range(10):
            task.allocate()

    summary = fault_inject.summary(fault_inject.sweep(lambda: None, call, lambda s, o: {}, 4))
    assert len(summary["attempts"]) == 4 and summary["completed"] is False


def test_a_kernel_without_fault_injection_is_a_skip_naming_the_option(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fault_inject, "FAIL_NTH", str(tmp_path / "fail-nth"))
    with pytest.raises(probelib.Skip, match="CONFIG_FAULT_INJECTION is off"):
        fault_inject.prepare()


def test_prepare_turns_the_knobs_of_the_points_the_kernel_has(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fail-nth").write_text("0\n")
    (tmp_path / "debug" / "failslab").mkdir(parents=True)
    monkeypatch.setattr(fault_inject, "FAIL_NTH", str(tmp_path / "fail-nth"))
    monkeypatch.setattr(fault_inject, "DEBUGFS", str(tmp_path / "debug"))
    assert fault_inject.prepare() == ["failslab"]
    knobs = {p.name: p.read_text() for p in (tmp_path / "debug" / "failslab").iterdir()}
    assert knobs == {"ignore-gfp-wait": "N", "verbose": "0"}
