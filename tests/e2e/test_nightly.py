"""`./lab nightly` on a real Dask cluster: `dask scheduler` and two `dask worker` processes on
this host, each worker with its own cache; a 2-cell matrix (one Debian kernel, two small -k
selections), then the same with one worker SIGKILLed in the middle of its cell."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from harness import cache, config
from harness.results import kcidb

REPO = Path(__file__).resolve().parents[2]
DASK = Path(sys.executable).with_name("dask")
SELECTIONS = {"rel": "test_release_is_the_booted_kernel",
              "page": "test_page_size_is_read_from_the_guest"}
# Read-only artefacts a worker's cache may share with this host's cache (hard links: the lab
# writes an entry through a new file renamed into place, and boots on throw-away overlays), so
# the workers neither download the kernel nor build the rootfs again. Snapshots are not shared:
# each worker saves its own on its first boot.
SHARED = ("debs", "kernels", "rootfs", "ssh", "hosts")

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _qemus_of(caches: Path) -> list[int]:
    """QEMU processes of this test only (their drives are in its worker caches): another lab
    may boot guests on this host meanwhile."""
    return [p.pid for p in psutil.process_iter(["name", "cmdline"])
            if "qemu-system" in (p.info["name"] or "")
            and str(caches) in " ".join(p.info["cmdline"] or [])]


def _seed_cache(src: Path, dest: Path) -> None:
    """Hard links to the finished entries of SHARED (not the hidden scratch folders of an
    entry being made); nothing if the two are on different filesystems."""
    for kind in SHARED:
        (dest / kind).mkdir(parents=True)
        for entry in (src / kind).glob("[!.]*") if (src / kind).is_dir() else ():
            subprocess.run(["cp", "-al", str(entry), str(dest / kind / entry.name)],
                           capture_output=True)


@pytest.fixture
def worker_caches() -> Iterator[Path]:
    """A folder for the workers' caches beside this host's cache (the same filesystem, so
    hard links work), removed afterwards."""
    src = cache.cache_root(config.load(REPO / "lab.yaml").cache_dir)
    src.parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="ringlab-e2e-nightly-", dir=src.parent))
    try:
        for i in (1, 2):
            _seed_cache(src, root / f"w{i}")
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Cluster:
    address: str
    scheduler: subprocess.Popen
    workers: list[subprocess.Popen]
    caches: Path


@pytest.fixture
def cluster(tmp_path: Path, worker_caches: Path) -> Iterator[Cluster]:
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = tmp_path / "dask-logs"
    logs.mkdir()
    procs: list[subprocess.Popen] = []
    try:
        procs.append(subprocess.Popen(
            [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", str(port),
             "--no-dashboard"], stdout=subprocess.DEVNULL,
            stderr=(logs / "scheduler.log").open("w")))
        for i in (1, 2):
            worker_cache = worker_caches / f"w{i}"
            # --no-nanny: the worker is this process, so SIGKILL is a worker dying for real
            # (a nanny would restart it).
            procs.append(subprocess.Popen(
                [str(DASK), "worker", address, "--nthreads", "1", "--no-nanny", "--name",
                 f"w{i}", "--no-dashboard", "--local-directory", str(tmp_path / f"dask-w{i}")],
                env=dict(os.environ, RINGLAB_CACHE=str(worker_cache)), cwd=REPO,
                stdout=subprocess.DEVNULL, stderr=(logs / f"w{i}.log").open("w")))
        yield Cluster(address, procs[0], procs[1:], worker_caches)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _nightly(tmp_path: Path, make_lab_yaml, cluster: Cluster) -> subprocess.Popen:
    lab_yaml = make_lab_yaml(nightly={"kernels": ["trixie-cloud"], "selections": SELECTIONS,
                                      "refresh": False, "history": str(tmp_path / "history")})
    return subprocess.Popen([sys.executable, "-m", "harness.cli", "--lab-config", str(lab_yaml),
                             "nightly", "--scheduler", cluster.address], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _check_report(tmp_path: Path, output: str) -> dict:
    out = (tmp_path / "reports" / "latest").resolve()
    summary = json.loads((out / "summary.json").read_text())
    names = [c["name"] for c in summary["cells"]]
    assert sorted(names) == ["trixie-cloud.page", "trixie-cloud.rel"], output[-3000:]
    assert all(c["status"] == "passed" for c in summary["cells"]), summary["cells"]
    # every cell once: its folder and nothing half-written beside it
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(names)
    for name, test in (("trixie-cloud.rel", "test_release_is_the_booted_kernel"),
                       ("trixie-cloud.page", "test_page_size_is_read_from_the_guest")):
        cell = json.loads((out / name / "summary.json").read_text())
        assert [r["test"].split("::")[-1] for r in cell["results"]] == [test]
        assert (out / name / "history.txt").exists()
        assert len(list((tmp_path / "history" / name).glob("*.json"))) == 1
    merged = json.loads((out / "kcidb.json").read_text())
    kcidb.SCHEMA.validate(merged)
    assert sorted(b["misc"]["nightly_cell"] for b in merged["builds"]) == sorted(names)
    assert len(merged["tests"]) == 2
    text = (out / "summary.txt").read_text()
    assert "2 cell(s), 2 passed" in text and "trixie-cloud.rel" in text
    return summary


def test_a_nightly_on_a_scheduler_and_two_workers(tmp_path: Path, make_lab_yaml,
                                                  cluster: Cluster) -> None:
    p = _nightly(tmp_path, make_lab_yaml, cluster)
    output, _ = p.communicate(timeout=1200)
    assert p.returncode == 0, output[-3000:]
    summary = _check_report(tmp_path, output)
    assert len({c["worker"] for c in summary["cells"]}) == 2, summary["cells"]
    assert not _qemus_of(cluster.caches)


def test_a_worker_killed_mid_cell_costs_a_rerun_not_a_cell(tmp_path: Path, make_lab_yaml,
                                                           cluster: Cluster) -> None:
    p = _nightly(tmp_path, make_lab_yaml, cluster)
    victim, orphan = None, None
    deadline = time.monotonic() + 600
    while victim is None and time.monotonic() < deadline and p.poll() is None:
        for w in cluster.workers:
            runs = [c for c in psutil.Process(w.pid).children(recursive=True)
                    if "harness.cli" in c.cmdline() and "run" in c.cmdline()]
            if runs:  # this worker's cell is running its ./lab run: kill the worker
                time.sleep(3)
                victim, orphan = w, runs[0]
                break
        time.sleep(0.5)
    assert victim is not None, "no cell's ./lab run was seen on a worker"
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    # The killed worker's ./lab run goes with it (PR_SET_PDEATHSIG), its guest too.
    psutil.wait_procs([orphan], timeout=60)
    assert not orphan.is_running() or orphan.status() == psutil.STATUS_ZOMBIE
    output, _ = p.communicate(timeout=1200)
    assert p.returncode == 0, output[-3000:]
    summary = _check_report(tmp_path, output)
    survivor = next(w for w in cluster.workers if w is not victim)
    assert survivor.poll() is None
    # both cells were reported by the surviving worker (one of them after the rescheduling)
    assert len({c["worker"] for c in summary["cells"]}) == 1, summary["cells"]
    assert output.count("cell(s), 2 passed") == 1
    assert not _qemus_of(cluster.caches)


def _sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def test_a_cluster_whose_workers_are_all_gone_ends_the_nightly(tmp_path: Path) -> None:
    """Dask waits for a worker forever; the nightly gives the cells still pending up as not
    run once the cluster has had no worker for nightly.no_worker_timeout_s (here 3 s)."""
    from distributed import Client, LocalCluster

    from harness.nightly import cell, cluster

    with LocalCluster(n_workers=1, processes=False, threads_per_worker=1,
                      dashboard_address=None) as local, Client(local) as client:
        fut = client.submit(_sleep, 120, pure=False)
        client.wait_for_workers(1, timeout=30)
        start = time.monotonic()
        local.scale(0)
        results = cluster.collect(client, {fut: "k"}, tmp_path, limit_s=3, tick_s=0.5)
        waited = time.monotonic() - start
    assert [(r.name, r.status) for r in results] == [("k", cell.ERROR)]
    assert results[0].why == "not run: the Dask cluster had no worker for 3 s"
    assert json.loads((tmp_path / "k" / "cell.json").read_text())["status"] == cell.ERROR
    assert waited < 60, f"the nightly waited {waited:.0f} s for a worker"
