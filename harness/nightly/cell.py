"""One cell on a worker (a Dask task; also callable directly): check the checkout, fetch a
branch, build a build kernel (a failure is the cell's `build failed`), run the child
`./lab run` of the cell's RunRequest into a scratch folder, explore, and return the folder
packed. Nothing is written into lab.yaml: the request carries the cell's kernel, machine and
selection, and its paths are moved from the submitter's checkout to this worker's."""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from harness import cache, lifetime, paths
from harness.config import (CONFIG_TARGETS, BuildKernel, NightlyExplore, NightlyKernel,
                            PathKernel, load, varied)
from harness.errors import BuildError, LabError
from harness.nightly.branch import fetch_branch
from harness.runs import child_run, request
from harness.runs.child_run import ChildRun
from harness.runs.request import RunRequest

log = logging.getLogger(__name__)
REPO = paths.REPO
# A cell's status: its child run's (child_run.ChildRun.classify), or a build that failed.
PASSED, FAILED, BOOT_FAILED, ERROR = (child_run.PASSED, child_run.FAILED, child_run.BOOT_FAILED,
                                      child_run.ERROR)
BUILD_FAILED = "build failed"


@dataclass(frozen=True)
class CellTask:
    """What a worker needs to run a cell: the cell's request as the submitter made it (a
    frozen record of paths and strings: Dask pickles it) and what is not a run's."""
    name: str
    request: RunRequest
    repo: str                   # the submitter's checkout: paths under it move to the worker's
    commit: str                 # the submitter's commit: the worker's checkout must be at it
    kernel: NightlyKernel       # its branch (and remote), fetched by the worker
    explore: NightlyExplore | None = None  # ./lab explore after the suite, the night's seed
    seed: int = 0
    submitted: float = field(default_factory=time.time)


@dataclass
class CellResult:
    """A cell's outcome as the submitter reports it; `archive` is its report folder."""
    name: str
    status: str                 # passed, failed, boot failed, build failed, error
    why: str = ""
    exit_code: int | None = None
    host: str = ""
    worker: str = ""
    commit: str = ""            # the kernel tree's commit when a branch was fetched
    build_s: float = 0.0
    run_s: float = 0.0
    total_s: float = 0.0
    archive: bytes = b""

    def line(self) -> str:
        where = f" on {self.host} ({self.worker})" if self.host else ""
        why = f": {self.why}" if self.why else ""
        return f"{self.name:30s} {self.status.upper():12s} {self.total_s:6.0f} s{where}{why}"

    def record(self) -> dict:
        """cell.json: the result without its archive."""
        return {k: v for k, v in asdict(self).items() if k != "archive"}


def relocate(req: RunRequest, old: Path, new: Path) -> RunRequest:
    """`req` with every path under the submitter's checkout `old` moved under this worker's
    `new` (the same commit: the same files); other paths are taken as they are."""
    if old == new:
        return req

    def moved(p: Path) -> Path:
        return new / p.relative_to(old) if p.is_relative_to(old) else p

    src = req.kernel.source
    if isinstance(src, BuildKernel):
        base = src.base if src.base in CONFIG_TARGETS or src.base.startswith("debian:") \
            else str(moved(Path(src.base)))
        src = replace(src, tree=moved(src.tree) if isinstance(src.tree, Path) else src.tree,
                      series=tuple(map(moved, src.series)), base=base,
                      fragments=tuple(map(moved, src.fragments)))
    elif isinstance(src, PathKernel):
        src = replace(src, image=moved(src.image),
                      modules=moved(src.modules) if src.modules else None,
                      build_dir=moved(src.build_dir) if src.build_dir else None)
    return replace(req, lab_config=moved(req.lab_config), report_dir=moved(req.report_dir),
                   kernel=replace(req.kernel, source=src),
                   selftests_from=moved(req.selftests_from) if req.selftests_from else None)


def checkout_commit(repo: Path = REPO) -> str:
    """The commit this checkout is at; a LabError if it is no git checkout."""
    p = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        raise LabError(f"{repo} is not a git checkout ({p.stderr.strip()}): a nightly needs "
                       "the commit its workers check")
    return p.stdout.strip()


def _worker_address() -> str:
    try:
        from distributed import get_worker
        return str(get_worker().address)
    except (ImportError, ValueError):
        return f"pid {os.getpid()}"


def pack(folder: Path) -> bytes:
    """The folder as a tar.gz, for the trip back to the submitter."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname=".")
    return buf.getvalue()


def _lab_error(run_log: Path) -> str:
    """The child's `lab: error:` line, or its last lines."""
    try:
        lines = run_log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    errors = [ln.removeprefix("lab: error: ") for ln in lines if ln.startswith("lab: error:")]
    return errors[-1] if errors else " | ".join(ln for ln in lines[-3:] if ln.strip())


