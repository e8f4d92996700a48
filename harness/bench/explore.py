"""`./lab bench explore`: the explorer's throughput per path on one guest, RUNS runs of
SECONDS each with a different seed, shrinking off (steps/s and sequences/min are what the
guest does; a failure's shrink is not throughput). Target: 50 steps/s per path under TCG. The
samples are taken by harness/explore/bench.py (the explorer's own knowledge of its probe);
this module judges and reports them."""
from __future__ import annotations

from typing import Any

from harness.bench import report
from harness.config import KernelSpec, LabConfig
from harness.errors import LabError
from harness.explore import bench as samples_of
from harness.explore.bench import Sample
from harness.probe_modules import explore_paths
from harness.resources import Lab


def figures(samples: list[Sample], paths: tuple[str, ...],
            target: float = samples_of.TARGET_STEPS_PER_S
            ) -> tuple[dict[str, dict[str, Any]], list[str], list[str]]:
    """Per path with samples: steps/s and sequences/min; the table's lines; the paths that
    missed the target."""
    results: dict[str, dict[str, Any]] = {}
    lines, missed = [], []
    for path in paths:
        mine = [s for s in samples if s.path == path]
        if not mine:
            lines.append(f"{path:12s} skipped: the kernel lacks it")
            continue
        sps = report.stats([s.steps_per_s for s in mine])
        spm = report.stats([s.sequences_per_min for s in mine])
        results[path] = {"steps_per_s": sps, "sequences_per_min": spm}
        ok = sps["median"] >= target
        missed += [] if ok else [path]
        lines.append(f"{path:12s} steps/s min {sps['min']:7.1f} median {sps['median']:7.1f} max "
                     f"{sps['max']:7.1f}   sequences/min min {spm['min']:7.0f} median "
                     f"{spm['median']:7.0f} max {spm['max']:7.0f}   target >= "
                     f"{target:g} steps/s: {'met' if ok else 'MISSED'}")
        for name in sorted({n for s in mine for n in s.load_rounds}):
            rps = report.stats([s.load_rounds.get(name, 0) / s.seconds for s in mine])
            results[path].setdefault("load_rounds_per_s", {})[name] = rps
            lines.append(f"{'':12s} beside it, load {name}: rounds/s min {rps['min']:.0f} "
                         f"median {rps['median']:.0f} max {rps['max']:.0f}")
    return results, lines, missed


def run(cfg: LabConfig, kernel: KernelSpec, runs: int = 3, seconds: float = 20.0,
        paths: tuple[str, ...] | None = None, actors: int = 1, load: str = "") -> int:
    """Exit 1 if a path the kernel has missed the target (every explorer path by default).
    With `actors` or a `load`: the same on a 2-vCPU guest, each load's rounds/s beside."""
    paths = paths or explore_paths()
    out = report.folder(cfg, "explore", kernel.name)
    lab = Lab(cfg)
    release, samples = samples_of.measure(lab, kernel.name, paths, runs, seconds, out,
                                          actors, load)
    if not samples:
        raise LabError("the kernel has none of the explorer's paths")
    goal, why = samples_of.target(lab.kernel(kernel.name).config_option)
    results, lines, missed = figures(samples, paths, goal)
    report.save(out, report.Report(
        [f"ringlab bench explore: kernel {release}, {runs} run(s) of {seconds:g} s per path, "
         f"shrinking off; target {goal:g} steps/s: {why}"
         + (f"; {actors} actor(s), load {load or 'none'}, 2 vCPUs"
            if actors > 1 or load else ""), *lines],
        {"kernel": release, "runs": runs, "seconds": seconds, "target": goal,
         "actors": actors, "load": load, "results": results}))
    return 1 if missed else 0
