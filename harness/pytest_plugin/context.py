"""The run's context: what every ringlab plugin of one pytest run needs to know, built once in
pytest_configure and frozen, so no plugin keeps a copy that could drift from another's."""
from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import config as lab_config, paths
from harness.resources import Lab
from harness.results import known_issues
from harness.runs import given, request, run_folder
from harness.runs.request import RunRequest



@dataclass(frozen=True)
class RunContext:
    """One pytest run of the lab (a worker's or the controller's)."""
    request: RunRequest                      # what `./lab run` was asked (the kernel resolved)
    lab_config: lab_config.LabConfig         # lab.yaml with the request's kernel and machine
    known: tuple[known_issues.KnownIssue, ...]
    worker: str | None                       # the xdist worker id; None: serial or controller
    commit: str                              # the lab checkout's commit
    started: float                           # time.time() at configure
    lab: Lab | None = None                   # `./lab run`'s own Lab, given in-process

    @property
    def kernel_name(self) -> str:
        """The kernel's name (a lab.yaml name, or the command-line form it was given as)."""
        return self.request.kernel.name

    @property
    def report_dir(self) -> Path:
        return self.request.report_dir

    def issues_for(self, nodeid: str) -> list[known_issues.KnownIssue]:
        """The known issues whose symptom may show in this test."""
        return known_issues.for_test(list(self.known), nodeid)


RUN_KEY = pytest.StashKey[RunContext]()


def build(config: pytest.Config) -> RunContext:
    """The context from the run's request (`--lab-request`, written by `./lab run`), or, run
    by hand (`pytest -p harness.pytest_plugin --kernel K`), from lab.yaml and the options; a
    user mistake is a LabError."""
    request_file = config.getoption("--lab-request")
    if request_file:
        req = request.read(Path(request_file))
        cfg = request.run_config(req)
    else:
        cfg = lab_config.load(paths.lab_yaml(config.getoption("--lab-config")))
        spec = cfg.kernel(config.getoption("--kernel"))
        rd = config.getoption("--lab-report-dir")
        report_dir = Path(rd) if rd else cfg.reports_dir / (time.strftime("%Y%m%d-%H%M%S-")
                                                              + lab_config.file_safe(spec.name))
        req = request.make(cfg, spec, report_dir, keep_guest=config.getoption("--keep-guest"),
                           gdb_on_failure=config.getoption("--gdb-on-failure"))
        cfg = request.run_config(req, cfg)
    run_folder.make(req.report_dir)  # made by ./lab run already; by hand, here
    listed = config.getoption("--known-issues")
    known = () if listed == known_issues.NONE else tuple(known_issues.load(Path(listed)))
    worker = getattr(config, "workerinput", {}).get("workerid")
    lab = next((p.lab for p in config.pluginmanager.get_plugins()
                if isinstance(p, given.Given)), None)
    return RunContext(req, cfg, known, worker, git_commit(), time.time(), lab)


def git_commit() -> str:
    """The lab checkout's commit, if it is a git checkout."""
    try:
        return subprocess.run(["git", "-C", str(paths.REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=5).stdout.strip() or "?"
    except OSError:
        return "?"
