"""The wall time of one file of tests/kernel as a user runs it (pytest with the lab's plugin):
what a bench of a ring-buffer path adds beside its probe's rates, so a faster path that made
its tests slower shows."""
from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness import paths
from harness.config import KernelSpec, LabConfig
from harness.runs import request


@dataclass(frozen=True)
class Wall:
    """One timed pytest run of a test file."""
    seconds: float
    last_line: str  # pytest's summary line, e.g. "12 passed in 30.1s"
    exit_code: int


def argv(request_file: Path, test_file: str, python: str = sys.executable) -> list[str]:
    """pytest on tests/kernel/`test_file` with the lab's plugin, given the run's request (the
    kernel already resolved: the plugin does not look it up again)."""
    return [python, "-m", "pytest", "-q", "-p", "harness.pytest_plugin", "-p", "no:cacheprovider",
            "--lab-request", str(request_file), str(paths.REPO / "tests" / "kernel" / test_file)]


def last_line(stdout: str) -> str:
    """pytest's summary: the last line it printed."""
    text = stdout.strip()
    return text.splitlines()[-1] if text else "(no output)"


def measure(cfg: LabConfig, kernel: KernelSpec, report_dir: Path, test_file: str) -> Wall:
    """Run the file once and time it (the checkout as cwd, as a user would)."""
    req = request.make(cfg, kernel, report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    request_file = request.write(req)
    start = time.monotonic()
    proc = subprocess.run(argv(request_file, test_file), cwd=paths.REPO,
                          capture_output=True, text=True)
    return Wall(time.monotonic() - start, last_line(proc.stdout), proc.returncode)
