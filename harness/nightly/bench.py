"""`./lab bench nightly`: wall time of the same cells (one kernel, one cell per -k selection)
run as `./lab run`s one after the other, then as a nightly on a LocalCluster of one worker per
cell (in that order: the serial runs warm the cache, snapshot included, so the nightly is not
charged for it). Refresh off, history kept in the bench's folder.

The nightly is this process's own (night.run) on a matrix the bench makes in memory: lab.yaml
is read once and never rewritten; each cell is a RunRequest like any nightly's."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from collections.abc import Sequence

from harness.bench import report
from harness.config import (KernelSpec, LabConfig, NightlyKernel, NightlySelection,
                            NightlySpec)
from harness.errors import LabError
from harness.nightly import night
from harness.runs import child_run, request

# Two small, disjoint selections of tests/kernel/test_capabilities.py.
SELECTIONS = ("test_release_is_the_booted_kernel", "test_page_size_is_read_from_the_guest")


def cells(selections: Sequence[str]) -> dict[str, str]:
    """The bench's cells: k1, k2, ... each a -k selection."""
    if len(selections) < 2:
        raise LabError("bench nightly: give two -k selections (one per cell)")
    return {f"k{i + 1}": expr for i, expr in enumerate(selections)}


def bench_config(cfg: LabConfig, kernel: KernelSpec, selections: dict[str, str]) -> LabConfig:
    """lab.yaml's config with the bench's matrix: the kernel by the selections, refresh off. A
    nightly's matrix names lab.yaml's kernels (a worker reads lab.yaml for the rest)."""
    if cfg.kernels.get(kernel.name) != kernel:
        raise LabError(f"bench nightly: {kernel.name!r} is not a kernel of lab.yaml (a "
                       "nightly's matrix names lab.yaml's kernels)")
    return dataclasses.replace(cfg, nightly=NightlySpec(
        kernels=(NightlyKernel(kernel.name),),
        selections=tuple(NightlySelection(n, e) for n, e in selections.items()),
        refresh=False))


def run(cfg: LabConfig, kernel: KernelSpec, selections: Sequence[str] = SELECTIONS) -> int:
    """Exit 0 if every serial run and the nightly passed, else 1."""
    sels = cells(selections)
    plan_cfg = bench_config(cfg, kernel, sels)
    out = report.folder(cfg, "nightly", kernel.name)
    start = time.monotonic()
    codes = []
    for name, expr in sels.items():
        report.progress(f"bench nightly: ./lab run -k {expr!r} ...")
        codes.append(child_run.run(request.make(cfg, kernel, out / "serial" / name,
                                                selection=expr),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL).exit_code)
    serial_s = time.monotonic() - start
    report.progress(f"bench nightly: a nightly of {len(sels)} cells ...")
    start = time.monotonic()
    code = night.run(night.Plan(plan_cfg, out / "nightly", workers=len(sels),
                                history=out / "history", refresh=False))
    nightly_s = time.monotonic() - start
    cores = os.cpu_count()
    report.save(out, report.Report(
        [f"{len(sels)} cells of {kernel.name} on {cores} cores: `./lab run`s in turn "
         f"{serial_s:.1f} s (exit {codes}); nightly on a LocalCluster of {len(sels)} workers "
         f"{nightly_s:.1f} s (exit {code}); nightly/serial {nightly_s / serial_s:.2f}"],
        {"cells": len(sels), "kernel": kernel.name, "selections": list(sels.values()),
         "serial_s": serial_s, "serial_exit": codes, "nightly_s": nightly_s,
         "nightly_exit": code, "ratio": nightly_s / serial_s, "cores": cores}))
    return 0 if code == 0 and not any(codes) else 1
