"""`./lab bench nightly`: wall time of the same cells (one kernel, one cell per -k selection)
run as `./lab run`s one after the other, then as a `./lab nightly` on a LocalCluster of one
worker per cell (in that order: the serial runs warm the cache, snapshot included, so the
nightly is not charged for it). Refresh off, history kept in the bench's folder.

The nightly is a child `./lab nightly` (harness.bench sits beside harness.nightly, not above
it), given a lab.yaml of its own: the user's, its relative paths made absolute (it lives in
the bench's folder), its nightly matrix replaced by the bench's two cells."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from harness import paths
from harness.bench import report
from harness.config import CONFIG_TARGETS, KernelSpec, LabConfig
from harness.errors import LabError
from harness.runs import child_run, request

# Two small, disjoint selections of tests/kernel/test_capabilities.py.
SELECTIONS = ("test_release_is_the_booted_kernel", "test_page_size_is_read_from_the_guest")


def cells(selections: Sequence[str]) -> dict[str, str]:
    """The bench's cells: k1, k2, ... each a -k selection."""
    if len(selections) < 2:
        raise LabError("bench nightly: give two -k selections (one per cell)")
    return {f"k{i + 1}": expr for i, expr in enumerate(selections)}


def _absolute(value: Any, base: Path) -> Any:
    """A relative path of lab.yaml made absolute against `base` (~ is left as it is)."""
    if isinstance(value, str) and value and not value.startswith(("/", "~")):
        return str(base / value)
    return value


def absolute_paths(raw: dict[str, Any], base: Path) -> dict[str, Any]:
    """lab.yaml's parsed data with every relative path made absolute against `base` (its
    folder), so the same settings can be read from another folder."""
    data = json.loads(json.dumps(raw))  # a deep copy of plain YAML data
    for spec in (data.get("kernels") or {}).values():
        if not isinstance(spec, dict):
            continue
        p = spec.get("path") or {}
        for key in ("image", "modules"):
            if key in p:
                p[key] = _absolute(p[key], base)
        b = spec.get("build")
        if isinstance(b, dict):
            if "tree" in b:
                b["tree"] = _absolute(b["tree"], base)
            if "series" in b:
                series = b["series"]
                b["series"] = [_absolute(s, base)
                               for s in ([series] if isinstance(series, str) else series)]
            c = b.get("config") or {}
            if "base" in c and c["base"] not in CONFIG_TARGETS and \
                    not str(c["base"]).startswith("debian:"):
                c["base"] = _absolute(c["base"], base)
            if "fragments" in c:
                c["fragments"] = [_absolute(f, base) for f in c["fragments"]]
    if isinstance(data.get("mirror"), dict) and "keyring" in data["mirror"]:
        data["mirror"]["keyring"] = _absolute(data["mirror"]["keyring"], base)
    if "cache_dir" in data:
        data["cache_dir"] = _absolute(data["cache_dir"], base)
    return data


def bench_yaml(raw: dict[str, Any], base: Path, kernel: str, selections: dict[str, str],
               out: Path) -> dict[str, Any]:
    """The child nightly's lab.yaml: the user's (paths absolute), its matrix one kernel by the
    bench's selections, refresh off, reports into `out`."""
    if kernel not in (raw.get("kernels") or {}):
        raise LabError(f"bench nightly: {kernel!r} is not a kernel of lab.yaml (a nightly's "
                       "matrix names lab.yaml's kernels)")
    data = absolute_paths(raw, base)
    data["nightly"] = {"kernels": [kernel], "selections": selections, "refresh": False}
    data["reports"] = {"dir": str(out)}
    return data


def nightly_argv(lab_yaml: Path, workers: int, history: Path,
                 python: str = sys.executable) -> list[str]:
    return [python, "-m", "harness.cli", "--lab-config", str(lab_yaml), "nightly",
            "--workers", str(workers), "--history", str(history), "--no-refresh"]


def run(cfg: LabConfig, kernel: KernelSpec, selections: Sequence[str] = SELECTIONS) -> int:
    """Exit 0 if every serial run and the nightly passed, else 1."""
    sels = cells(selections)
    out = report.folder(cfg, "nightly", kernel.name)
    lab_yaml = out / "lab.yaml"  # JSON is YAML: written as JSON, no YAML writer needed
    lab_yaml.write_text(json.dumps(bench_yaml(yaml.safe_load(cfg.path.read_text()),
                                              cfg.path.parent, kernel.name, sels,
                                              out / "nightly"), indent=2) + "\n")
    start = time.monotonic()
    codes = []
    for name, expr in sels.items():
        report.progress(f"bench nightly: ./lab run -k {expr!r} ...")
        codes.append(child_run.run(request.make(cfg, kernel, out / "serial" / name,
                                                selection=expr),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL).exit_code)
    serial_s = time.monotonic() - start
    report.progress(f"bench nightly: ./lab nightly of {len(sels)} cells ...")
    start = time.monotonic()
    code = subprocess.run(nightly_argv(lab_yaml, len(sels), out / "history"), cwd=paths.REPO,
                          stdin=subprocess.DEVNULL).returncode
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
