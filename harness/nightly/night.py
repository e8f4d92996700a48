"""The whole night, on the submitter: the chosen cells made requests and submitted as Dask
tasks (cell.run_cell on a worker), each result stored as it comes, then one report.

A worker's task is unpacked into the nightly's folder through a temporary name renamed into
place, once per cell: a task Dask ran again after its worker died is still reported once."""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from harness import paths
from harness.config import LabConfig
from harness.nightly import cluster, matrix, report
from harness.nightly.cell import CellTask, checkout_commit, run_cell
from harness.nightly.matrix import Cell

log = logging.getLogger(__name__)


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


def task(plan: Plan, cell: Cell, commit: str, seed: int) -> CellTask:
    """The cell's task: its RunRequest (into `out/<cell>` as the submitter sees it; the worker
    runs it into a scratch folder) and what a worker does beside the run (explore is given the
    same request)."""
    cfg = plan.cfg
    assert cfg.nightly is not None
    refresh = cfg.nightly.refresh if plan.refresh is None else plan.refresh
    req = matrix.run_request(cfg, cell, plan.out / cell.name, refresh=refresh,
                             selftests=cfg.nightly.selftests)
    return CellTask(cell.name, req, str(paths.REPO), commit, cell.kernel,
                    explore=cell.kernel.explore or cfg.nightly.explore, seed=seed)


def run(plan: Plan) -> int:
    """Every chosen cell a Dask task, each result stored as it comes, one report; exit 0 if
    every cell passed, else 1."""
    cfg = plan.cfg
    cells = matrix.chosen(cfg, plan.only)
    assert cfg.nightly is not None
    commit = checkout_commit()
    history_dir = plan.history or cfg.nightly.history or cfg.reports_dir / "history"
    started = time.time()
    seed = int(time.strftime("%Y%m%d"))  # the night's: each night explores new sequences
    plan.out.mkdir(parents=True, exist_ok=True)
    with cluster.client_for(cfg, len(cells), plan.scheduler, plan.workers) as client:
        where = plan.scheduler or f"a LocalCluster of {len(client.scheduler_info()['workers'])}" \
            " worker(s)"
        log.info("nightly: %d cell(s) on %s: %s", len(cells), where,
                 ", ".join(c.name for c in cells))
        stamp = f"{int(started)}-{os.getpid()}"
        futures = {client.submit(run_cell, task(plan, c, commit, seed), pure=False,
                                 key=f"ringlab-nightly-{stamp}-{c.name}"): c.name for c in cells}
        results = cluster.collect(client, futures, plan.out, cfg.nightly.no_worker_timeout_s)
    order = [c.name for c in cells]
    results.sort(key=lambda r: order.index(r.name))
    text, code = report.write(plan.out, results, history_dir, commit, started, where)
    print(text, end="")
    log.info("nightly reports in %s", plan.out)
    return code