def judge(child: ChildRun) -> tuple[str, str]:
    """(status, why) of a cell's child run (child_run.ChildRun.classify): a kernel that could
    not be had ("not run: why") or a run that could not judge it is the cell's error."""
    status = child.classify()
    n_guest = len(child.no_guest)
    if status == child_run.PASSED:
        return PASSED, ""
    if status == child_run.BOOT_FAILED:
        return BOOT_FAILED, f"the kernel did not boot ({n_guest} test(s) without a guest)"
    if status == child_run.FAILED:
        return FAILED, f"{len(child.failing)} test(s) failed" + \
            (f", {n_guest} without a guest" if n_guest else "")
    if status == child_run.NOT_RUN:  # the kernel could not be had
        return ERROR, f"not run: {child.not_run}"
    return ERROR, _lab_error(child.run_dir / "run.log") or f"./lab run exited {child.exit_code}"


def scratch(name: str) -> Path:
    """A scratch folder for a cell named by this worker's pid, after removing those of
    workers of this host that are gone (a SIGKILLed worker cleans up nothing itself)."""
    base = Path(tempfile.gettempdir())
    for old in base.glob("ringlab-cell-*"):
        pid = old.name.split("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"ringlab-cell-{os.getpid()}-{name}-", dir=base))


def explore_cell(req: RunRequest, explore: NightlyExplore, seed: int,
                 run_dir: Path) -> tuple[str, str]:
    """`./lab explore` of the cell's request after its suite (its kernel as the cell ran it,
    variant or branch included; its report in the cell's explore/, its output in
    explore.log): a new confirmed failure fails the cell (exit 1), the explorer's own error
    is the cell's error (exit 2)."""
    asked = req.with_folder(run_dir / "explore")
    argv = [sys.executable, "-m", "harness.cli", "--lab-config", str(req.lab_config), "explore",
            "--request", asked.to_json(), "--budget", f"{explore.budget_s:g}s",
            "--seed", str(seed), "--actors", str(explore.actors),
            *(["--load", explore.load] if explore.load else []), *explore.paths]
    log.info("cell explore: %s", " ".join(argv))
    with (run_dir / "explore.log").open("w") as out:
        code = subprocess.call(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=out,
                               stderr=subprocess.STDOUT, preexec_fn=lifetime.stop_with_parent)
    if code == 0:
        return PASSED, ""
    if code == 1:
        return FAILED, f"explore (seed {seed}): a new failure, its reproducers in its report"
    return ERROR, f"explore exited {code}: " + (_lab_error(run_dir / "explore.log") or "")


def _run(task: CellTask, result: CellResult, run_dir: Path) -> None:
    """The cell's steps, each setting `result`; a LabError is left to run_cell."""
    mine = checkout_commit()
    if mine != task.commit:
        result.why = (f"this worker's checkout {REPO} is at {mine[:12]}, the nightly was "
                      f"submitted from {task.commit[:12]}: update the worker's checkout")
        return
    req = relocate(task.request, Path(task.repo), REPO).with_folder(run_dir)
    if not req.lab_config.is_file():
        raise LabError(f"the nightly's lab.yaml {req.lab_config} is not on this worker: give "
                       "the workers the same file (a lab.yaml in the checkout is moved to theirs)")
    cfg = load(req.lab_config)
    with contextlib.closing(cache.Usage(cache.cache_root(cfg.cache_dir))) as usage:
        if task.kernel.branch:
            src = req.kernel.source
            assert isinstance(src, BuildKernel) and isinstance(src.tree, Path)
            tree, result.commit = fetch_branch(src.tree, task.kernel.remote, task.kernel.branch,
                                               usage.root, usage)
            log.info("cell %s: %s %s is %s", task.name, task.kernel.remote, task.kernel.branch,
                     result.commit[:12])
            req = replace(req, kernel=varied(req.kernel, tree=tree, where=req.lab_config))
        request.write(req)  # what the cell ran, also when its build fails
        if isinstance(req.kernel.source, BuildKernel):
            from harness.resources import Lab
            t = time.monotonic()
            try:
                Lab(request.run_config(req, cfg)).kernel(req.kernel.name)
            except BuildError as e:
                result.status, result.why = BUILD_FAILED, e.message
                return
            finally:
                result.build_s = time.monotonic() - t
        log.info("cell %s: %s", task.name, " ".join(child_run.argv(req)))
        t = time.monotonic()
        with (run_dir / "run.log").open("w") as out:
            child = child_run.run(req, stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=subprocess.STDOUT, preexec_fn=lifetime.stop_with_parent)
        result.run_s = time.monotonic() - t
    result.exit_code = child.exit_code
    result.status, result.why = judge(child)
    if task.explore is None:
        return
    explored, why = explore_cell(req, task.explore, task.seed, run_dir)
    if explored != PASSED:
        result.why = "; ".join(filter(None, (result.why, why)))
        if result.status == PASSED:
            result.status = explored


def run_cell(task: CellTask) -> CellResult:
    """The cell on this worker, its report folder (cell.json included) packed in the result
    whatever happened."""
    start = time.monotonic()
    result = CellResult(task.name, ERROR, host=socket.gethostname(), worker=_worker_address())
    folder = scratch(task.name)
    run_dir = folder / "report"
    run_dir.mkdir()
    try:
        _run(task, result, run_dir)
    except LabError as e:
        result.status, result.why = ERROR, e.message
    finally:
        result.total_s = time.monotonic() - start
        try:
            (run_dir / "cell.json").write_text(json.dumps(result.record(), indent=2))
            result.archive = pack(run_dir)
        except OSError:
            pass
        shutil.rmtree(folder, ignore_errors=True)
    return result
