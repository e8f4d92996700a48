"""`./lab bench boot --throwaway`: where the time of a throw-away `./lab ssh -- true` goes.

Each step is timed on its own, N times: Python's start and the verb's imports, lab.yaml and
the kernel resolved (the cache's checks), QEMU started and the guest restored to SSH (the
floor: what a restored guest cannot go below), the rest of the restore (probe runner, clock
and random pool), the command over the lab's SSH connection, the teardown; then the whole
`./lab ssh -- true` as a user types it, its exit checked first.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import config as lab_config
from harness.runs import run_folder
from harness.config import LabConfig
from harness.errors import LabError
from harness.guest.guest import boot
from harness.resources import Lab

# Issue 31: a throw-away `./lab ssh -- true` within this (median, 2-core TCG host).
TARGET_S = 1.0
STEPS = ("python start + imports", "lab.yaml + kernel resolved",
         "QEMU start + state loaded (floor)", "first answer (probe runner)",
         "clock, random pool", "the command (probe runner)", "teardown",
         "sum of the steps", "./lab ssh -- true (whole)")


def _timed(f: object) -> float:
    start = time.monotonic()
    f()  # type: ignore[operator]
    return time.monotonic() - start


def _one(cfg: LabConfig, kernel: str | None, console_log: Path) -> dict[str, float]:
    row: dict[str, float] = {}
    row[STEPS[0]] = _timed(lambda: subprocess.run(
        [sys.executable, "-c", "import harness.cli, harness.commands.ssh"], check=True))
    start = time.monotonic()
    lab = Lab(lab_config.load(cfg.path))
    plan = lab.plan(kernel, console_log)
    row[STEPS[1]] = time.monotonic() - start
    g = boot(plan)
    try:
        if not g.record.restored:
            why = g.record.fallback or "no snapshot yet"
            raise LabError(f"the guest was booted, not restored ({why}): run the bench again")
        row[STEPS[2]] = g.record.stages["state loaded"]
        row[STEPS[3]] = g.record.ssh_ready_s - g.record.stages["state loaded"]
        row[STEPS[4]] = g.record.boot_s - g.record.ssh_ready_s
        row[STEPS[5]] = _timed(lambda: g.runner.exec("true", 30))
    finally:
        row[STEPS[6]] = _timed(g.stop)
    row[STEPS[7]] = sum(row[s] for s in STEPS[:7])
    start = time.monotonic()
    whole = subprocess.run([str(run_folder.REPO / "lab"), "--lab-config", str(cfg.path), "ssh",
                            *(["--kernel", kernel] if kernel else []), "--", "true"],
                           capture_output=True, text=True)
    row[STEPS[8]] = time.monotonic() - start
    if whole.returncode != 0:
        raise LabError(f"`./lab ssh -- true` exited {whole.returncode}: "
                       f"{whole.stderr.strip()[-400:]}")
    return row


def throwaway_bench(cfg: LabConfig, kernel: str | None, runs: int = 10) -> int:
    """Each step's min/median/max over `runs` throw-away guests; exit 1 if the whole command's
    median misses TARGET_S."""
    console_log = cfg.reports_dir / "bench-throwaway-console.log"
    console_log.parent.mkdir(parents=True, exist_ok=True)
    Lab(cfg).boot(kernel, console_log).stop()  # the profile's snapshot exists from here on
    rows = []
    for i in range(runs):
        start = time.monotonic()
        rows.append(_one(cfg, kernel, console_log))
        whole = time.monotonic() - start
        print(f"run {i + 1}/{runs}: steps {rows[-1][STEPS[7]]:.2f} s, ./lab ssh -- true "
              f"{rows[-1][STEPS[8]]:.2f} s ({whole:.1f} s with the bench's own work)",
              flush=True)
    print(f"\nringlab bench boot --throwaway: kernel {cfg.kernel(kernel).name}, n={runs}")
    for step in STEPS:
        v = sorted(r[step] for r in rows)
        verdict = ""
        if step == STEPS[8]:
            verdict = (f"  target <= {TARGET_S:g} s: "
                       f"{'met' if statistics.median(v) <= TARGET_S else 'MISSED'}")
        print(f"  {step:36s} min {v[0]:6.3f}  median {statistics.median(v):6.3f}  max "
              f"{v[-1]:6.3f} s{verdict}")
    return 0 if statistics.median(r[STEPS[8]] for r in rows) <= TARGET_S else 1
