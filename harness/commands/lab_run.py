"""The command line of a `./lab run` child process.

Several commands run the suite in a child `./lab run` (a fresh process per kernel, so each
run has its own guests, logging and report folder): a multi-kernel run, review (base and
patched), each bisect step and each mutant. One builder makes that command line, so a flag the
child needs is added once and the children never drift apart.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunRequest:
    """What a child `./lab run` is asked to do."""
    lab_config: Path
    kernel: str
    report_dir: Path
    selection: str | None = None        # pytest -k
    jobs: str | None = None             # ./lab run -j (test workers)
    tree: Path | None = None            # a build kernel's tree in another checkout (bisect)
    series: tuple[Path, ...] = ()       # extra patch series on a build kernel (review)
    refresh: bool = False
    history: str | None = None
    pytest_args: tuple[str, ...] = ()


def argv(req: RunRequest, python: str = sys.executable) -> list[str]:
    """The child's argv: `python -m harness.cli ... run ...`, pytest arguments after `--`."""
    out = [python, "-m", "harness.cli", "--lab-config", str(req.lab_config), "run",
           "--kernel", req.kernel, "--report-dir", str(req.report_dir)]
    if req.tree is not None:
        out += ["--tree", str(req.tree)]
    for s in req.series:
        out += ["--series", str(s)]
    if req.selection:
        out += ["-k", req.selection]
    if req.jobs is not None:
        out += ["-j", req.jobs]
    if req.refresh:
        out.append("--refresh")
    if req.history:
        out += ["--history", req.history]
    if req.pytest_args:
        out += ["--", *req.pytest_args]
    return out


def run_jobs(guest_cpus: int, text: str) -> int:
    """How many guests `./lab run -j` runs at once: N, or `auto`: the host's cores over each
    guest's vCPUs (under TCG a vCPU wants a core), at least 1."""
    if text == "auto":
        return max(1, (os.cpu_count() or 1) // max(1, guest_cpus))
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"-j: expected a number of guests (1 or more) or 'auto', got {text!r}")
    return int(text)
