"""A cell on a worker: its request moved to the worker's checkout, a branch as the spec's
tree, the child `./lab run` of that request (no lab.yaml written), the run judged, the
explore step, the scratch folders of dead workers swept."""
from __future__ import annotations

import io
import json
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from harness import config, paths
from harness.nightly import cell, matrix
from harness.runs import child_run
from harness.runs.request import RunRequest

from .conftest import load, write


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def head() -> str:
    return git(paths.REPO, "rev-parse", "HEAD")


def files_of(archive: bytes) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {Path(n).name for n in tar.getnames()}


def task_of(cfg: config.LabConfig, name: str, **kw: Any) -> cell.CellTask:
    c = next(c for c in matrix.cells(cfg) if c.name == name)
    req = matrix.run_request(cfg, c, cfg.path.parent / "out" / name, refresh=False,
                             selftests=False)
    return cell.CellTask(name, req, str(paths.REPO), kw.pop("commit", head()), c.kernel, **kw)


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[RunRequest]:
    """child_run.run made a run that passes, and the build a no-op: the requests they got."""
    got: list[RunRequest] = []

    def run(req: RunRequest, **kw: Any) -> child_run.ChildRun:
        got.append(req)
        (req.report_dir / "summary.json").write_text(json.dumps({"results": []}))
        return child_run.read(req.report_dir, 0)

    class Lab:
        def __init__(self, cfg: config.LabConfig) -> None:
            self.cfg = cfg

        def kernel(self, name: str) -> None:
            got.append(RunRequest(self.cfg.path, self.cfg.kernels[name], Path("built")))

    monkeypatch.setattr(cell.child_run, "run", run)
    monkeypatch.setattr("harness.resources.Lab", Lab)
    return got


def test_a_cell_runs_its_request_and_writes_no_lab_yaml(tmp_path: Path,
                                                         ran: list[RunRequest]) -> None:
    cfg = load(tmp_path, "nightly: {kernels: [src], variants: {v: [b.config]}, "
                         "profiles: {big: {cpus: 2}}, selections: {perf: test_perf_ring}}\n")
    task = task_of(cfg, "src.v")
    result = cell.run_cell(task)
    assert (result.status, result.why) == (cell.PASSED, "")
    built, run = ran
    assert built.kernel == run.kernel == task.request.kernel
    assert run.kernel.name == "src+v"
    assert run.kernel.source.fragments == (tmp_path / "b.config",)  # type: ignore[union-attr]
    assert run.machine is not None and run.machine.cpus == 2
    assert run.selection == "test_perf_ring" and run.lab_config == cfg.path
    assert run.report_dir.name == "report" and run.report_dir != task.request.report_dir
    names = files_of(result.archive)
    assert not any(n.endswith((".yaml", ".yml")) for n in names), names
    assert {"cell.json", "request.json", "summary.json", "run.log"} <= names
    assert result.build_s > 0 and not run.report_dir.exists()  # the scratch folder is gone


