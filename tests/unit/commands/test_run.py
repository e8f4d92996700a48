"""`./lab run`: the command line parses to the verb's main; `kernel_specs` resolves --kernel
once (one kernel, a comma list, 'all') and refuses what cannot be (--modules with a list);
--gdb-on-failure keeps one guest paused, so it refuses -j and several kernels; main hands a
child's --request whole to harness/runs/suite.py, and otherwise builds the RunRequest from the
spec it resolved (never the name again)."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from harness import cli, config, host
from harness.commands import run
from harness.config import DebianKernel, KernelSpec, MachineSpec
from harness.errors import LabError
from harness.runs import run_folder, suite
from harness.runs.request import RunRequest


def _lab_yaml(tmp_path: Path) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text("default_kernel: trixie\nkernels:\n"
                    "  trixie:\n    debian: {suite: trixie, flavour: cloud-amd64}\n"
                    "  sid:\n    debian: {suite: sid, flavour: cloud-amd64}\n"
                    "  bookworm:\n    debian: {suite: bookworm, flavour: cloud-amd64}\n"
                    f"reports:\n  dir: {tmp_path / 'reports'}\n")
    return path


def _parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser(("run",)).parse_args(list(argv))


def test_run_parses_and_dispatches_to_main() -> None:
    args = _parse("run", "--kernel", "a,b", "-j", "2", "-k", "mmap", "--keep-guest",
                  "--selftests", "--history", "/h", "--refresh", "--", "--maxfail=1")
    assert args.func is run.main
    assert (args.kernel, args.jobs, args.k, args.keep_guest, args.selftests, args.history,
            args.refresh, args.pytest_args) == ("a,b", "2", "mmap", True, True, "/h", True,
                                                ["--maxfail=1"])
    bare = _parse("run")
    assert (bare.kernel, bare.jobs, bare.request, bare.gdb_on_failure, bare.pytest_args) == (
        None, None, None, False, [])


def test_the_verb_declares_its_own_logging_and_build_tools_only_for_selftests() -> None:
    needs = host.verb_needs("run")
    assert needs.own_logging is True and needs.host_tools == ()
    assert needs.host_tools_with == {"--selftests": ("build",)}
    assert (run.OWN_LOGGING, run.HOST_TOOLS, run.HOST_TOOLS_WITH) == (
        True, (), {"--selftests": ("build",)})


def test_one_kernel_is_its_spec(tmp_path: Path) -> None:
    cfg = config.load(_lab_yaml(tmp_path))
    (spec,) = run.kernel_specs(cfg, _parse("run", "--kernel", "sid"))
    assert spec is cfg.kernels["sid"]


def test_no_kernel_is_the_default_one(tmp_path: Path) -> None:
    cfg = config.load(_lab_yaml(tmp_path))
    assert [s.name for s in run.kernel_specs(cfg, _parse("run"))] == ["trixie"]


def test_a_comma_list_is_each_kernel_in_the_order_given(tmp_path: Path) -> None:
    cfg = config.load(_lab_yaml(tmp_path))
    specs = run.kernel_specs(cfg, _parse("run", "--kernel", "sid, trixie,"))
    assert [s.name for s in specs] == ["sid", "trixie"]
    assert specs[0] is cfg.kernels["sid"]


def test_a_command_line_kernel_in_a_list_is_resolved_too(tmp_path: Path) -> None:
    cfg = config.load(_lab_yaml(tmp_path))
    specs = run.kernel_specs(cfg, _parse("run", "--kernel", "sid,debian:forky/cloud-arm64"))
    assert specs[1].name == "debian:forky/cloud-arm64"
    assert isinstance(specs[1].source, DebianKernel) and specs[1].source.suite == "forky"


def test_all_is_every_kernel_of_lab_yaml_sorted(tmp_path: Path) -> None:
    cfg = config.load(_lab_yaml(tmp_path))
    assert [s.name for s in run.kernel_specs(cfg, _parse("run", "--kernel", "all"))] == [
        "bookworm", "sid", "trixie"]


def test_an_unknown_name_in_a_list_is_an_error_before_anything_runs(tmp_path: Path) -> None:
    cfg = config.load(_lab_yaml(tmp_path))
    with pytest.raises(LabError, match="unknown kernel 'nosuch'"):
        run.kernel_specs(cfg, _parse("run", "--kernel", "sid,nosuch"))


def test_modules_with_a_list_is_an_error(tmp_path: Path) -> None:
    cfg = config.load(_lab_yaml(tmp_path))
    with pytest.raises(LabError, match="--modules goes with one --kernel IMAGE, not a list"):
        run.kernel_specs(cfg, _parse("run", "--kernel", "sid,trixie", "--modules", "/m"))


def _no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither a run folder nor a suite: a test that reaches them has gone wrong."""
    def never(*a: object, **kw: object) -> int:
        raise AssertionError("reached the run")
    monkeypatch.setattr(run_folder, "open_run", never)
    monkeypatch.setattr(suite, "run_one", never)
    monkeypatch.setattr(suite, "run_many", never)


