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
from collections.abc import Callable
from pathlib import Path

from harness import config as lab_config, paths
from harness.bench import report
from harness.config import KernelSpec, LabConfig
from harness.errors import LabError
from harness.guest.guest import boot
from harness.resources import Lab

# Issue 31: a throw-away `./lab ssh -- true` within this (median, 2-core TCG host).
TARGET_S = 1.0
STEPS = ("python start + imports", "lab.yaml + kernel resolved",
         "QEMU start + state loaded (floor)", "first answer (probe runner)",
         "clock, random pool", "the command (probe runner)", "teardown",
         "sum of the steps", "./lab ssh -- true (whole)")
WHOLE = STEPS[8]


def timed(f: Callable[[], object]) -> float:
    start = time.monotonic()
    f()
    return time.monotonic() - start


def ssh_argv(cfg: LabConfig, kernel: KernelSpec) -> list[str]:
    """`./lab ssh -- true` as a user types it: the kernel as named on a command line."""
    return [str(paths.REPO / "lab"), "--lab-config", str(cfg.path), "ssh", "--kernel",
            kernel.name, "--", "true"]


def one(cfg: LabConfig, kernel: KernelSpec, console_log: Path) -> dict[str, float]:
    """Each step of one throw-away guest, in seconds."""
    row: dict[str, float] = {}
    row[STEPS[0]] = timed(lambda: subprocess.run(
        [sys.executable, "-c", "import harness.cli, harness.commands.ssh"], check=True))
    start = time.monotonic()
    # What `./lab ssh` does first, timed: lab.yaml read and the kernel looked up in it (a
    # command-line kernel resolved from its name, as the verb does).
    lab = Lab(lab_config.load(cfg.path))
    plan = lab.plan(kernel.name, console_log)
    row[STEPS[1]] = time.monotonic() - start
    g = boot(plan)
    try:
        if not g.record.restored:
            why = g.record.fallback or "no snapshot yet"
            raise LabError(f"the guest was booted, not restored ({why}): run the bench again")
        row[STEPS[2]] = g.record.stages["state loaded"]
        row[STEPS[3]] = g.record.ssh_ready_s - g.record.stages["state loaded"]
        row[STEPS[4]] = g.record.boot_s - g.record.ssh_ready_s
        row[STEPS[5]] = timed(lambda: g.runner.exec("true", 30))
    finally:
        row[STEPS[6]] = timed(g.stop)
    row[STEPS[7]] = sum(row[s] for s in STEPS[:7])
    start = time.monotonic()
    whole = subprocess.run(ssh_argv(cfg, kernel), capture_output=True, text=True)
    row[WHOLE] = time.monotonic() - start
    if whole.returncode != 0:
        raise LabError(f"`./lab ssh -- true` exited {whole.returncode}: "
                       f"{whole.stderr.strip()[-400:]}")
    return row


def table(rows: list[dict[str, float]]) -> list[str]:
    """Each step's min/median/max over the guests, the whole command judged on TARGET_S."""
    lines = []
    for step in STEPS:
        v = sorted(r[step] for r in rows)
        verdict = ""
        if step == WHOLE:
            verdict = (f"  target <= {TARGET_S:g} s: "
                       f"{'met' if statistics.median(v) <= TARGET_S else 'MISSED'}")
        lines.append(f"  {step:36s} min {v[0]:6.3f}  median {statistics.median(v):6.3f}  max "
                     f"{v[-1]:6.3f} s{verdict}")
    return lines


def run(cfg: LabConfig, kernel: KernelSpec, runs: int = 10) -> int:
    """Each step's min/median/max over `runs` throw-away guests; exit 1 if the whole command's
    median misses TARGET_S."""
    out = report.folder(cfg, "throwaway", kernel.name)
    console_log = out / "console.log"
    Lab(cfg).boot(kernel.name, console_log).stop()  # the profile's snapshot exists from here on
    rows = []
    for i in range(runs):
        start = time.monotonic()
        rows.append(one(cfg, kernel, console_log))
        took = time.monotonic() - start
        report.progress(f"run {i + 1}/{runs}: steps {rows[-1][STEPS[7]]:.2f} s, ./lab ssh -- "
                        f"true {rows[-1][WHOLE]:.2f} s ({took:.1f} s with the bench's own work)")
    r = report.Report([f"ringlab bench boot --throwaway: kernel {kernel.name}, n={runs}",
                       *table(rows)],
                      {"kernel": kernel.name, "runs": rows, "target_s": TARGET_S,
                       "steps": {s: report.stats([row[s] for row in rows]) for s in STEPS}})
    report.save(out, r)
    return 0 if statistics.median(r[WHOLE] for r in rows) <= TARGET_S else 1
