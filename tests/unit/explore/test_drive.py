"""harness/explore/drive.py: one explore from request to exit code, with a stand-in for the
guest-driving Explore: the proof comes first, the report is written also after Ctrl-C, and
the exit code is read from the failures."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.errors import LabError
from harness.explore import drive
from harness.explore.session import ExploreRequest, Failure, PathResult

REQ = ExploreRequest(kernel="k", paths=("pinning",), budget_s=1.0, seed=0)


def failure(check: str = "allowance", known: str | None = None,
            confirmed: bool | None = True) -> Failure:
    return Failure(path="pinning", check=check, expected="ok", got="EPERM", at="end", seed=0,
                   sequence=0, setup={"mlock_pages": 9, "rlimit_pages": 8, "who": "user"},
                   env={"page_size": 4096, "ncpus": 1, "mlock_kb": 36, "has_pmu": False,
                        "has_tp": True},
                   steps=[{"id": 0, "op": "open", "args": ["dummy"]}], shrunk=True,
                   traits=[], known_issue=known, confirmed=confirmed)


def result(*failures: Failure) -> PathResult:
    res = PathResult("pinning", sequences=3, steps=9, seconds=1.0)
    for f in failures:
        res.failures[f.slot] = f
    return res


class FakeExplore:
    """Explore without a guest: run_all yields the results it was given (or raises)."""
    made: list[FakeExplore] = []

    def __init__(self, lab: object, req: ExploreRequest, out: Path, say: object) -> None:
        self.kernel = SimpleNamespace(name=req.kernel, release="6.1.0-test")
        self.results: list[PathResult] = []
        self.events: list[str] = []
        self.stopped = False
        FakeExplore.made.append(self)

    def run_all(self) -> None:
        self.events.append("run_all")
        self.results.extend(self.planned)
        if self.interrupt:
            raise KeyboardInterrupt

    def stop_guest(self) -> None:
        self.stopped = True


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    def plan(results: list[PathResult], interrupt: bool = False) -> None:
        FakeExplore.planned = results          # type: ignore[attr-defined]
        FakeExplore.interrupt = interrupt      # type: ignore[attr-defined]
    FakeExplore.made = []
    monkeypatch.setattr(drive, "Explore", FakeExplore)
    return plan


def test_the_proof_comes_first_on_the_resolved_kernel(fake, tmp_path: Path) -> None:
    fake([result()])
    proved: list[str] = []

    def prove(kernel: str) -> None:
        assert FakeExplore.made[0].events == [], "the proof runs before the explore"
        proved.append(kernel)

    said: list[str] = []
    assert drive.run(object(), REQ, tmp_path, prove, said.append) == 0  # type: ignore[arg-type]
    assert proved == ["k"]
    assert FakeExplore.made[0].stopped
    doc = json.loads((tmp_path / "explore.json").read_text())
    assert doc["kernel"] == "k" and doc["release"] == "6.1.0-test" and not doc["interrupted"]
    assert (tmp_path / "junit.xml").exists()
    assert said[-1] == f"report: {tmp_path / 'explore.json'}"


def test_a_confirmed_new_failure_exits_1(fake, tmp_path: Path) -> None:
    fake([result(failure())])
    said: list[str] = []
    assert drive.run(object(), REQ, tmp_path, lambda k: None, said.append) == 1  # type: ignore[arg-type]
    assert any("allowance" in s for s in said[:-1])


def test_ctrl_c_writes_the_report_then_stops(fake, tmp_path: Path) -> None:
    fake([result(failure())], interrupt=True)
    with pytest.raises(KeyboardInterrupt):
        drive.run(object(), REQ, tmp_path, lambda k: None, lambda s: None)  # type: ignore[arg-type]
    assert FakeExplore.made[0].stopped
    assert json.loads((tmp_path / "explore.json").read_text())["interrupted"] is True


@pytest.mark.parametrize("failures, code", [
    ([], 0),
    ([failure(confirmed=False)], 0),
    ([failure(known="some-issue")], 0),
    ([failure(known="some-issue"), failure()], 1),
])
def test_only_a_confirmed_new_failure_is_exit_1(failures: list[Failure], code: int) -> None:
    assert drive.exit_code([result(*failures)]) == code


def test_the_explorers_own_failure_is_an_error_not_a_finding() -> None:
    with pytest.raises(LabError, match=r"the explorer itself failed \(EPERM\)"):
        drive.exit_code([result(failure(check="explorer"), failure())])