def test_a_branch_is_the_tree_of_the_cells_spec(tmp_path: Path, ran: list[RunRequest]) -> None:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    (upstream / "f").write_text("1")
    git(upstream, "add", "f")
    git(upstream, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    subprocess.run(["git", "clone", "-q", str(upstream), str(tmp_path / "tree")], check=True)
    path = write(tmp_path, "nightly: {kernels: [{kernel: src, branch: main}]}\n"
                           f"cache_dir: {tmp_path / 'cache'}\n")
    cfg = config.load(path)
    result = cell.run_cell(task_of(cfg, "src@main"))
    assert result.status == cell.PASSED and result.commit == git(upstream, "rev-parse", "HEAD")
    run = ran[-1]
    tree = run.kernel.source.tree  # type: ignore[union-attr]
    assert isinstance(tree, Path) and tree.is_relative_to(tmp_path / "cache") and \
        (tree / "f").read_text() == "1"
    assert run.kernel.name == "src"
    assert run.kernel.source.fragments == (tmp_path / "a.config",)  # type: ignore[union-attr]


def test_a_build_that_fails_is_the_cells_build_failed(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.errors import BuildError

    class Lab:
        def __init__(self, cfg: config.LabConfig) -> None:
            pass

        def kernel(self, name: str) -> None:
            raise BuildError("make failed: x.c:1")
    monkeypatch.setattr("harness.resources.Lab", Lab)
    cfg = load(tmp_path, "nightly: {kernels: [src]}\n")
    result = cell.run_cell(task_of(cfg, "src"))
    assert (result.status, result.why) == (cell.BUILD_FAILED, "make failed: x.c:1")
    assert "request.json" in files_of(result.archive)


def test_a_worker_at_another_commit_fails_the_cell_saying_so(tmp_path: Path) -> None:
    cfg = load(tmp_path, "nightly: {kernels: [deb]}\n")
    result = cell.run_cell(task_of(cfg, "deb", commit="0" * 40))
    assert result.status == cell.ERROR
    assert f"is at {head()[:12]}, the nightly was submitted from 000000000000" in result.why
    assert result.archive  # the cell's folder (cell.json) still comes back


def test_a_lab_yaml_missing_on_the_worker_is_the_cells_error(tmp_path: Path) -> None:
    cfg = load(tmp_path, "nightly: {kernels: [deb]}\n")
    task = task_of(cfg, "deb")
    cfg.path.unlink()
    result = cell.run_cell(task)
    assert result.status == cell.ERROR and "is not on this worker" in result.why


def test_paths_under_the_submitters_checkout_move_to_the_workers(tmp_path: Path) -> None:
    old, new = Path("/home/a/ringlab"), tmp_path / "ringlab"
    req = RunRequest(old / "lab.yaml", config.KernelSpec("k", config.BuildKernel(
        Path("/src/linux"), (old / "patches",), str(old / "base.config"),
        (old / "kernels/fragments/ringbuf.config", Path("/etc/x.config")))), old / "reports/r")
    got = cell.relocate(req, old, new)
    assert got.lab_config == new / "lab.yaml" and got.report_dir == new / "reports/r"
    assert got.kernel.source == config.BuildKernel(
        Path("/src/linux"), (new / "patches",), str(new / "base.config"),
        (new / "kernels/fragments/ringbuf.config", Path("/etc/x.config")))
    assert cell.relocate(req, old, old) is req
    deb = RunRequest(old / "lab.yaml", config.KernelSpec("d", config.PathKernel(
        old / "bzImage", modules=Path("/m"))), old)
    assert cell.relocate(deb, old, new).kernel.source == config.PathKernel(new / "bzImage",
                                                                           Path("/m"))


def test_judge_tells_boot_failures_from_test_failures(tmp_path: Path) -> None:
    assert cell.judge(child_run.read(tmp_path, 0)) == (cell.PASSED, "")
    (tmp_path / "run.log").write_text("lab: error: the mirror is down\n")
    assert cell.judge(child_run.read(tmp_path, 2)) == (cell.ERROR, "the mirror is down")
    results = [{"test": "tests/kernel/test_a.py::test_x", "outcome": "failed"}]
    (tmp_path / "summary.json").write_text(json.dumps({"results": results}))
    (tmp_path / "junit.xml").write_text(
        '<testsuites><testsuite><testcase classname="tests.kernel.test_a" name="test_x">'
        '<failure message="no guest: the kernel panicked"/></testcase></testsuite></testsuites>')
    assert cell.judge(child_run.read(tmp_path, 1))[0] == cell.BOOT_FAILED
    results.append({"test": "tests/kernel/test_a.py::test_y", "outcome": "failed"})
    (tmp_path / "summary.json").write_text(json.dumps({"results": results}))
    status, why = cell.judge(child_run.read(tmp_path, 1))
    assert status == cell.FAILED and "2 test(s) failed, 1 without a guest" == why


def test_scratch_of_a_dead_worker_is_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = tmp_path / f"ringlab-cell-{dead.pid}-deb-x"
    alive = tmp_path / "ringlab-cell-1-deb-y"      # pid 1 lives
    gone.mkdir()
    alive.mkdir()
    mine = cell.scratch("deb")
    assert mine.parent == tmp_path and mine.exists()
    assert not gone.exists() and alive.exists()


@pytest.mark.parametrize("code, status", [(0, cell.PASSED), (1, cell.FAILED), (2, cell.ERROR)])
def test_a_cells_explore_is_judged_by_its_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               code: int, status: str) -> None:
    calls = []

    def call(argv: list[str], **kw: object) -> int:
        calls.append(argv)
        return code
    monkeypatch.setattr(cell.subprocess, "call", call)
    req = RunRequest(tmp_path / "lab.yaml", config.KernelSpec(
        "trixie-cloud", config.DebianKernel("trixie", "cloud-amd64")), tmp_path / "run")
    got, why = cell.explore_cell(req, config.NightlyExplore(60, ("pinning",)), 20261126,
                                 tmp_path)
    assert got == status
    assert calls[0][-7:] == ["--budget", "60s", "--seed", "20261126", "--actors", "1", "pinning"]
    asked = RunRequest.from_json(calls[0][calls[0].index("--request") + 1])
    assert asked == req.with_folder(tmp_path / "explore")  # the cell's kernel, its folder
    assert ("a new failure" in why) == (code == 1)


def test_explore_is_given_the_cells_request_variant_included(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ran: list[RunRequest]) -> None:
    calls: list[list[str]] = []

    def call(argv: list[str], **kw: object) -> int:
        calls.append(argv)
        return 1
    monkeypatch.setattr(cell.subprocess, "call", call)
    cfg = load(tmp_path, "nightly: {kernels: [deb, src], variants: {v: [b.config]}}\n")
    explore = config.NightlyExplore(60)
    failed = cell.run_cell(task_of(cfg, "deb", explore=explore, seed=7))
    assert failed.status == cell.FAILED and "explore (seed 7)" in failed.why
    assert calls[0][calls[0].index("--lab-config") + 1] == str(cfg.path)
    asked = RunRequest.from_json(calls[0][calls[0].index("--request") + 1])
    assert asked.kernel == ran[0].kernel and asked.kernel.name == "deb"
    variant = cell.run_cell(task_of(cfg, "src.v", explore=explore, seed=7))
    assert variant.status == cell.FAILED and len(calls) == 2  # a variant is explored too
    asked = RunRequest.from_json(calls[1][calls[1].index("--request") + 1])
    assert asked.kernel == ran[1].kernel and asked.kernel.name == "src+v"
    assert "explore.log" in files_of(variant.archive)
