"""harness/runs/suite.py: a kernel that cannot be had leaves summary.json {"not_run": why} (the
multi-kernel table and a nightly cell say why from it); pytest is given the request as the
request.json of the report folder, and xdist only when more than one guest runs at once; a
multi-kernel run builds its table from each child's summary.json. pytest.main, the Lab and the
child runs are fakes: no guest, no kernel."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness import config
from harness.config import DebianKernel, KernelSpec
from harness.errors import LabError
from harness.runs import child_run, given, request, suite
from harness.runs.request import RunRequest

DATA = Path(__file__).resolve().parent.parent / "data"
K = KernelSpec("trixie", DebianKernel("trixie", "cloud-amd64"))


def _cfg(tmp_path: Path) -> config.LabConfig:
    return config.LabConfig(tmp_path / "lab.yaml", {"trixie": K}, "trixie",
                            reports_dir=tmp_path / "reports")


def _req(tmp_path: Path, name: str = "r", **kw: object) -> RunRequest:
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    return RunRequest(tmp_path / "lab.yaml", K, folder, **kw)  # type: ignore[arg-type]


class FakeLab:
    """A Lab whose kernel is had, or not (`why`)."""
    made: list[FakeLab] = []

    def __init__(self, cfg: config.LabConfig, refresh: bool = False,
                 why: str | None = None) -> None:
        self.config, self.refresh, self.why = cfg, refresh, why
        self.asked: list[str] = []
        self.rootfs_for: list[str] = []  # rootfs_ahead()'s arches
        FakeLab.made.append(self)

    def rootfs_ahead(self, arch: str) -> None:
        self.rootfs_for.append(arch)

    def kernel(self, name: str) -> object:
        self.asked.append(name)
        if self.why:
            raise LabError(self.why, hint="a hint not for the table")
        return object()


# --- prepare_kernel -------------------------------------------------------------------------

def test_a_kernel_that_cannot_be_had_leaves_not_run_and_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(suite, "Lab", lambda cfg, refresh=False: FakeLab(
        cfg, refresh, why="no linux-image-7.2 in trixie"))
    req = _req(tmp_path, refresh=True)
    with pytest.raises(LabError, match="no linux-image-7.2 in trixie"):
        suite.prepare_kernel(_cfg(tmp_path), req)
    assert json.loads((req.report_dir / "summary.json").read_text()) == {
        "kernel": "trixie", "not_run": "no linux-image-7.2 in trixie", "counts": {}}
    # ... which the child's reader says as "not run: why".
    child = child_run.read(req.report_dir, 2)
    assert (child.classify(), child.not_run) == (child_run.NOT_RUN, "no linux-image-7.2 in trixie")


def test_a_kernel_had_is_asked_for_once_and_leaves_no_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeLab.made.clear()
    monkeypatch.setattr(suite, "Lab", lambda cfg, refresh=False: FakeLab(cfg, refresh))
    req = _req(tmp_path, refresh=True)
    lab = suite.prepare_kernel(_cfg(tmp_path), req)
    assert FakeLab.made == [lab]
    assert (lab.asked, lab.refresh) == (["trixie"], True)  # type: ignore[attr-defined]
    assert lab.rootfs_for == ["x86_64"]  # type: ignore[attr-defined]  # made meanwhile
    assert not (req.report_dir / "summary.json").exists()


# --- run_suite ------------------------------------------------------------------------------

def _pytest(monkeypatch: pytest.MonkeyPatch, code: int = 0
            ) -> list[tuple[list[str], list[object]]]:
    calls: list[tuple[list[str], list[object]]] = []

    def main(argv: list[str], plugins: list[object] = ()) -> int:  # type: ignore[assignment]
        calls.append((list(argv), list(plugins)))
        return code
    monkeypatch.setattr(pytest, "main", main)
    return calls


def _after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_pytest_is_given_the_request_json_of_the_report_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _pytest(monkeypatch)
    req = _req(tmp_path, jobs="1", selection="mmap and not slow", pytest_args=("-x", "--lf"))
    assert suite.run_suite(_cfg(tmp_path), req) == 0
    ((argv, plugins),) = calls
    assert _after(argv, "--lab-request") == str(req.report_dir / "request.json")
    assert request.read(req.report_dir / "request.json") == req
    assert _after(argv, "-k") == "mmap and not slow"
    assert _after(argv, "--junitxml") == str(req.report_dir / "junit.xml")
    assert argv[-2:] == ["-x", "--lf"]
    assert "-n" not in argv and "--dist" not in argv and "--lab-selftests" not in argv
    assert plugins == []


@pytest.mark.parametrize("jobs, n", [("1", None), (None, None), ("3", "3"), ("auto", "5")])
def test_xdist_only_for_more_than_one_guest_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: str | None, n: str | None) -> None:
    calls = _pytest(monkeypatch)
    asked: list[str] = []
    real = child_run.run_jobs

    def run_jobs(cpus: int, text: str, memory_mb: int = 1024) -> int:
        asked.append(text)
        return 5 if text == "auto" else real(cpus, text, memory_mb)
    monkeypatch.setattr(child_run, "run_jobs", run_jobs)
    suite.run_suite(_cfg(tmp_path), _req(tmp_path, jobs=jobs))
    ((argv, _),) = calls
    assert asked == [jobs or "1"]
    if n is None:
        assert "-n" not in argv and "--dist" not in argv
    else:
        i = argv.index("-n")
        assert argv[i:i + 4] == ["-n", n, "--dist", "loadfile"]


def test_a_bad_jobs_value_is_a_lab_error_before_pytest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _pytest(monkeypatch)
    with pytest.raises(LabError, match="-j: expected a number of guests"):
        suite.run_suite(_cfg(tmp_path), _req(tmp_path, jobs="many"))
    assert calls == []


def test_the_selftests_manifest_and_the_lab_that_prepared_the_kernel_are_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _pytest(monkeypatch, code=int(pytest.ExitCode.TESTS_FAILED))
    lab = object()
    code = suite.run_suite(_cfg(tmp_path), _req(tmp_path, jobs="1"), tmp_path / "manifest.json",
                           lab)  # type: ignore[arg-type]
    assert code == 1
    ((argv, plugins),) = calls
    assert _after(argv, "--lab-selftests") == str(tmp_path / "manifest.json")
    assert plugins == [given.Given(lab)]  # type: ignore[arg-type]


def test_no_test_collected_keeps_no_history(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _pytest(monkeypatch, code=int(pytest.ExitCode.NO_TESTS_COLLECTED))
    req = _req(tmp_path, jobs="1", history=str(tmp_path / "history"))
    (req.report_dir / "summary.json").write_text("{}")
    assert suite.run_suite(_cfg(tmp_path), req) == int(pytest.ExitCode.NO_TESTS_COLLECTED)
    assert not (req.report_dir / "history.txt").exists()
    assert not (tmp_path / "history").exists()


# --- run_many -------------------------------------------------------------------------------

def test_run_many_writes_the_table_from_each_childs_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    parent = tmp_path / "many"
    ran = KernelSpec("ran", DebianKernel("trixie", "cloud-amd64"))
    gone = KernelSpec("gone", DebianKernel("sid", "cloud-amd64"))
    reqs = [RunRequest(tmp_path / "lab.yaml", ran, parent / "ran"),
            RunRequest(tmp_path / "lab.yaml", gone, parent / "gone")]
    started: list[str] = []

    def run(req: RunRequest) -> child_run.ChildRun:
        started.append(req.kernel.name)
        req.report_dir.mkdir(parents=True)
        if req.kernel is ran:
            shutil.copy(DATA / "summary-6.12.json", req.report_dir / "summary.json")
            return child_run.read(req.report_dir, 1)
        (req.report_dir / "summary.json").write_text(json.dumps({"not_run": "no package"}))
        return child_run.read(req.report_dir, 2)
    monkeypatch.setattr(child_run, "run", run)
    parent.mkdir()
    assert suite.run_many(reqs, parent) == 2  # the worst child's status
    assert started == ["ran", "gone"]
    table = json.loads((parent / "summary.json").read_text())
    assert list(table["kernels"]) == ["ran", "gone"]
    assert table["kernels"]["ran"]["release"] == "6.12.107+deb13-cloud-amd64"
    assert table["kernels"]["ran"]["counts"] == {"passed": 92, "skipped": 2, "xfailed": 4}
    assert table["kernels"]["gone"] == {"release": None, "error": "not run: no package"}
    assert len(table["tests"]) == 98
    assert all(set(by) == {"ran"} for by in table["tests"].values())
    text = (parent / "summary.txt").read_text()
    assert "gone (not run: no package)" in text
    assert capsys.readouterr().out == text
