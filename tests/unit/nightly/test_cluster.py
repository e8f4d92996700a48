"""The Dask side: how many LocalCluster workers fit the host, and when a cluster without
workers ends the night."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import LabError
from harness.nightly import cluster

from .conftest import load


def test_local_workers_fit_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load(tmp_path, "nightly: {kernels: [deb], profiles: {a: {}, b: {cpus: 2}}}\n")
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert cluster.local_workers(cfg, 10) == 4      # the 2-vCPU profile decides
    assert cluster.local_workers(cfg, 3) == 3       # never more than the cells
    assert cluster.local_workers(cfg, 10, asked=6) == 6
    assert cluster.local_workers(cfg, 2, asked=6) == 2
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    assert cluster.local_workers(cfg, 10) == 1
    with pytest.raises(LabError, match="--workers: expected 1 or more, got 0"):
        cluster.local_workers(cfg, 10, asked=0)


def test_the_no_worker_watch_counts_from_the_first_empty_look() -> None:
    watch = cluster.WorkerWatch(limit_s=10)
    assert not watch.expired(2, now=100)
    assert not watch.expired(0, now=105)   # empty from 105
    assert not watch.expired(0, now=114)
    assert not watch.expired(1, now=116)   # a worker came back: the count starts again
    assert not watch.expired(0, now=120)
    assert watch.expired(0, now=130)
