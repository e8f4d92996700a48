"""harness/pytest_plugin/ledger.py: every result in results.jsonl as it comes and the run's
files at the end. A call is recorded with its outcome and reason (an expected failure as
xfailed with its known issue, a skip with its reason); a teardown failure amends the result
(a test already failed keeps its first reason); events from workers are applied; a worker
records nothing; a late failure makes a passing run fail; the Sender sends each boot and the
kernel once. Driven with real TestReports; the guests plugin and observation are fakes."""
from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.pytest_plugin import ledger, record
from harness.pytest_plugin.record import Outbox, Record


def _ctx(tmp_path: Path, worker: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(report_dir=tmp_path, worker=worker, kernel_name="k",
                           started=time.time(), lab_config=SimpleNamespace(cache_dir=tmp_path))


def _ledger(tmp_path: Path, worker: str | None = None) -> ledger.Ledger:
    obs = SimpleNamespace(with_decoded=lambda g, s: s)
    return ledger.Ledger(_ctx(tmp_path, worker), Outbox(), obs)  # type: ignore[arg-type]


def _report(when: str, outcome: str, longrepr: Any = None, rec: Record | None = None,
            nodeid: str = "t.py::t", **attrs: Any) -> pytest.TestReport:
    r = pytest.TestReport(nodeid, ("t.py", 1, "t"), {}, outcome, longrepr, when, duration=0.5)
    for k, v in attrs.items():
        setattr(r, k, v)
    record.save(r, rec or Record())
    return r


def _lines(tmp_path: Path, name: str = "results.jsonl") -> list[dict]:
    return [json.loads(x) for x in (tmp_path / name).read_text().splitlines()]


def test_each_call_is_recorded_with_its_outcome_and_reason(tmp_path: Path) -> None:
    led = _ledger(tmp_path)
    led.pytest_runtest_logreport(_report("setup", "passed", nodeid="t.py::a"))
    led.pytest_runtest_logreport(_report("call", "passed", nodeid="t.py::a"))
    led.pytest_runtest_logreport(_report("call", "failed", "AssertionError: x", nodeid="t.py::b"))
    led.pytest_runtest_logreport(_report("setup", "skipped", ("f", 1, "Skipped: no PMU"),
                                         nodeid="t.py::c"))
    led.pytest_runtest_logreport(_report("call", "skipped", None, nodeid="t.py::d",
                                         wasxfail="k-1: a known bug"))
    got = {e["test"]: (e["outcome"], e["reason"]) for e in _lines(tmp_path)}
    assert got == {"t.py::a": ("passed", ""), "t.py::b": ("failed", "AssertionError: x"),
                   "t.py::c": ("skipped", "Skipped: no PMU"),
                   "t.py::d": ("xfailed", "k-1: a known bug")}
    assert _lines(tmp_path)[0]["duration_s"] == 0.5


def test_a_teardown_failure_fails_a_passed_test_and_is_a_second_reason_of_a_failed_one(
        tmp_path: Path) -> None:
    led = _ledger(tmp_path)
    led.pytest_runtest_logreport(_report("call", "passed", nodeid="t.py::a"))
    led.pytest_runtest_logreport(_report("teardown", "failed", "fixture broke", nodeid="t.py::a"))
    led.pytest_runtest_logreport(_report("call", "failed", "first", nodeid="t.py::b"))
    led.pytest_runtest_logreport(_report("teardown", "failed", "fixture broke", nodeid="t.py::b"))
    last = {e["test"]: e for e in _lines(tmp_path)}  # the last line of a test is its result
    assert (last["t.py::a"]["outcome"], last["t.py::a"]["reason"]) == ("failed", "fixture broke")
    assert last["t.py::b"]["reason"] == "first"
    assert last["t.py::b"]["teardown_error"] == "fixture broke"
    assert led.late_failures == 2


def test_a_replacement_after_a_test_is_added_to_its_result(tmp_path: Path) -> None:
    led = _ledger(tmp_path)
    led.pytest_runtest_logreport(_report("call", "failed", "x"))
    led.pytest_runtest_logreport(_report("teardown", "passed", rec=Record(replaced="changed")))
    assert _lines(tmp_path)[-1]["replaced"] == "changed" and led.late_failures == 0


def test_events_on_a_report_are_applied(tmp_path: Path) -> None:
    led = _ledger(tmp_path)
    events = [{"kind": "boot", "record": {"boot_s": 1}},
              {"kind": "kernel", "info": {"release": "6.12"}},
              {"kind": "fact", "name": "pmu", "value": "none"},
              {"kind": "between", "after_test": "t.py::a", "splats": [{"title": "W"}]}]
    led.pytest_runtest_logreport(_report("setup", "passed", rec=Record(events=events)))
    assert led.boots == [{"boot_s": 1}] and led.kernel_info == {"release": "6.12"}
    assert led.facts == {"pmu": "none"}
    assert led.between_tests == [{"after_test": "t.py::a", "splats": [{"title": "W"}]}]


def test_an_amend_event_fails_the_test_it_names_with_its_splats(tmp_path: Path) -> None:
    led = _ledger(tmp_path)
    led.pytest_runtest_logreport(_report("call", "passed", nodeid="t.py::a"))
    amend = {"kind": "amend", "test": "t.py::a", "reason": "splat after the test",
             "splats": [{"title": "BUG"}]}
    led.pytest_runtest_logreport(_report("setup", "passed", nodeid="t.py::b",
                                         rec=Record(events=[amend])))
    last = _lines(tmp_path)[-1]
    assert (last["test"], last["outcome"], last["reason"]) == ("t.py::a", "failed",
                                                               "splat after the test")
    assert last["splats"] == [{"title": "BUG"}]


def test_a_worker_records_nothing(tmp_path: Path) -> None:
    led = _ledger(tmp_path, worker="gw0")
    led.pytest_runtest_logreport(_report("call", "failed", "x"))
    led.pytest_sessionfinish(SimpleNamespace(exitstatus=0), 0)  # type: ignore[arg-type]
    assert led.results == [] and not (tmp_path / ".results-gw0.jsonl").exists()
    assert not (tmp_path / "summary.json").exists()


def test_a_late_failure_fails_a_run_pytest_passed_and_the_files_are_written(
        tmp_path: Path) -> None:
    led = _ledger(tmp_path)
    led.pytest_runtest_logreport(_report("call", "passed"))
    led.pytest_runtest_logreport(_report("teardown", "failed", "a splat after the test"))
    session = SimpleNamespace(exitstatus=pytest.ExitCode.OK)
    led.pytest_sessionfinish(session, pytest.ExitCode.OK)  # type: ignore[arg-type]
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
    assert {"summary.json", "summary.txt", "kcidb.json"} <= {p.name for p in tmp_path.iterdir()}
    assert json.loads((tmp_path / "summary.json").read_text())["results"][0]["outcome"] == \
        "failed"


def test_a_clean_run_stays_passed(tmp_path: Path) -> None:
    led = _ledger(tmp_path)
    led.pytest_runtest_logreport(_report("call", "passed"))
    session = SimpleNamespace(exitstatus=pytest.ExitCode.OK)
    led.pytest_sessionfinish(session, pytest.ExitCode.OK)  # type: ignore[arg-type]
    assert session.exitstatus == pytest.ExitCode.OK


def test_the_sender_sends_each_boot_and_the_kernel_once(tmp_path: Path) -> None:
    kernel = SimpleNamespace(release="6.12", description="d", commit=None, series=("s",),
                             arch="x86_64")
    pool = SimpleNamespace(boots=[{"n": 1}], lab=SimpleNamespace(prepared=lambda name: kernel))
    sender = ledger.Sender(_ctx(tmp_path), SimpleNamespace(pool=pool), Outbox())  # type: ignore[arg-type]
    first, second = Record(), Record()
    sender.send(first)
    pool.boots.append({"n": 2})
    sender.send(second)
    assert [e["kind"] for e in first.events] == ["boot", "kernel"]
    assert first.events[1]["info"]["series"] == ["s"]
    assert second.events == [{"kind": "boot", "record": {"n": 2}}]


def test_without_a_pool_the_sender_sends_only_the_outbox(tmp_path: Path) -> None:
    out = Outbox()
    out.emit("fact", name="a", value="b")
    rec = Record()
    ledger.Sender(_ctx(tmp_path), SimpleNamespace(pool=None), out).send(rec)  # type: ignore[arg-type]
    assert rec.events == [{"kind": "fact", "name": "a", "value": "b"}]
