"""`./lab nightly`: lab.yaml's matrix of cells, each a `./lab run` of its own, as Dask tasks.

Why Dask distributed: a nightly over several kernels, configs and guest profiles outgrows one
machine, and Dask already schedules tasks over many (started with `dask worker`,
dask-jobqueue, dask-kubernetes, dask-ssh) and reschedules the task of a worker that dies; the
lab adds no scheduler of its own. By default the lab starts a LocalCluster (one worker process
per guest the host's cores can run, one task each); `--scheduler tcp://HOST:8786` uses an
existing cluster whose workers are lab hosts.

A cell's task (run_cell) runs on a worker: it checks that the worker's checkout is at the
submitter's commit, writes the cell's lab.yaml (the submitter's, with the cell's variant and
profile), fetches the branch a build kernel names, builds a build kernel (a failure is the
cell's `build failed`), runs the child `./lab run` (harness/runs/child_run.py) into a
scratch folder, and returns that folder packed. The submitter unpacks each cell's folder
into the nightly report through a temporary name renamed into place, once per cell: a task
Dask ran again after its worker died is still reported once. Then one report: the matrix
(a column per cell), one merged kcidb.json, history per kernel line.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import hashlib
import io
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from harness import cache, paths
from harness.runs import child_run, request, run_folder
from harness.runs.child_run import ChildRun
from harness.config import (CONFIG_TARGETS, BuildKernel, LabConfig, NightlyExplore,
                            NightlyKernel, NightlyProfile, NightlySelection, NightlyVariant, load,
                            with_build)
from harness.errors import BuildError, ConfigError, LabError
from harness.kernels import trees
from harness.results import history, kcidb, matrix

log = logging.getLogger(__name__)
REPO = paths.REPO
# A cell's status: its child run's (child_run.ChildRun.classify), or a build that failed.
PASSED, FAILED, BOOT_FAILED, ERROR = (child_run.PASSED, child_run.FAILED, child_run.BOOT_FAILED,
                                      child_run.ERROR)
BUILD_FAILED = "build failed"
PR_SET_PDEATHSIG = 1
WATCH_TICK_S = 5  # how often the submitter looks at the cluster while cells run


# --- the matrix ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    """One cell of the matrix: a kernel (and branch), a config variant (build kernels with
    variants only), a guest profile and a test selection."""
    name: str
    kernel: NightlyKernel
    variant: NightlyVariant | None
    profile: NightlyProfile
    selection: NightlySelection


def cells(cfg: LabConfig) -> list[Cell]:
    """The nightly section expanded, in lab.yaml's order. A cell's name is its kernel (with
    @branch) plus each dimension that varies: the variant for a build kernel, the profile
    and the selection when there are several."""
    spec = cfg.nightly
    if spec is None:
        raise ConfigError(f"{cfg.path}: no `nightly:` section: nothing to run",
                          hint="add one (see the shipped lab.yaml and the README's Nightly)")
    out: list[Cell] = []
    for k in spec.kernels:
        built = isinstance(cfg.kernels[k.name].source, BuildKernel)
        variants: tuple[NightlyVariant | None, ...] = spec.variants if built and spec.variants \
            else (None,)
        for v in variants:
            for p in spec.profiles:
                for s in spec.selections:
                    parts = [k.name + (f"@{k.branch.replace('/', '-')}" if k.branch else "")]
                    parts += [v.name] if v else []
                    parts += [p.name] if len(spec.profiles) > 1 else []
                    parts += [s.name] if len(spec.selections) > 1 else []
                    out.append(Cell(".".join(parts), k, v, p, s))
    names = [c.name for c in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{cfg.path}: nightly: two cells are both named {dup[0]}; rename a "
                          "variant, profile or selection")
    return out


# --- a cell's lab.yaml -----------------------------------------------------------------------

def _rebase(value: Any, base: Path) -> Any:
    """A relative path of lab.yaml made absolute against `base` (~ is left to the worker)."""
    if isinstance(value, str) and value and not value.startswith(("/", "~")):
        return str(base / value)
    return value


def cell_yaml(raw: dict, base: Path, cell: Cell, report_dir: Path,
              fragments: tuple[Path, ...] | None = None) -> dict:
    """The cell's lab.yaml content: the submitter's parsed YAML with every relative path made
    absolute against `base` (the submitter's lab.yaml folder as seen on this worker), the
    cell's variant (`fragments`, as found on this worker, replacing the kernel's own) and
    profile (machine values), and no nightly section (the child runs one cell)."""
    data = json.loads(json.dumps(raw))  # a deep copy of plain YAML data
    data.pop("nightly", None)
    for spec in (data.get("kernels") or {}).values():
        if not isinstance(spec, dict):
            continue
        p = spec.get("path") or {}
        for key in ("image", "modules"):
            if key in p:
                p[key] = _rebase(p[key], base)
        b = spec.get("build")
        if isinstance(b, dict):
            if "tree" in b:
                b["tree"] = _rebase(b["tree"], base)
            if "series" in b:
                series = b["series"]
                b["series"] = [_rebase(s, base) for s in
                               ([series] if isinstance(series, str) else series)]
            c = b.get("config") or {}
            if "base" in c and c["base"] not in CONFIG_TARGETS and \
                    not str(c["base"]).startswith("debian:"):
                c["base"] = _rebase(c["base"], base)
            if "fragments" in c:
                c["fragments"] = [_rebase(f, base) for f in c["fragments"]]
    if fragments is not None:
        build = data["kernels"][cell.kernel.name]["build"]
        build["config"] = {**(build.get("config") or {}), "fragments": [str(f) for f in fragments]}
    machine = dict(data.get("machine") or {})
    if cell.profile.cpus is not None:
        machine["cpus"] = cell.profile.cpus
    if cell.profile.memory_mb is not None:
        machine["memory_mb"] = cell.profile.memory_mb
    data["machine"] = machine
    if isinstance(data.get("mirror"), dict) and "keyring" in data["mirror"]:
        data["mirror"]["keyring"] = _rebase(data["mirror"]["keyring"], base)
    if "cache_dir" in data:
        data["cache_dir"] = _rebase(data["cache_dir"], base)
    data["reports"] = {"dir": str(report_dir)}
    return data


# --- a cell, on a worker -----------------------------------------------------------------------

@dataclass(frozen=True)
class CellTask:
    """What a worker needs to run a cell: no path of the submitter's host but those under
    its checkout, given relative to it (`base` "repo:REL"), or absolute otherwise."""
    cell: Cell
    commit: str                 # the submitter's checkout: the worker's must be at it
    raw: dict                   # the submitter's lab.yaml, parsed
    base: str                   # "repo:<folder relative to the checkout>" or an absolute folder
    refresh: bool
    build: bool                 # a `build` kernel: built before the run, a failure reported
    fragments_rel: tuple[str, ...] = ()  # the variant's fragments, like `base`
    submitted: float = field(default_factory=time.time)
    explore: NightlyExplore | None = None  # ./lab explore after the suite, the night's seed
    seed: int = 0
    selftests: bool = False     # the kernel's own selftests beside ours (./lab run --selftests)


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


def relative_to_repo(path: Path, repo: Path = REPO) -> str:
    """`path` as a CellTask names it: under the checkout relative to it, else absolute."""
    try:
        return "repo:" + str(path.resolve().relative_to(repo))
    except ValueError:
        return str(path.resolve())


def from_repo(text: str, repo: Path = REPO) -> Path:
    """The inverse of relative_to_repo on this (the worker's) host."""
    return repo / text.removeprefix("repo:") if text.startswith("repo:") else Path(text)


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


def _die_with_worker() -> None:
    # Between fork and exec of the child ./lab run: SIGTERM (the lab's Ctrl-C path, which
    # stops its guests) if the thread that started it dies, i.e. the Dask worker is killed.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@contextlib.contextmanager
def _tree_lock(tree: Path) -> Iterator[None]:
    """Two workers of one host fetching into one tree would race on FETCH_HEAD."""
    git_dir = Path(trees.git(tree, "rev-parse", "--absolute-git-dir"))
    with open(git_dir / "ringlab-nightly.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def fetch_branch(tree: Path, remote: str, branch: str, cache_root: Path,
                 usage: cache.Usage | None = None) -> tuple[Path, str]:
    """`git fetch REMOTE BRANCH` in the kernel's tree, and a worktree of it in this worker's
    cache detached at what was fetched (the user's checkout never moves; kbuild has no
    branch of its own, so the cell builds the worktree as `./lab run --tree` does). The
    worktree is a cache entry (`./lab gc` removes it when no recent run used it); `usage`
    holds it for the cell so a gc meanwhile leaves it alone."""
    if not trees.is_git(tree):
        raise BuildError(f"{tree} is not a git checkout: cannot fetch branch {branch}")
    with _tree_lock(tree):
        trees.git(tree, "fetch", "--quiet", remote, branch)
        sha = trees.git(tree, "rev-parse", "FETCH_HEAD^{commit}")
    wt = cache.Layout(cache_root).nightly(hashlib.sha256(
        f"{tree} {remote} {branch}".encode()).hexdigest()[:16])
    if usage is not None:
        usage.use(wt)
    else:
        cache.mark_used(cache_root, wt)
    if not (wt / ".git").exists():
        wt.parent.mkdir(parents=True, exist_ok=True)
        trees.git(tree, "worktree", "prune", check=False)
        trees.git(tree, "worktree", "add", "--detach", str(wt), sha)
    else:
        trees.git(wt, "checkout", "--quiet", "--force", "--detach", sha)
    return wt, sha


def _pack(folder: Path) -> bytes:
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


def _scratch(name: str) -> Path:
    """A scratch folder for a cell named by this worker's pid, after removing those of
    workers of this host that are gone (a SIGKILLed worker cleans up nothing itself)."""
    base = Path(tempfile.gettempdir())
    for old in base.glob("ringlab-cell-*"):
        pid = old.name.split("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"ringlab-cell-{os.getpid()}-{name}-", dir=base))


def explore_cell(cfg_path: Path, kernel: str, explore: NightlyExplore, seed: int,
                 run_dir: Path) -> tuple[str, str]:
    """`./lab explore` of the cell's kernel after its suite, into the cell's report folder:
    a new confirmed failure fails the cell (exit 1, its reproducers in the report), the
    explorer's own error is the cell's error (exit 2)."""
    argv = [sys.executable, "-m", "harness.cli", "--lab-config", str(cfg_path), "explore",
            "--kernel", kernel, "--budget", f"{explore.budget_s:g}s", "--seed", str(seed),
            *explore.paths]
    log.info("cell explore: %s", " ".join(argv))
    with (run_dir / "explore.log").open("w") as out:
        code = subprocess.call(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=out,
                               stderr=subprocess.STDOUT, preexec_fn=_die_with_worker)
    if code == 0:
        return PASSED, ""
    if code == 1:
        return FAILED, f"explore (seed {seed}): a new failure, its reproducers in the report"
    return ERROR, f"explore exited {code}: " + (_lab_error(run_dir / "explore.log") or "")


def run_cell(task: CellTask) -> CellResult:
    """A cell on this worker (a Dask task; also callable directly): check the checkout, build,
    run the child `./lab run` into a scratch folder, return it packed."""
    start = time.monotonic()
    cell = task.cell
    result = CellResult(cell.name, ERROR, host=socket.gethostname(), worker=_worker_address())
    scratch = _scratch(cell.name)
    usage: cache.Usage | None = None
    run_dir = scratch / "report"
    run_dir.mkdir()
    try:
        mine = checkout_commit()
        if mine != task.commit:
            result.why = (f"this worker's checkout {REPO} is at {mine[:12]}, the nightly was "
                          f"submitted from {task.commit[:12]}: update the worker's checkout")
            return result
        cfg_path = scratch / "lab.yaml"
        data = cell_yaml(task.raw, from_repo(task.base), cell, run_dir,
                         tuple(from_repo(f) for f in task.fragments_rel)
                         if cell.variant is not None else None)
        cfg_path.write_text(yaml.safe_dump(data))
        (run_dir / "cell-lab.yaml").write_text(yaml.safe_dump(data))
        cfg = load(cfg_path)
        root = cache.cache_root(cfg.cache_dir)
        usage = cache.Usage(root)
        tree: Path | None = None
        if cell.kernel.branch:
            src = cfg.kernel(cell.kernel.name).source
            assert isinstance(src, BuildKernel) and isinstance(src.tree, Path)
            tree, result.commit = fetch_branch(src.tree, cell.kernel.remote, cell.kernel.branch,
                                               root, usage)
            log.info("cell %s: %s %s is %s", cell.name, cell.kernel.remote, cell.kernel.branch,
                     result.commit[:12])
        if task.build:
            from harness.resources import Lab
            t = time.monotonic()
            try:
                Lab(with_build(cfg, cell.kernel.name, tree=tree)).kernel(cell.kernel.name)
            except BuildError as e:
                result.status, result.why = BUILD_FAILED, e.message
                return result
            finally:
                result.build_s = time.monotonic() - t
        req = request.make(cfg, cell.kernel.name, run_dir,
                                   selection=cell.selection.expr, tree=tree,
                                   refresh=task.refresh, selftests=task.selftests)
        log.info("cell %s: %s", cell.name, " ".join(child_run.argv(req)))
        t = time.monotonic()
        with (run_dir / "run.log").open("w") as out:
            child = child_run.run(req, stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=subprocess.STDOUT, preexec_fn=_die_with_worker)
        result.run_s = time.monotonic() - t
        result.exit_code = child.exit_code
        result.status, result.why = judge(child)
        if task.explore is not None and tree is None:
            explored, why = explore_cell(cfg_path, cell.kernel.name, task.explore, task.seed,
                                         run_dir)
            if explored != PASSED:
                result.why = "; ".join(filter(None, (result.why, why)))
                if result.status == PASSED:
                    result.status = explored
        return result
    except LabError as e:
        result.status, result.why = ERROR, e.message
        return result
    finally:
        if usage is not None:
            usage.close()
        result.total_s = time.monotonic() - start
        with contextlib.suppress(OSError):
            (run_dir / "cell.json").write_text(json.dumps(
                {k: v for k, v in asdict(result).items() if k != "archive"}, indent=2))
            result.archive = _pack(run_dir)
        shutil.rmtree(scratch, ignore_errors=True)


# --- the submitter -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """A nightly as asked on the command line."""
    cfg: LabConfig
    out: Path                     # the nightly's report folder
    scheduler: str | None = None  # an existing Dask scheduler; None: a LocalCluster
    workers: int | None = None    # LocalCluster workers (default: host cores / guest vCPUs)
    history: Path | None = None   # default: nightly.history, else <reports.dir>/history
    refresh: bool | None = None   # default: nightly.refresh
    only: tuple[str, ...] = ()    # cell names (default: all)


def local_workers(cfg: LabConfig, n_cells: int, asked: int | None = None) -> int:
    """LocalCluster workers: one per guest the host's cores can run at once (under TCG a vCPU
    wants a core; the largest profile decides), never more than the cells, at least 1."""
    if asked is not None:
        if asked < 1:
            raise LabError(f"--workers: expected 1 or more, got {asked}")
        return min(asked, n_cells)
    assert cfg.nightly is not None
    vcpus = max([p.cpus or cfg.machine.cpus for p in cfg.nightly.profiles] + [1])
    return max(1, min(n_cells, (os.cpu_count() or 1) // vcpus))


@contextlib.contextmanager
def client_for(plan: Plan, n_cells: int) -> Iterator[Any]:
    """A Dask client: of the scheduler asked for, or of a LocalCluster this lab starts and
    closes (its worker processes with it) on every way out."""
    from distributed import Client, LocalCluster

    if plan.scheduler:
        try:
            client = Client(plan.scheduler, timeout="20s")
        except (OSError, TimeoutError) as e:
            raise LabError(f"--scheduler {plan.scheduler}: cannot reach the Dask scheduler: {e}",
                           hint="start one with `dask scheduler` (README: Nightly)") from None
        try:
            try:
                client.wait_for_workers(1, timeout=60)
            except TimeoutError:
                raise LabError(f"--scheduler {plan.scheduler}: no worker joined within 60 s",
                               hint="start lab workers with `dask worker` (README: Nightly)"
                               ) from None
            yield client
        finally:
            client.close()
        return
    # Dask's own INFO lines (workers starting, connections) are not the lab's progress.
    logging.getLogger("distributed").setLevel(logging.WARNING)
    n = local_workers(plan.cfg, n_cells, plan.workers)
    root = cache.cache_root(plan.cfg.cache_dir)
    log.info("nightly: starting a Dask LocalCluster of %d worker process(es), 1 task each",
             n)
    # memory_limit=0: the guests are the workers' children and a worker holds little itself;
    # no dashboard: nothing listens on a port the user did not ask for.
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, memory_limit=0,
                      dashboard_address=None, env={"RINGLAB_CACHE": str(root)}) as cluster, \
            Client(cluster) as client:
        yield client


def _task(plan: Plan, cell: Cell, commit: str, raw: dict, refresh: bool) -> CellTask:
    cfg = plan.cfg
    return CellTask(
        cell=cell, commit=commit, raw=raw, base=relative_to_repo(cfg.path.parent),
        refresh=refresh, build=isinstance(cfg.kernels[cell.kernel.name].source, BuildKernel),
        fragments_rel=tuple(relative_to_repo(f) for f in
                            (cell.variant.fragments if cell.variant else ())),
        explore=cfg.nightly.explore if cfg.nightly else None,
        seed=int(time.strftime("%Y%m%d")),
        selftests=bool(cfg.nightly and cfg.nightly.selftests))


def store(result: CellResult, out: Path) -> Path:
    """The cell's report folder, `out/<cell>`, unpacked from its archive into a temporary
    folder renamed into place: whole or absent, and written once (a second result for the same
    cell, from a task Dask ran again, is dropped)."""
    final = out / result.name
    if final.exists():
        log.warning("nightly: cell %s reported twice; keeping the first report", result.name)
        return final
    tmp = Path(tempfile.mkdtemp(prefix=f".{result.name}.", dir=out))
    try:
        if result.archive:
            with tarfile.open(fileobj=io.BytesIO(result.archive), mode="r:gz") as tar:
                tar.extractall(tmp, filter="data")
        info = {k: v for k, v in asdict(result).items() if k != "archive"}
        (tmp / "cell.json").write_text(json.dumps(info, indent=2))
        tmp.chmod(0o755)  # mkdtemp's 0700 is for the scratch name, not the report
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def report(out: Path, results: list[CellResult], history_dir: Path, commit: str,
           started: float, where: str) -> tuple[str, int]:
    """The nightly's own files (summary.txt/json, kcidb.json, history.txt); (text, exit)."""
    by_name = {r.name: r for r in results}
    table = matrix.build({r.name: out / r.name / "summary.json" for r in results})
    for name, r in by_name.items():
        k = table["kernels"][name]
        k["status"] = r.status
        if r.status not in (PASSED, FAILED):
            k["error"] = f"{r.status}: {r.why}"
    docs: dict[str, dict] = {}
    for r in results:
        doc_path = out / r.name / "kcidb.json"
        if doc_path.exists():
            docs[r.name] = json.loads(doc_path.read_text())
        elif r.status == BUILD_FAILED:
            docs[r.name] = kcidb.failed_build(r.name, r.why, started)
    if docs:
        (out / "kcidb.json").write_text(json.dumps(kcidb.merge(docs), indent=2))
    hist: list[str] = []
    for r in results:
        summary = out / r.name / "summary.json"
        if not summary.exists():
            continue
        kept, comparison = history.record(history_dir, summary, line=r.name)
        (out / r.name / "history.txt").write_text("\n".join(comparison.lines()) + "\n")
        (out / r.name / "history.json").write_text(history.as_json(comparison))
        hist += [f"{r.name}:"] + ["  " + ln for ln in comparison.lines()]
    ok = sum(r.status == PASSED for r in results)
    lines = [f"ringlab nightly at {commit[:12]}: {len(results)} cell(s), {ok} passed, "
             f"{time.time() - started:.0f} s on {where}"]
    lines += ["  " + r.line() for r in results]
    text = "\n".join(lines) + "\n\n" + matrix.render(table) + \
        ("\n" + "\n".join(hist) + "\n" if hist else "")
    (out / "summary.txt").write_text(text)
    (out / "summary.json").write_text(json.dumps(
        {"commit": commit, "where": where, "started": started,
         "cells": [{k: v for k, v in asdict(r).items() if k != "archive"} for r in results],
         "matrix": table}, indent=2))
    if hist:
        (out / "history.txt").write_text("\n".join(hist) + "\n")
    return text, 0 if ok == len(results) else 1


@dataclass
class WorkerWatch:
    """Whether a cluster has had no worker at all for `limit_s`: Dask keeps a task waiting for
    a worker forever, and a nightly whose remote workers are all gone must still end."""
    limit_s: float
    since: float | None = None

    def expired(self, workers: int, now: float) -> bool:
        if workers:
            self.since = None
            return False
        if self.since is None:
            self.since = now
        return now - self.since >= self.limit_s


def _count_workers(client: Any) -> int:
    try:
        return len(client.scheduler_info()["workers"])
    except (OSError, TimeoutError):  # the scheduler itself is gone: no worker either
        return 0


def collect(client: Any, futures: dict[Any, str], out: Path, limit_s: int,
            tick_s: float = WATCH_TICK_S) -> list[CellResult]:
    """Each cell's result stored as it comes (Dask futures -> cell names); a cell whose task
    failed is an error of that cell only, and when the cluster has had no worker for `limit_s`
    the cells still pending are reported as not run."""
    from distributed import wait

    results: list[CellResult] = []
    pending = set(futures)
    watch = WorkerWatch(limit_s)
    while pending:
        try:
            done, pending = wait(pending, timeout=tick_s, return_when="FIRST_COMPLETED")
        except TimeoutError:
            done = set()
        for fut in done:
            name = futures[fut]
            try:
                result = fut.result()
            except Exception as e:  # the task failed (KilledWorker, a bug): this cell only
                result = CellResult(name, ERROR, why=f"the Dask task failed: "
                                    f"{type(e).__name__}: {e}")
            store(result, out)
            results.append(replace(result, archive=b""))
            log.info("nightly: %d of %d done: %s", len(results), len(futures),
                     result.line())
        workers = _count_workers(client) if pending else 1
        if not workers and watch.since is None:
            log.warning("nightly: no Dask worker is connected; %d cell(s) wait up to %d s "
                        "for one", len(pending), watch.limit_s)
        if pending and watch.expired(workers, time.monotonic()):
            log.error("nightly: no Dask worker for %d s: %d cell(s) not run",
                      watch.limit_s, len(pending))
            for fut in pending:
                fut.cancel()
                result = CellResult(futures[fut], ERROR, why=(
                    f"not run: the Dask cluster had no worker for {watch.limit_s} s"))
                store(result, out)
                results.append(result)
            pending = set()
    return results


def run(plan: Plan) -> int:
    """The whole nightly: every cell a Dask task, each result stored as it comes, one report."""
    cfg = plan.cfg
    matrix_cells = cells(cfg)
    if plan.only:
        unknown = sorted(set(plan.only) - {c.name for c in matrix_cells})
        if unknown:
            raise ConfigError(f"--cell {unknown[0]}: not a cell of {cfg.path}'s nightly; its "
                              f"cells are: {', '.join(c.name for c in matrix_cells)}")
        matrix_cells = [c for c in matrix_cells if c.name in plan.only]
    assert cfg.nightly is not None
    commit = checkout_commit()
    raw = yaml.safe_load(cfg.path.read_text())
    refresh = cfg.nightly.refresh if plan.refresh is None else plan.refresh
    history_dir = plan.history or cfg.nightly.history or cfg.reports_dir / "history"
    started = time.time()
    plan.out.mkdir(parents=True, exist_ok=True)
    with client_for(plan, len(matrix_cells)) as client:
        where = plan.scheduler or f"a LocalCluster of {len(client.scheduler_info()['workers'])}" \
            " worker(s)"
        log.info("nightly: %d cell(s) on %s: %s", len(matrix_cells), where,
                 ", ".join(c.name for c in matrix_cells))
        stamp = f"{int(started)}-{os.getpid()}"
        futures = {client.submit(run_cell, _task(plan, c, commit, raw, refresh), pure=False,
                                 key=f"ringlab-nightly-{stamp}-{c.name}"): c for c in matrix_cells}
        results = collect(client, {f: c.name for f, c in futures.items()}, plan.out,
                          cfg.nightly.no_worker_timeout_s)
    order = [c.name for c in matrix_cells]
    results.sort(key=lambda r: order.index(r.name))
    text, code = report(plan.out, results, history_dir, commit, started, where)
    print(text, end="")
    log.info("nightly reports in %s", plan.out)
    return code


def register(sub: argparse._SubParsersAction) -> None:
    ni = sub.add_parser("nightly", help="lab.yaml's nightly matrix, each cell a ./lab run, as "
                        "Dask tasks (a LocalCluster, or --scheduler)", description=main.__doc__)
    ni.add_argument("--scheduler", metavar="tcp://HOST:8786", help="an existing Dask "
                    "scheduler whose workers are lab hosts (default: a LocalCluster of this host)")
    ni.add_argument("--workers", type=int, metavar="N", help="LocalCluster worker processes "
                    "(default: host cores / guest vCPUs, at most one per cell)")
    ni.add_argument("--cell", action="append", default=[], metavar="NAME", help="only this "
                    "cell (again for more)")
    ni.add_argument("--history", metavar="DIR", help="where runs are kept per kernel line "
                    "(default: nightly.history, else <reports.dir>/history)")
    ni.add_argument("--no-refresh", action="store_true", help="do not look for newer Debian "
                    "kernel packages (default: nightly.refresh)")
    ni.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """lab.yaml's nightly matrix (kernels x config variants x guest profiles x test
    selections), each cell a `./lab run` of its own run as a Dask task: on a LocalCluster the
    lab starts (workers: host cores / guest vCPUs), or with --scheduler on an existing Dask
    cluster whose workers are lab hosts at this checkout's commit. One report: the matrix, the
    cells' report folders, one merged kcidb.json, history per kernel line. Exit 0 if every
    cell passed, 1 otherwise."""
    cfg = run_folder.config(args)
    cells(cfg)  # a config without a nightly section fails before any folder is made
    out = run_folder.open_run(cfg, args, "nightly")
    return run(Plan(cfg, out, scheduler=args.scheduler, workers=args.workers,
                    history=Path(args.history).resolve() if args.history else None,
                    refresh=False if args.no_refresh else None, only=tuple(args.cell)))

