"""harness/runs/child_run.py: the one command line of a child `./lab run` (multi-kernel
runs, review, bisect steps, mutate, nightly cells, the benches all use it), and the one reader
of the child's report folder, on small summary.json and junit.xml written here."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.config import DebianKernel, KernelSpec
from harness.runs import child_run
from harness.runs.request import RunRequest


K = KernelSpec("k", DebianKernel("trixie", "cloud-amd64"))


def test_the_request_travels_whole_as_one_value() -> None:
    req = RunRequest(Path("/lab.yaml"), K, Path("/r/k"))
    out = child_run.argv(req, python="py")
    assert out[:7] == ["py", "-m", "harness.cli", "--lab-config", "/lab.yaml", "run",
                       "--request"]
    assert len(out) == 8 and RunRequest.from_json(out[7]) == req


def test_the_child_command_line_parses_back_to_the_request() -> None:
    req = RunRequest(Path("/lab.yaml"), K, Path("/r/k"), selection="ring", refresh=True,
                     history="/h", pytest_args=("-x",))
    args = cli.build_parser().parse_args(child_run.argv(req)[3:])
    assert (args.lab_config, args.command) == ("/lab.yaml", "run")
    assert RunRequest.from_json(args.request) == req


def test_jobs_auto_is_two_guests_a_core_per_vcpu_and_bad_values_are_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(child_run.os, "cpu_count", lambda: 2)
    big = 64 * 1024
    assert child_run.run_jobs(1, "auto", host_memory_mb=big) == 4
    assert child_run.run_jobs(2, "auto", host_memory_mb=big) == 2
    assert child_run.run_jobs(8, "auto", host_memory_mb=big) == 1  # at least one guest
    assert child_run.run_jobs(1, "3") == 3
    for bad in ("0", "two", "-1"):
        with pytest.raises(ValueError, match=f"got '{bad}'"):
            child_run.run_jobs(1, bad)


# --- the reader -------------------------------------------------------------------------------

A, B, C, D = ("tests/kernel/test_a.py::test_one", "tests/kernel/test_a.py::test_two",
              "tests/kernel/test_b.py::test_three", "tests/kernel/test_b.py::test_four")
BOOTS = [{"cpus": 1, "memory_mb": 1024, "boot_s": 8.0, "accel": "tcg"}]


def _folder(tmp_path: Path, results: list[tuple[str, str]] | None = None,
            no_guest: tuple[str, ...] = (), boots: list | None = None, **extra) -> Path:
    """A child's report folder: summary.json with these (test, outcome) results (None: no
    summary.json at all), and junit.xml failing the `no_guest` tests for want of a guest."""
    if results is not None:
        (tmp_path / "summary.json").write_text(json.dumps(
            {"kernel": "k", "boots": BOOTS if boots is None else boots,
             "results": [{"test": t, "outcome": o} for t, o in results], **extra}))
    cases = "".join(
        f'<testcase classname="tests.kernel.{t.split("::")[0].split("/")[-1][:-3]}" '
        f'name="{t.split("::")[1]}"><error message="failed on setup with &quot;Failed: no '
        f'guest: the kernel panicked&quot;">x</error></testcase>' for t in no_guest)
    (tmp_path / "junit.xml").write_text(f"<testsuites><testsuite>{cases}<testcase "
                                        'classname="tests.kernel.test_b" name="test_x">'
                                        '<failure message="AssertionError">y</failure>'
                                        "</testcase></testsuite></testsuites>")
    return tmp_path


def test_a_run_is_read_back_as_final_outcomes_failing_tests_and_tests_without_a_guest(
        tmp_path: Path) -> None:
    run = child_run.read(_folder(tmp_path, [
        (A, "passed"), (B, "rerun"), (B, "passed"), (C, "failed"), (D, "error")], (D,)), 1)
    assert run.run_dir == tmp_path and run.exit_code == 1 and run.not_run is None
    assert run.outcomes == {A: "passed", B: "flaky", C: "failed", D: "error"}
    # flaky failed too; keys are the 'file-stem::name' junit.xml gives
    assert run.failing == {"test_a::test_two", "test_b::test_three", "test_b::test_four"}
    assert run.no_guest == {"test_b::test_four"}
    assert run.without_guest(D) and not run.without_guest(C) and run.booted
    assert not run.boot_failed_only and run.classify() == child_run.FAILED


def test_a_rerun_the_emulator_caused_is_not_a_failure(tmp_path: Path) -> None:
    results = [(A, "passed"), (B, "rerun"), (B, "passed")]
    (tmp_path / "summary.json").write_text(json.dumps({"results": [
        {"test": t, "outcome": o, **({"broke": ["emulator", "tcg"]} if o == "rerun" else {})}
        for t, o in results]}))
    run = child_run.read(tmp_path, 0)
    assert run.outcomes == {A: "passed", B: "passed"} and run.failing == frozenset()
    assert run.classify() == child_run.PASSED and run.no_guest == frozenset()


def test_tests_failing_only_for_want_of_a_guest_are_a_boot_failure(tmp_path: Path) -> None:
    run = child_run.read(_folder(tmp_path, [(A, "failed"), (C, "error")], (A, C), boots=[]), 1)
    assert run.boot_failed_only and not run.booted
    assert run.classify() == child_run.BOOT_FAILED
    # One test that failed on a guest makes it a test failure.
    run = child_run.read(_folder(tmp_path, [(A, "failed"), (C, "failed")], (A,)), 1)
    assert not run.boot_failed_only and run.classify() == child_run.FAILED
    # No test without a guest, no boot failure: a failed run we know nothing more of.
    assert not child_run.of({"results": []}, 1).boot_failed_only


def test_a_kernel_that_could_not_be_had_is_not_run_with_why(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps(
        {"kernel": "k", "not_run": "debian:sid/nope: no such flavour", "counts": {}}))
    run = child_run.read(tmp_path, 2)
    assert run.not_run == "debian:sid/nope: no such flavour"
    assert run.outcomes == {} and run.failing == frozenset() and not run.booted
    assert run.classify() == child_run.NOT_RUN


def test_a_run_without_a_summary_could_not_judge_its_kernel(tmp_path: Path) -> None:
    run = child_run.read(tmp_path / "never-made", 2)
    assert run.summary is None and run.outcomes == {} and run.no_guest == frozenset()
    assert run.classify() == child_run.ERROR
    (tmp_path / "summary.json").write_text("{not json")
    assert child_run.read(tmp_path, 1).summary is None
    assert child_run.read(tmp_path, 1).classify() == child_run.ERROR
    assert child_run.read(tmp_path, 0).classify() == child_run.PASSED  # exit 0 says it all


def test_boot_failures_are_read_from_junit(tmp_path: Path) -> None:
    (tmp_path / "junit.xml").write_text(
        '<testsuites><testsuite><testcase classname="tests.kernel.test_a" name="test_one">'
        '<error message="failed on setup with &quot;Failed: no guest: the kernel panicked'
        '&quot;">x</error></testcase><testcase classname="tests.kernel.test_b" '
        'name="test_three"><failure message="AssertionError">y</failure></testcase>'
        '</testsuite></testsuites>')
    assert child_run.boot_failures(tmp_path) == {"test_a::test_one"}
    assert child_run.boot_failures(tmp_path / "none") == set()
    (tmp_path / "junit.xml").write_text("<testsuites><testsuite>")  # cut short
    assert child_run.boot_failures(tmp_path) == set()
    assert child_run.nodeid_key("tests/kernel/test_a.py::test_one[4096]") == \
        "test_a::test_one[4096]"


def test_a_child_is_run_and_its_folder_read_back(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    summary = {"boots": BOOTS, "results": [{"test": A, "outcome": "failed"}]}
    script = (f"import json, pathlib, sys; pathlib.Path({str(tmp_path)!r}, 'summary.json')"
              f".write_text(json.dumps({summary!r})); print('child ran'); sys.exit(1)")
    monkeypatch.setattr(child_run, "argv", lambda req: [sys.executable, "-c", script])
    log = tmp_path / "run.log"
    with log.open("w") as out:
        run = child_run.run(RunRequest(Path("/lab.yaml"), K, tmp_path), stdout=out)
    assert log.read_text() == "child ran\n"
    assert (run.exit_code, run.outcomes, run.classify()) == (1, {A: "failed"}, child_run.FAILED)