@pytest.mark.parametrize("argv", [
    ["--gdb-on-failure", "-j", "2"],
    ["--gdb-on-failure", "-j", "auto"],
    ["--gdb-on-failure", "--kernel", "sid,trixie"],
    ["--gdb-on-failure", "--kernel", "all"],
])
def test_gdb_on_failure_with_jobs_or_several_kernels_is_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    _no_run(monkeypatch)
    args = _parse("--lab-config", str(_lab_yaml(tmp_path)), "run", *argv)
    with pytest.raises(LabError, match="--gdb-on-failure keeps one guest paused"):
        run.main(args)


def _capture_one(monkeypatch: pytest.MonkeyPatch, folder: Path
                 ) -> tuple[list[tuple[config.LabConfig, RunRequest]], list[str]]:
    """suite.run_one's (cfg, request) and open_run's labels, kept; run_one says 3."""
    handed: list[tuple[config.LabConfig, RunRequest]] = []
    labels: list[str] = []
    monkeypatch.setattr(run_folder, "open_run",
                        lambda cfg, args, label: labels.append(label) or folder)
    monkeypatch.setattr(suite, "run_one", lambda cfg, req: handed.append((cfg, req)) or 3)
    monkeypatch.setattr(suite, "run_many", lambda reqs, parent: pytest.fail("one kernel"))
    return handed, labels


def test_one_kernel_builds_the_request_with_the_resolved_spec(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab_yaml = _lab_yaml(tmp_path)
    folder = tmp_path / "reports" / "one"
    handed, labels = _capture_one(monkeypatch, folder)
    args = _parse("--lab-config", str(lab_yaml), "run", "--kernel", "sid", "-k", "mmap",
                  "--refresh", "--history", "/h", "--selftests", "--", "-x")
    assert run.main(args) == 3
    ((cfg, req),) = handed
    assert labels == ["sid"]
    assert req == RunRequest(lab_yaml, config.load(lab_yaml).kernels["sid"], folder,
                             selection="mmap", jobs="auto", refresh=True, history="/h",
                             selftests=True, pytest_args=("-x",))
    assert cfg.kernel("sid") is req.kernel


def test_a_command_line_kernel_travels_as_the_spec_resolved_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab_yaml = _lab_yaml(tmp_path)
    handed, labels = _capture_one(monkeypatch, tmp_path / "out")
    assert run.main(_parse("--lab-config", str(lab_yaml), "run", "--kernel",
                           "debian:sid/cloud-amd64=7.2.13")) == 3
    ((cfg, req),) = handed
    assert labels == ["debian-sid-cloud-amd64=7.2.13"]
    assert req.kernel == KernelSpec("debian:sid/cloud-amd64=7.2.13", DebianKernel(
        "sid", "cloud-amd64", "amd64", "7.2.13"))
    # The config the suite gets has the spec under its name: nothing resolves it again.
    assert cfg.kernel(req.kernel.name) is req.kernel


@pytest.mark.parametrize("argv, jobs", [
    ([], "auto"), (["--keep-guest"], "1"), (["--gdb-on-failure"], "1"),
    (["-j", "4"], "4"), (["--gdb-on-failure", "-j", "1"], "1"),
])
def test_a_guest_kept_for_the_user_runs_one_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], jobs: str) -> None:
    handed, _ = _capture_one(monkeypatch, tmp_path / "out")
    assert run.main(_parse("--lab-config", str(_lab_yaml(tmp_path)), "run", *argv)) == 3
    ((_, req),) = handed
    assert req.jobs == jobs
    assert (req.keep_guest, req.gdb_on_failure) == ("--keep-guest" in argv,
                                                    "--gdb-on-failure" in argv)


