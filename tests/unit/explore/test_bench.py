"""harness/explore/bench.py (`./lab bench explore`): the explorer's throughput per path. Rates
come from the probe's own counts, a path the kernel lacks is said skipped (not a zero), a
median under the target fails the bench, and the figures are saved as JSON; tested with a fake
Lab and guest so only the bench's own decisions run."""
from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.errors import LabError, ModuleError
from harness.explore import bench


class _Guest:
    def __init__(self, rates: dict[str, list[dict]], aux: bool) -> None:
        self.rates = rates
        self.aux = aux
        self.calls: list[list[str]] = []
        self.inserted: list[str] = []

    def insmod(self, module: str) -> None:
        self.inserted.append(module)

    def probe(self, name: str, args: list[str], timeout: float) -> SimpleNamespace:
        assert name == "probe_explore"
        self.calls.append(args)
        path, seed = args[1], int(args[3])
        got = self.rates.get(path)
        return SimpleNamespace(data={"skip": "no such path"} if got is None else got[seed])


class _Lab:
    def __init__(self, tmp_path: Path, rates: dict[str, list[dict]], aux: bool = True) -> None:
        self.config = SimpleNamespace(reports_dir=tmp_path / "reports")
        self.guest = _Guest(rates, aux)

    def kernel(self, name: str | None) -> SimpleNamespace:
        return SimpleNamespace(name=name or "default", release="6.12.1-test")

    def module(self, name: str, kernel: str) -> str:
        if not self.guest.aux:
            raise ModuleError("no headers")
        return f"{name}.ko"

    @contextlib.contextmanager
    def boot(self, kernel: str, console_log: Path) -> Iterator[_Guest]:
        yield self.guest


def _d(steps: int, sequences: int, seconds: float = 10.0) -> dict[str, Any]:
    return {"steps": steps, "sequences": sequences, "seconds": seconds}


def test_a_samples_rates_come_from_its_own_counts() -> None:
    s = bench.Sample("pinning", 0, steps=600, sequences=30, seconds=12.0)
    assert s.steps_per_s == 50.0 and s.sequences_per_min == 150.0


def test_stats_are_min_median_max_and_count() -> None:
    assert bench.stats([3.0, 1.0, 2.0, 10.0]) == {"min": 1.0, "median": 2.5, "max": 10.0, "n": 4}


def test_each_run_has_its_own_seed_and_no_shrinking(tmp_path: Path) -> None:
    lab = _Lab(tmp_path, {"pinning": [_d(600, 6)] * 2})
    bench.measure(lab, None, ("pinning",), 2, 5.0, tmp_path)  # type: ignore[arg-type]
    assert lab.guest.calls == [["run", "pinning", "--seed", str(run), "--budget", "5.0",
                                "--shrink", "0"] for run in (0, 1)]
    assert lab.guest.inserted == ["ringlab_aux.ko"]


def test_a_kernel_without_the_aux_module_is_still_measured(tmp_path: Path) -> None:
    lab = _Lab(tmp_path, {"pinning": [_d(600, 6)]}, aux=False)
    release, samples = bench.measure(lab, "k", ("pinning",), 1, 5.0, tmp_path)  # type: ignore[arg-type]
    assert release == "6.12.1-test" and [s.path for s in samples] == ["pinning"]


def test_targets_met_pass_and_the_figures_are_saved(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    lab = _Lab(tmp_path, {"pinning": [_d(600, 10), _d(800, 20), _d(1000, 30)],
                          "perf-ring": [_d(700, 1)] * 3})
    assert bench.run(lab, None, runs=3, seconds=10.0,  # type: ignore[arg-type]
                     paths=("pinning", "perf-ring", "trace-mmap")) == 0
    out = capsys.readouterr().out
    assert "trace-mmap   skipped: the kernel lacks it" in out
    assert "MISSED" not in out
    [saved] = (tmp_path / "reports").glob("bench-explore-*.json")
    doc = json.loads(saved.read_text())
    assert doc["kernel"] == "6.12.1-test" and set(doc["results"]) == {"pinning", "perf-ring"}
    assert doc["results"]["pinning"]["steps_per_s"] == {"min": 60.0, "median": 80.0,
                                                        "max": 100.0, "n": 3}
    assert doc["results"]["pinning"]["sequences_per_min"]["median"] == 120.0


def test_a_median_under_the_target_fails_the_bench_naming_the_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lab = _Lab(tmp_path, {"pinning": [_d(490, 1), _d(499, 1), _d(2000, 1)],  # median 49.9
                          "perf-ring": [_d(500, 1)] * 3})                     # exactly 50
    assert bench.run(lab, None, runs=3, seconds=10.0,  # type: ignore[arg-type]
                     paths=("pinning", "perf-ring")) == 1
    lines = capsys.readouterr().out.splitlines()
    assert next(x for x in lines if x.startswith("pinning")).endswith("MISSED")
    assert next(x for x in lines if x.startswith("perf-ring")).endswith(": met")


def test_a_kernel_with_none_of_the_paths_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="none of the explorer's paths"):
        bench.run(_Lab(tmp_path, {}), None, runs=1, paths=("pinning",))  # type: ignore[arg-type]
    assert not list((tmp_path / "reports").glob("*.json"))
