"""harness/pytest_plugin/health.py: a guest that broke under a test. How it died is read from
the guest, an Oops raised, or a hang; a kernel crash on a fresh guest (or the same crash seen so)
is a verdict, never rerun, while an emulator death or a stall is rerun; a failed call that
splatted or left the guest's state changed gets its guest replaced after the teardown, and one
that left it as it was does not. Real console logs (tests/unit/data) give the splats; the
guests plugin and the guest are fakes."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.errors import GuestHang, KernelOops, SSHError
from harness.pytest_plugin import health
from harness.pytest_plugin.health import BROKE_KEY, SUSPECT_KEY, Health
from harness.pytest_plugin.record import Record

DATA = Path(__file__).parent.parent / "data"


class _Guests:
    def __init__(self, tests: int = 1, baseline: dict | None = None, pooled: bool = True
                 ) -> None:
        self.w = SimpleNamespace(tests=tests, baseline=baseline)
        self.discarded: list[str] = []
        self.is_pooled = pooled

    def watch(self, g: Any) -> SimpleNamespace:
        return self.w

    def pooled(self, g: Any) -> bool:
        return self.is_pooled

    def discard(self, g: Any, why: str) -> None:
        self.discarded.append(why)


def _health(guests: _Guests | None = None, reruns: int | None = None) -> Health:
    obs = SimpleNamespace(with_decoded=lambda g, s: s,
                          ctx=SimpleNamespace(issues_for=lambda nodeid: []))
    config = SimpleNamespace(getoption=lambda name, default=None: reruns)
    return Health(config, guests or _Guests(), obs)  # type: ignore[arg-type]


def _item(nodeid: str = "t.py::t") -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, stash=pytest.Stash(), markers=[],
                           add_marker=lambda m: None)


def _report(outcome: str = "failed", when: str = "call") -> pytest.TestReport:
    return pytest.TestReport("t.py::t", ("t.py", 1, "t"), {}, outcome, None, when)


def _guest(console: str = "", dead: str | None = None, state: Any = None) -> SimpleNamespace:
    def now() -> dict:
        if isinstance(state, Exception):
            raise state
        return state or {}
    return SimpleNamespace(health=lambda: dead, vm=SimpleNamespace(console_text=lambda: console),
                           plan=SimpleNamespace(accel="kvm"), state=now)


def _call(exc: BaseException | None) -> SimpleNamespace:
    if exc is None:
        return SimpleNamespace(excinfo=None)
    try:
        raise exc
    except BaseException:
        return SimpleNamespace(excinfo=pytest.ExceptionInfo.from_current())


def test_a_guest_that_says_it_died_is_dead() -> None:
    assert _health().death(_call(None), _report("passed"), _guest(dead="QEMU exited")) == \
        "QEMU exited"


def test_an_oops_raised_is_the_death_without_waiting() -> None:
    call = _call(KernelOops("Oops: general protection fault"))
    assert _health().death(call, _report(), _guest()) == "Oops: general protection fault"


def test_a_hang_that_is_no_death_is_a_guest_that_stopped_answering(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "_wait_for_death", lambda g: None)
    call = _call(GuestHang("command did not finish in 5 s: cat x"))
    assert _health().death(call, _report(), _guest()) == \
        "the guest stopped answering: harness.errors.GuestHang: command did not finish in 5 s: cat x"
    monkeypatch.setattr(health, "_wait_for_death", lambda g: "QEMU exited (signal 9)")
    assert _health().death(_call(SSHError("gone")), _report(), _guest()) == "QEMU exited (signal 9)"


def test_an_ordinary_failure_is_no_death() -> None:
    assert _health().death(_call(AssertionError("x")), _report(), _guest()) is None


def test_a_crash_on_a_fresh_guest_is_a_verdict_not_rerun() -> None:
    g, guests = _guest((DATA / "console-panic-rdinit-6.12.log").read_text()), _Guests(tests=1)
    item, report, rec = _item(), _report(), Record()
    _health(guests).died(item, report, g, "QEMU exited", rec)  # type: ignore[arg-type]
    assert report.outcome == "failed" and BROKE_KEY not in item.stash
    assert "a kernel crash on a guest no other test had used: a verdict" in str(report.longrepr)
    assert "the kernel splatted: Kernel panic - not syncing" in str(report.longrepr)
    assert rec.broke == ["kernel", "QEMU exited"] and rec.splats
    assert guests.discarded == ["the guest died during t.py::t"]


def test_the_same_crash_later_on_a_used_guest_is_that_verdict_again() -> None:
    h = _health(_Guests(tests=1))
    console = (DATA / "console-panic-rdinit-6.12.log").read_text()
    h.died(_item("t.py::first"), _report(), _guest(console), "x", Record())  # type: ignore[arg-type]
    h.guests.w.tests = 5  # type: ignore[attr-defined]
    item, report = _item("t.py::later"), _report()
    h.died(item, report, _guest(console), "x", Record())  # type: ignore[arg-type]
    assert "the same kernel crash as t.py::first" in str(report.longrepr)
    assert BROKE_KEY not in item.stash


def test_an_emulator_death_or_a_stall_is_rerun() -> None:
    for console, cause in (("no kernel message at all\n", "emulator"),
                           ((DATA / "console-rcu-stall-6.12.log").read_text(), "kernel")):
        item, report = _item(), _report()
        _health(_Guests(tests=1)).died(item, report, _guest(console), "QEMU exited",  # type: ignore[arg-type]
                                       Record())
        assert item.stash[BROKE_KEY] == (cause, "QEMU exited"), cause
        assert health._guest_broke_under(item)()  # type: ignore[arg-type]
        assert "a verdict" not in str(report.longrepr)


def test_a_rerun_starts_with_a_clean_slate() -> None:
    item = _item()
    item.stash[BROKE_KEY] = ("emulator", "x")
    item.stash[SUSPECT_KEY] = ""
    _health().pytest_runtest_setup(item)  # type: ignore[arg-type]
    assert BROKE_KEY not in item.stash and SUSPECT_KEY not in item.stash
    assert not health._guest_broke_under(item)()  # type: ignore[arg-type]


def test_reruns_asked_for_are_left_to_pytest_rerunfailures() -> None:
    marked: list[Any] = []
    item = _item()
    item.add_marker = marked.append
    _health(reruns=2).pytest_collection_modifyitems([item])  # type: ignore[list-item]
    assert marked == []
    _health().pytest_collection_modifyitems([item])  # type: ignore[list-item]
    assert marked[0].name == "flaky" and marked[0].kwargs["reruns"] == 1


def test_only_a_call_that_went_wrong_is_suspect() -> None:
    h, splat = _health(), SimpleNamespace(title="WARNING: x")
    for report, found, want in ((_report("passed"), [], None), (_report("skipped"), [], None),
                                (_report("failed"), [], ""),
                                (_report("failed"), [splat], "the kernel splatted (WARNING: x)")):
        item = _item()
        h.note_call(item, report, found)  # type: ignore[arg-type]
        assert item.stash.get(SUSPECT_KEY, None) == want


def _after(state: Any, baseline: dict | None, why: str = "",
           pooled: bool = True) -> tuple[_Guests, Record, pytest.TestReport]:
    guests = _Guests(baseline=baseline, pooled=pooled)
    item, report, rec = _item(), _report(when="teardown"), Record()
    item.stash[SUSPECT_KEY] = why
    _health(guests).after_teardown(item, report, _guest(state=state), rec)  # type: ignore[arg-type]
    assert SUSPECT_KEY not in item.stash
    return guests, rec, report


def test_a_guest_left_as_it_was_is_kept() -> None:
    guests, rec, _ = _after({"sysctls": "3 516"}, {"sysctls": "3 516"})
    assert guests.discarded == [] and rec.replaced == ""


def test_a_guest_left_changed_is_replaced_saying_what_changed() -> None:
    guests, rec, report = _after({"sysctls": "3 1024"}, {"sysctls": "3 516"})
    assert rec.replaced == "the test left the guest changed: sysctls: '3 516' -> '3 1024'"
    assert report.sections == [("guest replaced", rec.replaced + "\n")]
    assert guests.discarded == [f"t.py::t: {rec.replaced}"]


def test_a_splat_replaces_the_guest_without_looking_at_its_state() -> None:
    guests, rec, _ = _after(RuntimeError("not asked"), {}, why="the kernel splatted (BUG)")
    assert rec.replaced == "the kernel splatted (BUG)" and len(guests.discarded) == 1


def test_a_guest_that_no_longer_answers_is_replaced() -> None:
    _, rec, _ = _after(SSHError("not connected"), {"a": "b"})
    assert rec.replaced == "the guest stopped answering (not connected)"


def test_a_guest_replaced_already_is_not_replaced_again() -> None:
    guests, rec, _ = _after({"a": "c"}, {"a": "b"}, pooled=False)
    assert guests.discarded == [] and rec.replaced == ""
