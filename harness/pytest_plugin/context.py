"""The run's context: what every ringlab plugin of one pytest run needs to know, built once in
pytest_configure and frozen, so no plugin keeps a copy that could drift from another's."""
from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import config as lab_config, paths
from harness.errors import ConfigError
from harness.results import known_issues

REPO = paths.REPO


@dataclass(frozen=True)
class RunContext:
    """One pytest run of the lab (a worker's or the controller's)."""
    lab_config: lab_config.LabConfig
    kernel: str                              # the lab.yaml name (or spec) of the kernel
    known: tuple[known_issues.KnownIssue, ...]
    report_dir: Path
    worker: str | None                       # the xdist worker id; None: serial or controller
    commit: str                              # the lab checkout's commit
    started: float                           # time.time() at configure

    def issues_for(self, nodeid: str) -> list[known_issues.KnownIssue]:
        """The known issues whose symptom may show in this test."""
        return known_issues.for_test(list(self.known), nodeid)


RUN_KEY = pytest.StashKey[RunContext]()


def build(config: pytest.Config) -> RunContext:
    """The context from the command line and lab.yaml; a user mistake is a LabError."""
    cfg_path = config.getoption("--lab-config") or os.environ.get("RINGLAB_CONFIG") or \
        str(REPO / "lab.yaml")
    cfg = lab_config.load(Path(cfg_path))
    kernel = cfg.kernel(config.getoption("--kernel")).name
    series = tuple(Path(s).resolve() for s in config.getoption("--lab-series"))
    tree = config.getoption("--lab-tree")
    if series or tree:  # ./lab review and ./lab bisect vary the user's build kernel
        cfg = lab_config.with_build(cfg, kernel, series, Path(tree).resolve() if tree else None)
    known = tuple(known_issues.load(Path(config.getoption("--known-issues"))))
    rd = config.getoption("--lab-report-dir")
    report_dir = Path(rd) if rd else cfg.reports_dir / (time.strftime("%Y%m%d-%H%M%S-")
                                                          + lab_config.file_safe(kernel))
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot write reports to {report_dir}: {e.strerror}") from None
    worker = getattr(config, "workerinput", {}).get("workerid")
    return RunContext(cfg, kernel, known, report_dir, worker, git_commit(), time.time())


def git_commit() -> str:
    """The lab checkout's commit, if it is a git checkout."""
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=5).stdout.strip() or "?"
    except OSError:
        return "?"
