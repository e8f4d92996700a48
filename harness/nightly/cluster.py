"""The Dask side of a nightly: the client (of a scheduler given, or of a LocalCluster the lab
starts), and the cells' futures collected as they finish.

Why Dask distributed: a nightly over several kernels, configs and guest profiles outgrows one
machine, and Dask already schedules tasks over many (started with `dask worker`,
dask-jobqueue, dask-kubernetes, dask-ssh) and reschedules the task of a worker that dies; the
lab adds no scheduler of its own."""
from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness import cache
from harness.config import LabConfig
from harness.errors import LabError
from harness.nightly.cell import ERROR, CellResult
from harness.nightly.report import store

log = logging.getLogger(__name__)
WATCH_TICK_S = 5  # how often the submitter looks at the cluster while cells run


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
def client_for(cfg: LabConfig, n_cells: int, scheduler: str | None = None,
               workers: int | None = None) -> Iterator[Any]:
    """A Dask client: of `scheduler`, or of a LocalCluster this lab starts (`workers`
    processes, default local_workers) and closes, its worker processes with it, on every way
    out."""
    from distributed import Client, LocalCluster

    if scheduler:
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as e:
            raise LabError(f"--scheduler {scheduler}: cannot reach the Dask scheduler: {e}",
                           hint="start one with `dask scheduler` (docs/nightly.md)") from None
        try:
            try:
                client.wait_for_workers(1, timeout=60)
            except TimeoutError:
                raise LabError(f"--scheduler {scheduler}: no worker joined within 60 s",
                               hint="start lab workers with `dask worker` (docs/nightly.md)"
                               ) from None
            yield client
        finally:
            client.close()
        return
    # Dask's own INFO lines (workers starting, connections) are not the lab's progress.
    logging.getLogger("distributed").setLevel(logging.WARNING)
    n = local_workers(cfg, n_cells, workers)
    root = cache.cache_root(cfg.cache_dir)
    log.info("nightly: starting a Dask LocalCluster of %d worker process(es), 1 task each",
             n)
    # memory_limit=0: the guests are the workers' children and a worker holds little itself;
    # no dashboard: nothing listens on a port the user did not ask for.
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, memory_limit=0,
                      dashboard_address=None, env={"RINGLAB_CACHE": str(root)}) as cluster, \
            Client(cluster) as client:
        yield client


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
    """Each cell's result stored into `out` as it comes (Dask futures -> cell names); a cell
    whose task failed is an error of that cell only, and when the cluster has had no worker
    for `limit_s` the cells still pending are reported as not run."""
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
