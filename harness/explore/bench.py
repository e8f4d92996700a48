"""`./lab bench explore`: the explorer's throughput per path on one guest, RUNS runs of
SECONDS each with a different seed, shrinking off (steps/s and sequences/min are what the
guest does; a failure's shrink is not throughput). Target: 50 steps/s per path under TCG."""
from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from harness.errors import LabError, ModuleError
from harness.explore.session import PATHS
from harness.resources import Lab

TARGET_STEPS_PER_S = 50.0


@dataclass(frozen=True)
class Sample:
    path: str
    seed: int
    steps: int
    sequences: int
    seconds: float

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds

    @property
    def sequences_per_min(self) -> float:
        return 60 * self.sequences / self.seconds


def stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values),
            "n": len(values)}


def measure(lab: Lab, kernel_name: str | None, paths: tuple[str, ...], runs: int,
            seconds: float, out_dir: Path) -> tuple[str, list[Sample]]:
    k = lab.kernel(kernel_name)
    samples: list[Sample] = []
    with lab.boot(k.name, out_dir / "bench-explore-console.log") as g:
        try:
            g.insmod(lab.module("ringlab_aux", k.name))
        except ModuleError:
            pass
        for run in range(runs):          # the paths take turns within a run
            for path in paths:
                d = g.probe("probe_explore", ["run", path, "--seed", str(run), "--budget",
                                              str(seconds), "--shrink", "0"],
                            timeout=seconds + 120).data
                if "skip" in d:
                    continue
                samples.append(Sample(path, run, d["steps"], d["sequences"], d["seconds"]))
    return k.release, samples


def run(lab: Lab, kernel_name: str | None, runs: int = 3, seconds: float = 20.0,
        paths: tuple[str, ...] = PATHS) -> int:
    out_dir = lab.config.reports_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    release, samples = measure(lab, kernel_name, paths, runs, seconds, out_dir)
    if not samples:
        raise LabError("the kernel has none of the explorer's paths")
    results = {}
    print(f"\nringlab bench explore: kernel {release}, {runs} run(s) of {seconds:g} s per "
          f"path, shrinking off")
    missed = []
    for path in paths:
        mine = [s for s in samples if s.path == path]
        if not mine:
            print(f"{path:12s} skipped: the kernel lacks it")
            continue
        sps = stats([s.steps_per_s for s in mine])
        spm = stats([s.sequences_per_min for s in mine])
        results[path] = {"steps_per_s": sps, "sequences_per_min": spm}
        ok = sps["median"] >= TARGET_STEPS_PER_S
        missed += [] if ok else [path]
        print(f"{path:12s} steps/s min {sps['min']:7.1f} median {sps['median']:7.1f} max "
              f"{sps['max']:7.1f}   sequences/min min {spm['min']:7.0f} median "
              f"{spm['median']:7.0f} max {spm['max']:7.0f}   target >= "
              f"{TARGET_STEPS_PER_S:g} steps/s: {'met' if ok else 'MISSED'}")
    report = out_dir / time.strftime("bench-explore-%Y%m%d-%H%M%S.json")
    report.write_text(json.dumps({"kernel": release, "runs": runs, "seconds": seconds,
                                  "results": results}, indent=2) + "\n")
    print(f"\nfigures saved to {report}")
    return 1 if missed else 0
