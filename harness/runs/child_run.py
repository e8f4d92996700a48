"""A child `./lab run`: its command line, running it, and its report folder read back.

Several commands run the suite in a child `./lab run` (a fresh process per kernel, so each
run has its own guests, logging and report folder): a multi-kernel run, review (base and
patched), each bisect step, each mutant, each nightly cell and the benches. One builder makes
that command line, so a flag the child needs is added once and the children never drift apart;
and one reader (`read`, `ChildRun`) answers what the child's folder says: each test's final
outcome, the failing tests, those that failed for want of a guest, "not run: why" (summary.json
is {"not_run": why} when the kernel could not be prepared: harness/runs/suite.py), and so
whether the guest failed to boot or tests failed (`ChildRun.classify`).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Set as AbstractSet
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness import paths
from harness.results import history
from harness.runs.request import RunRequest



def argv(req: RunRequest, python: str = sys.executable) -> list[str]:
    """The child's argv: `python -m harness.cli --lab-config X run --request JSON`."""
    return [python, "-m", "harness.cli", "--lab-config", str(req.lab_config), "run",
            "--request", req.to_json()]


# Host memory one guest takes beyond its RAM (QEMU itself, TCG's translation cache), MB.
GUEST_OVERHEAD_MB = 512
# Guests per host core a vCPU: a test's guest waits on its harness (SSH, the runner, sleeps
# in the probes) a good part of the time, so two workers a core keep the cores busier
# (docs/results/2026-11-26-speed.md: -j 4 against -j 2 on 2 cores).
GUESTS_PER_CORE = 2


def run_jobs(guest_cpus: int, text: str, guest_memory_mb: int = 1024,
             host_memory_mb: int | None = None) -> int:
    """How many guests `./lab run -j` runs at once: N, or `auto`: GUESTS_PER_CORE a core for
    each guest vCPU, as far as the host's available memory holds them, at least 1."""
    if text == "auto":
        by_cores = GUESTS_PER_CORE * (os.cpu_count() or 1) // max(1, guest_cpus)
        free = available_memory_mb() if host_memory_mb is None else host_memory_mb
        by_memory = free // (guest_memory_mb + GUEST_OVERHEAD_MB) if free else by_cores
        return max(1, min(by_cores, by_memory))
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"-j: expected a number of guests (1 or more) or 'auto', got {text!r}")
    return int(text)


def available_memory_mb() -> int:
    """MemAvailable of /proc/meminfo in MB; 0 if it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


# --- running it, and reading its folder back --------------------------------------------------

# What a child run says of its kernel (ChildRun.classify).
PASSED, FAILED, BOOT_FAILED, NOT_RUN, ERROR = (
    "passed", "failed", "boot failed", "not run", "error")
# Final outcomes (history.outcomes) that make a test count as failing: a flaky one failed too.
FAILED_OR_FLAKY = frozenset(history.FAILING | {"flaky"})


def nodeid_key(nodeid: str) -> str:
    """A pytest node id ('tests/kernel/test_a.py::test_one') as 'file-stem::name', the form
    junit.xml's testcases give (boot_failures)."""
    path, _, name = nodeid.partition("::")
    return f"{Path(path).stem}::{name}"


def boot_failures(run_dir: Path) -> frozenset[str]:
    """Tests whose guest did not come up ("no guest: ..."): junit keeps the whole message,
    summary.json only its last line. Keys are 'file-stem::name'."""
    try:
        root = ET.parse(run_dir / "junit.xml").getroot()
    except (OSError, ET.ParseError):
        return frozenset()
    out = set()
    for case in root.iter("testcase"):
        for bad in list(case.iter("failure")) + list(case.iter("error")):
            if "no guest:" in (bad.get("message") or "") + (bad.text or ""):
                out.add(f"{case.get('classname', '').split('.')[-1]}::{case.get('name')}")
    return frozenset(out)


@dataclass(frozen=True)
class ChildRun:
    """A child `./lab run` as its report folder tells it: the one reading of summary.json and
    junit.xml that bisect, nightly, mutate, review and the benches judge a run by."""
    run_dir: Path
    exit_code: int                # the child's exit status
    summary: dict | None          # summary.json; None when the run wrote none (or unreadable)
    outcomes: dict[str, str]      # each test's final outcome, by node id (history.outcomes)
    failing: frozenset[str]       # tests failed, in error or flaky, as 'file-stem::name'
    no_guest: frozenset[str]      # tests failed for want of a guest, as 'file-stem::name'
    not_run: str | None           # why the kernel could not be prepared (nothing ran)

    @property
    def boot_failed_only(self) -> bool:
        """Every failing test failed for want of a guest: the kernel did not boot, which says
        nothing of the tests."""
        return bool(self.no_guest) and self.failing <= self.no_guest

    @property
    def booted(self) -> bool:
        """A guest came up at least once (summary.json's `boots`)."""
        return bool(self.summary and self.summary.get("boots"))

    def without_guest(self, nodeid: str) -> bool:
        """The test `nodeid` failed because it had no guest."""
        return nodeid_key(nodeid) in self.no_guest

    def classify(self) -> str:
        """PASSED (exit 0); FAILED or BOOT_FAILED (exit 1, tests failed: BOOT_FAILED when only
        for want of a guest); NOT_RUN (summary.json says why the kernel could not be had);
        ERROR (the run could not judge the kernel: the lab or pytest failed)."""
        if self.exit_code == 0:
            return PASSED
        if self.exit_code == 1 and self.summary is not None:
            return BOOT_FAILED if self.boot_failed_only else FAILED
        if self.not_run:
            return NOT_RUN
        return ERROR


def of(summary: dict | None, exit_code: int, no_guest: AbstractSet[str] = frozenset(),
       run_dir: Path = Path()) -> ChildRun:
    """A ChildRun from a summary.json document, the exit status and the tests that had no
    guest."""
    final = history.outcomes(summary) if summary is not None else {}
    failing = frozenset(nodeid_key(t) for t, o in final.items() if o in FAILED_OR_FLAKY)
    return ChildRun(run_dir, exit_code, summary, final, failing, frozenset(no_guest),
                    (summary or {}).get("not_run") or None)


def read(run_dir: Path, exit_code: int) -> ChildRun:
    """A child run's report folder read back (summary.json, junit.xml), with the exit status
    of the child that wrote it."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        summary = None
    return of(summary, exit_code, boot_failures(run_dir), run_dir)


def run(req: RunRequest, *, stdin: Any = None, stdout: Any = None, stderr: Any = None,
        preexec_fn: Callable[[], Any] | None = None) -> ChildRun:
    """Run the child `./lab run` of `req` in this checkout (the streams as subprocess takes
    them; None: this process's) and read its report folder back. Interrupted, the child is
    stopped with SIGTERM, so it stops its guests on the way out, then killed after 20 s."""
    proc = subprocess.Popen(argv(req), cwd=paths.REPO, stdin=stdin, stdout=stdout, stderr=stderr,
                            preexec_fn=preexec_fn)
    try:
        code = proc.wait()
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    return read(req.report_dir, code)
