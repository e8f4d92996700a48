"""harness/explore/bench.py: the samples of `./lab bench explore`. Each run has its own seed
and no shrinking, a kernel without the AUX module is still measured; tested with a fake Lab
and guest so only the sampling's own decisions run (the judging: tests/unit/bench)."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any


from harness.errors import ModuleError
from harness.bench.explore import figures
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
    def boot(self, kernel: str, console_log: Path, cpus: int | None = None) -> Iterator[_Guest]:
        self.cpus = cpus
        yield self.guest


def _d(steps: int, sequences: int, seconds: float = 10.0) -> dict[str, Any]:
    return {"steps": steps, "sequences": sequences, "seconds": seconds}


def test_a_samples_rates_come_from_its_own_counts() -> None:
    s = bench.Sample("pinning", 0, steps=600, sequences=30, seconds=12.0)
    assert s.steps_per_s == 50.0 and s.sequences_per_min == 150.0


def test_each_run_has_its_own_seed_and_no_shrinking(tmp_path: Path) -> None:
    lab = _Lab(tmp_path, {"pinning": [_d(600, 6)] * 2})
    bench.measure(lab, None, ("pinning",), 2, 5.0, tmp_path)  # type: ignore[arg-type]
    assert lab.guest.calls == [["run", "pinning", "--seed", str(run), "--budget", "5.0",
                                "--shrink", "0", "--actors", "1", "--load", ""]
                               for run in (0, 1)]
    assert lab.guest.inserted == ["ringlab_aux.ko"]
    assert lab.cpus is None     # lab.yaml's vCPUs: nothing runs at once


def test_with_load_the_path_takes_its_own_loads_on_two_vcpus_and_counts_them(
        tmp_path: Path) -> None:
    d = dict(_d(600, 6), load={"samples@1": {"rounds": 5000, "ok": 5000}})
    lab = _Lab(tmp_path, {"pinning": [d, d]})
    _, samples = bench.measure(lab, None, ("pinning",), 2, 5.0, tmp_path,  # type: ignore[arg-type]
                               actors=2, load="marker,samples")
    assert lab.cpus == 2
    assert lab.guest.calls[0][-4:] == ["--actors", "2", "--load", "samples"]
    assert samples[0].load_rounds == {"samples@1": 5000}
    results, lines, _ = figures(samples, ("pinning",))
    assert results["pinning"]["load_rounds_per_s"]["samples@1"]["median"] == 500
    assert any("load samples@1: rounds/s min 500 median 500 max 500" in x for x in lines)


def test_a_kernel_without_the_aux_module_is_still_measured(tmp_path: Path) -> None:
    lab = _Lab(tmp_path, {"pinning": [_d(600, 6)]}, aux=False)
    release, samples = bench.measure(lab, "k", ("pinning",), 1, 5.0, tmp_path)  # type: ignore[arg-type]
    assert release == "6.12.1-test" and [s.path for s in samples] == ["pinning"]