def test_several_kernels_go_to_run_many_each_in_its_folder_of_one_parent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab_yaml = _lab_yaml(tmp_path)
    parent = tmp_path / "reports" / "many"
    labels: list[str] = []
    handed: list[tuple[list[RunRequest], Path]] = []
    monkeypatch.setattr(run_folder, "open_run",
                        lambda cfg, args, label: labels.append(label) or parent)
    monkeypatch.setattr(suite, "run_one", lambda cfg, req: pytest.fail("several kernels"))
    monkeypatch.setattr(suite, "run_many", lambda reqs, p: handed.append((reqs, p)) or 1)
    args = _parse("--lab-config", str(lab_yaml), "run", "--kernel",
                  "sid,debian:forky/cloud-amd64", "-j", "2", "-k", "ring", "--keep-guest")
    assert run.main(args) == 1
    ((reqs, p),) = handed
    assert p == parent and labels == ["sid+debian-forky-cloud-amd64"]
    assert [r.kernel.name for r in reqs] == ["sid", "debian:forky/cloud-amd64"]
    assert [r.report_dir for r in reqs] == [parent / "sid", parent / "debian-forky-cloud-amd64"]
    assert {(r.selection, r.jobs, r.lab_config) for r in reqs} == {("ring", "2", lab_yaml)}
    # Several kernels run one after the other in children: no guest is kept for the user.
    assert not any(r.keep_guest or r.gdb_on_failure for r in reqs)


def test_a_request_is_handed_to_run_one_with_the_requests_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child run: the request whole, the spec (not in lab.yaml) and the machine in the config
    run_one gets; its folder made; no kernel resolved from the command line."""
    lab_yaml = _lab_yaml(tmp_path)
    spec = KernelSpec("sid+variant", DebianKernel("sid", "cloud-amd64", "amd64"))
    req = RunRequest(lab_yaml, spec, tmp_path / "parent" / "sid", selection="mmap", jobs="1",
                     machine=MachineSpec(cpus=3, memory_mb=2048))
    handed: list[tuple[config.LabConfig, RunRequest]] = []
    logs: list[Path | None] = []
    monkeypatch.setattr(run_folder, "setup_logging", lambda verbose, logfile=None:
                        logs.append(logfile))
    monkeypatch.setattr(run_folder, "open_run", lambda *a: pytest.fail("a child opens no run"))
    monkeypatch.setattr(run, "kernel_specs", lambda *a: pytest.fail("resolved again"))
    monkeypatch.setattr(suite, "run_one", lambda cfg, r: handed.append((cfg, r)) or 1)
    assert run.main(_parse("run", "--request", req.to_json())) == 1
    ((cfg, got),) = handed
    assert got == req
    assert cfg.path == lab_yaml and cfg.kernel("sid+variant") == spec
    assert (cfg.machine.cpus, cfg.machine.memory_mb) == (3, 2048)
    assert req.report_dir.is_dir() and logs == [req.report_dir / "lab.log"]
