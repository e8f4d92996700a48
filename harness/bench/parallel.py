"""`./lab bench parallel`: the whole suite serial (`-j 1`) against the default `./lab run`
(`-j auto`), side by side.

Each sample is a child `./lab run` (the same command line users type), so the figure is what a
user waits for: collection, guests, reports. The modes take turns (serial, default, serial,
...) so drift of a shared host falls on all of them. Flakiness is compared, not assumed: a
test whose outcome differs between runs of one mode is listed for that mode.
"""
from __future__ import annotations

import os
import subprocess
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.bench import report
from harness.config import KernelSpec, LabConfig
from harness.runs import child_run, request

# Issue 31: on a 2-core TCG host with warm snapshots, the default `./lab run` (-j auto) takes at
# most this share of the serial wall time, and at most DEFAULT_TARGET_S (median).
PARALLEL_TARGET = 0.55
DEFAULT_TARGET_S = 45.0
MODES: tuple[str, ...] = ("1", "auto")


@dataclass
class Sample:
    """One `./lab run` of the suite."""
    mode: str
    run: int
    wall_s: float
    exit: int
    counts: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)


def mode_name(jobs: str) -> str:
    return {"1": "serial", "auto": "default"}.get(jobs, f"-j {jobs}")


def unstable(samples: list[Sample]) -> dict[str, list[str]]:
    """Per mode: the tests whose outcome was not the same in every run of that mode."""
    seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    runs: dict[str, int] = defaultdict(int)
    for s in samples:
        runs[s.mode] += 1
        for test, outcome in s.outcomes.items():
            seen[s.mode][test].add(outcome)
    out: dict[str, list[str]] = {}
    for mode, tests in seen.items():
        counts = {t: sum(1 for s in samples if s.mode == mode and t in s.outcomes)
                  for t in tests}
        out[mode] = sorted(t for t, o in tests.items() if len(o) > 1 or counts[t] < runs[mode])
    return out


def summarize(samples: list[Sample]) -> dict[str, Any]:
    """min/median/max wall per mode, the -j ratios against serial, and the unstable tests."""
    by_mode: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        by_mode[s.mode].append(s.wall_s)
    walls = {m: report.stats(v) for m, v in by_mode.items()}
    serial = walls.get("serial", {}).get("median")
    ratios = {m: w["median"] / serial for m, w in walls.items() if serial and m != "serial"}
    return {"wall_s": walls, "ratio_to_serial": ratios, "unstable": unstable(samples),
            "failed_runs": {m: sum(1 for s in samples if s.mode == m and s.exit != 0)
                            for m in by_mode}}


def met(doc: dict[str, Any]) -> bool:
    """The default mode within both targets (ratio to serial and median wall)."""
    ratio = doc["ratio_to_serial"].get("default")
    median = doc["wall_s"].get("default", {}).get("median")
    return ratio is not None and ratio <= PARALLEL_TARGET and median is not None \
        and median <= DEFAULT_TARGET_S


def render(doc: dict[str, Any]) -> list[str]:
    lines = []
    for mode, w in doc["wall_s"].items():
        ratio = doc["ratio_to_serial"].get(mode)
        verdict = ""
        if mode == "default" and ratio is not None:
            verdict = (f"  target <= {PARALLEL_TARGET:g}x serial: "
                       f"{'met' if ratio <= PARALLEL_TARGET else 'MISSED'}, <= "
                       f"{DEFAULT_TARGET_S:g} s: "
                       f"{'met' if w['median'] <= DEFAULT_TARGET_S else 'MISSED'}")
        lines.append(f"{mode:8s} wall min {w['min']:7.1f}  median {w['median']:7.1f}  max "
                     f"{w['max']:7.1f} s (n={w['n']})"
                     + (f"  {ratio:.2f}x serial" if ratio is not None else "") + verdict)
    for mode, tests in doc["unstable"].items():
        lines.append(f"{mode:8s} {doc['failed_runs'][mode]} run(s) not green; outcome changed "
                     f"between runs: {', '.join(tests) if tests else 'none'}")
    return lines


def sample(cfg: LabConfig, kernel: KernelSpec, jobs: str, run: int, out: Path,
           selection: str | None) -> Sample:
    """One child `./lab run` of the suite, timed, its outcomes read back."""
    folder = out / f"{mode_name(jobs).replace(' ', '').replace('-', '')}-{run}"
    req = request.make(cfg, kernel, folder, selection=selection, jobs=jobs,
                       history=str(out / "history"))
    start = time.monotonic()
    child = child_run.run(req, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    found = Sample(mode_name(jobs), run, time.monotonic() - start, child.exit_code)
    if child.summary is not None:
        found.counts = child.summary.get("counts", {})
        found.outcomes = child.outcomes
    return found


def run(cfg: LabConfig, kernel: KernelSpec, runs: int = 5, selection: str | None = None
        ) -> int:
    """Runs the suite `runs` times per mode, modes interleaved; exit 1 if the default missed
    a target. The first, untimed run warms the cache (kernel, rootfs, snapshot) for every
    mode."""
    out = report.folder(cfg, "parallel", kernel.name)
    auto = child_run.run_jobs(cfg.machine.cpus, "auto", cfg.machine.memory_mb)
    report.progress(f"bench parallel: warming the cache for {kernel.name} (untimed) ...")
    sample(cfg, kernel, "auto", 0, out / "warm-up", selection)
    report.progress(f"bench parallel: the default is -j auto = {auto} guests here "
                    f"({os.cpu_count()} cores, {cfg.machine.cpus}-vCPU guests)")
    samples: list[Sample] = []
    for i in range(1, runs + 1):
        for jobs in MODES:
            s = sample(cfg, kernel, jobs, i, out, selection)
            samples.append(s)
            report.progress(f"  run {i}/{runs} {s.mode:8s} {s.wall_s:6.1f} s exit {s.exit} "
                            f"{s.counts}")
    doc = summarize(samples)
    doc.update(kernel=kernel.name, cores=os.cpu_count(), selection=selection, auto_jobs=auto,
               samples=[asdict(s) | {"outcomes": None} for s in samples])
    report.save(out, report.Report([f"ringlab bench parallel: kernel {kernel.name}",
                                    *render(doc)], doc))
    return 0 if met(doc) else 1
