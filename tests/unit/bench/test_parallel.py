"""The serial vs -j comparison: figures per mode and the tests that changed between runs."""
from __future__ import annotations

import pytest

from harness.bench.parallel import PARALLEL_TARGET, Sample, met, render, summarize, unstable
from harness.runs.child_run import GUEST_OVERHEAD_MB, run_jobs

A, B = "tests/kernel/test_a.py::test_a", "tests/kernel/test_b.py::test_b"


def sample(mode: str, run: int, wall: float, **outcomes: str) -> Sample:
    got = {A: outcomes.get("a", "passed"), B: outcomes.get("b", "passed")}
    return Sample(mode, run, wall, 0 if set(got.values()) == {"passed"} else 1, outcomes=got)


def test_a_test_whose_outcome_changes_between_runs_of_one_mode_is_unstable_there_only() -> None:
    samples = [sample("serial", 1, 100), sample("serial", 2, 101),
               sample("-j 2", 1, 55), sample("-j 2", 2, 56, b="failed")]
    assert unstable(samples) == {"serial": [], "-j 2": [B]}


def test_a_test_missing_from_one_run_is_unstable() -> None:
    lost = Sample("-j 2", 2, 30, 2, outcomes={A: "passed"})  # B never reported
    assert unstable([sample("-j 2", 1, 55), lost]) == {"-j 2": [B]}


def test_ratios_are_medians_against_serial_and_the_targets_are_judged_on_the_default() -> None:
    samples = [sample("serial", i, w) for i, w in enumerate((100, 120, 110))]
    samples += [sample("default", i, w) for i, w in enumerate((70, 65, 90))]
    doc = summarize(samples)
    assert doc["wall_s"]["serial"] == {"min": 100, "median": 110, "max": 120, "n": 3}
    assert doc["ratio_to_serial"]["default"] == 70 / 110
    text = "\n".join(render(doc))
    assert 70 / 110 > PARALLEL_TARGET and text.count("MISSED") == 2  # ratio and 45 s
    assert doc["failed_runs"] == {"serial": 0, "default": 0} and not met(doc)
    fast = summarize([sample("serial", 1, 100), sample("default", 1, 44)])
    text = "\n".join(render(fast))
    assert "MISSED" not in text and text.count("met") == 2 and met(fast)


def test_auto_is_bounded_by_cores_and_by_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert run_jobs(1, "auto", 1024, host_memory_mb=64 * 1024) == 4  # two guests a core
    assert run_jobs(2, "auto", 1024, host_memory_mb=64 * 1024) == 2
    assert run_jobs(1, "auto", 1024, host_memory_mb=2 * (1024 + GUEST_OVERHEAD_MB)) == 2
    assert run_jobs(1, "auto", 1024, host_memory_mb=100) == 1
    assert run_jobs(1, "3") == 3
    with pytest.raises(ValueError, match="got 'x'"):
        run_jobs(1, "x")

