"""`./lab run` and the pytest plugin, as a user runs them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_stray_qemu")]


def _cases(junit: Path) -> dict[str, ET.Element]:
    return {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}


def run_suite(suite: str, tmp_path: Path, lab_yaml: Path, *extra: str,
              env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """pytest with the lab's plugin on tests/suites/<suite>, as ./lab run would: reports in
    tmp_path/run, JUnit (with each test's output) in tmp_path/junit.xml."""
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "harness.pytest_plugin",
                           "-p", "no:cacheprovider", str(REPO / "tests" / "suites" / suite),
                           "--lab-config", str(lab_yaml), "--lab-report-dir",
                           str(tmp_path / "run"), "--junitxml", str(tmp_path / "junit.xml"),
                           "-o", "junit_logging=system-out", *extra],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)



def test_lab_run_default_kernel_writes_reports(tmp_path: Path, make_lab_yaml) -> None:
    env = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml()))
    p = subprocess.run(["./lab", "run"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    run_dir = (tmp_path / "reports" / "latest").resolve()
    cases = _cases(run_dir / "junit.xml")
    assert "test_release_is_the_booted_kernel" in cases
    failed = [n for n, c in cases.items() if c.find("failure") is not None]
    assert not failed
    summary = (run_dir / "summary.txt").read_text()
    assert "trixie-cloud" in summary and "passed" in summary
    # The guest came up in the console log: booted (the ready marker), or restored from a
    # snapshot an earlier run of this cache saved (the marker is not printed again then).
    # -j auto by default: a console log per worker (console-trixie-cloud-gw0.log, ...).
    console = "".join(f.read_text() for f in run_dir.glob("console-trixie-cloud*.log"))
    assert "ringlab: ready" in console or "==== ringlab: restored in " in console, console[-2000:]


def test_guest_crash_fails_that_test_and_the_run_goes_on(tmp_path: Path, make_lab_yaml) -> None:
    p = run_suite("suite_guest_crash.py", tmp_path, make_lab_yaml())
    assert p.returncode == 1, p.stdout[-3000:]
    cases = _cases(tmp_path / "junit.xml")
    a, b, c = (cases[f"test_{x}"] for x in ("a_logs_to_dmesg", "b_crashes_the_guest",
                                            "c_gets_a_fresh_guest"))
    assert a.find("failure") is None and "ringlab-dmesg-marker" in ET.tostring(a, "unicode")
    failure = b.find("failure")
    assert failure is not None
    text = failure.get("message", "") + (failure.text or "")
    assert "the guest died during this test" in text and "sysrq" in text.lower()
    assert c.find("failure") is None and c.find("error") is None
    # A guest death is rerun once in a fresh guest (it fails again: a kernel panic); the test
    # after it gets a fresh guest too.
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert [b["cpus"] for b in summary["boots"]] == [1, 1, 1]
    [rerun] = [r for r in summary["results"] if r["outcome"] == "rerun"]
    assert rerun["test"].endswith("test_b_crashes_the_guest") and rerun["broke"][0] == "kernel"
    assert "(again on a rerun in a fresh guest)" in (tmp_path / "run" / "summary.txt").read_text()


def test_known_issues_excuse_exactly_their_symptom(tmp_path: Path, make_lab_yaml) -> None:
    suite = "tests/suites/suite_known_issues.py"
    known = tmp_path / "known-issues.yaml"
    known.write_text(f"""
issues:
  - id: rule-broken
    test: "{suite}::*"
    checks: [abi-rule]
    when: "got == 1"
    reason: the kernel gives 1
    link: https://example.invalid/rule-broken
""")
    p = run_suite("suite_known_issues.py", tmp_path, make_lab_yaml(), "--known-issues",
                  str(known), "-rxX")
    assert p.returncode == 1, p.stdout[-3000:]
    cases = _cases(tmp_path / "junit.xml")
    xfailed = cases["test_symptom_shows"].find("skipped")
    assert xfailed is not None and "rule-broken" in xfailed.get("message", "")
    assert cases["test_symptom_absent"].find("failure") is None
    assert cases["test_symptom_absent"].find("skipped") is None
    for name, why in (("test_symptom_and_another_check", "check other-rule: a second bug"),
                      ("test_symptom_and_an_exception", "a second bug: an assertion"),
                      ("test_another_symptom_of_the_check", "the kernel gave 2")):
        failure = cases[name].find("failure")
        assert failure is not None, name
        assert why in failure.get("message", "") + (failure.text or ""), name
    text = (tmp_path / "run" / "summary.txt").read_text()
    assert "NOT SEEN known issue rule-broken in " + suite + "::test_symptom_absent" in text
    # summary.txt says what failed, not where: the check's own message.
    assert "check other-rule: a second bug in the same test" in text, text
    assert "XFAIL" in p.stdout and "rule-broken" in p.stdout


def test_a_broken_known_issues_list_is_a_clear_error(tmp_path: Path, make_lab_yaml) -> None:
    broken = tmp_path / "known-issues.yaml"
    broken.write_text("issues:\n  - {id: a}\n")
    p = run_suite("suite_known_issues.py", tmp_path, make_lab_yaml(), "--known-issues",
                  str(broken), timeout=300)
    assert p.returncode != 0
    out = p.stdout + p.stderr
    assert f"{broken}: issues[0].link" in out or f"{broken}: issues[0]" in out, out[-2000:]
    assert "Traceback" not in out, out[-3000:]


def test_only_a_broken_guest_is_rerun_and_a_failure_that_goes_away_is_flaky(
        tmp_path: Path, make_lab_yaml) -> None:
    env = dict(os.environ, RINGLAB_DIES_ONCE_FLAG=str(tmp_path / "died"))
    p = run_suite("suite_guest_dies_once.py", tmp_path, make_lab_yaml(), env=env)
    assert p.returncode == 1, p.stdout[-3000:]
    assert "1 failed, 1 passed, 1 rerun" in p.stdout, p.stdout[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    [rerun] = [r for r in summary["results"] if r["outcome"] == "rerun"]
    assert rerun["test"].endswith("test_dies_once") and rerun["broke"][0] == "emulator"
    # The death got a fresh guest; the assertion failure left the guest as it was: no boot.
    assert len(summary["boots"]) == 2, summary["boots"]
    text = (tmp_path / "run" / "summary.txt").read_text()
    assert "RERUN   tests/suites/suite_guest_dies_once.py::test_dies_once: passed on a fresh " \
           "guest after the emulator broke" in text, text
    assert "FAILED  tests/suites/suite_guest_dies_once.py::test_fails_once: AssertionError: " \
           "fails on the first attempt only" in text, text

    # Asked for explicitly, reruns cover assertion failures; one that goes away is flaky,
    # and the run does not pass.
    env["RINGLAB_DIES_ONCE_FLAG"] = str(tmp_path / "again")
    p = run_suite("suite_guest_dies_once.py", tmp_path / "explicit", make_lab_yaml(),
                  "--reruns", "1", "-k", "fails_once", env=env)
    assert p.returncode == 1, p.stdout[-3000:]
    text = (tmp_path / "explicit" / "run" / "summary.txt").read_text()
    assert "FLAKY   tests/suites/suite_guest_dies_once.py::test_fails_once: failed, then did " \
           "not reproduce" in text, text


def test_a_kernel_splat_fails_its_test_and_one_between_tests_is_reported(
        tmp_path: Path, make_lab_yaml) -> None:
    p = run_suite("suite_splats.py", tmp_path, make_lab_yaml())
    assert p.returncode == 1, p.stdout[-3000:]
    cases = _cases(tmp_path / "junit.xml")
    failed = [n for n, c in cases.items() if c.find("failure") is not None]
    assert failed == ["test_b_warns"], p.stdout[-3000:]
    # The WARNING in a fixture's teardown fails the test at its teardown (an <error>).
    late = cases["test_c_warns_in_teardown"].find("error")
    assert late is not None and "after the test returned" in late.get("message", "") + \
        (late.text or ""), p.stdout[-3000:]
    assert cases["test_f_after"].find("failure") is None and \
        cases["test_f_after"].find("error") is None
    failure = cases["test_b_warns"].find("failure")
    text = failure.get("message", "") + (failure.text or "")
    assert "the kernel splatted during this test: WARNING at" in text and "ringlab_splat" in text
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    by_test = {r["test"].split("::")[-1]: r for r in summary["results"]}
    splat = by_test["test_b_warns"]["splats"][0]
    assert "ringlab_splat_warn" in splat["title"] and splat["call_trace"][0] == "warn_set"
    assert splat["tainting_modules"] == ["ringlab_splat"]
    before, after = by_test["test_b_warns"]["taint"]
    assert after & (1 << 9) and not before & (1 << 9)  # TAINT_WARN (kernel/panic.c)
    assert by_test["test_c_warns_in_teardown"]["outcome"] == "failed"
    # The deferred WARNING came while no test ran: it fails the test that ran before it.
    [between] = summary["splats_between_tests"]
    assert between["after_test"].endswith("test_d_warns_from_deferred_work")
    assert "ringlab_splat" in between["splats"][0]["text"]
    deferred = by_test["test_d_warns_from_deferred_work"]
    assert deferred["outcome"] == "failed"
    assert deferred["reason"].startswith("the kernel splatted after the test returned")
    assert by_test["test_f_after"]["outcome"] == "passed"


def test_several_kernels_in_one_run_make_one_table(tmp_path: Path, make_lab_yaml) -> None:
    twin = {"twin": {"debian": {"suite": "trixie", "flavour": "cloud-amd64"}}}
    env = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml(kernels=twin)))
    p = subprocess.run(["./lab", "run", "--kernel", "trixie-cloud,twin", "-k",
                        "test_release_is_the_booted_kernel or test_page_size"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    run = (tmp_path / "reports" / "latest").resolve()
    table = json.loads((run / "summary.json").read_text())
    assert set(table["kernels"]) == {"trixie-cloud", "twin"}
    assert table["tests"] and all(v == {"trixie-cloud": "passed", "twin": "passed"}
                                  for v in table["tests"].values()), table["tests"]
    text = (run / "summary.txt").read_text()
    assert "trixie-cloud" in text and "twin" in text and "0 with different outcomes" in text
    assert (run / "twin" / "junit.xml").exists() and (run / "trixie-cloud" / "kcidb.json").exists()


def test_the_html_report_reads_in_a_headless_browser(tmp_path: Path, make_lab_yaml) -> None:
    env = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml()))
    p = subprocess.run(["./lab", "run", "-k", "test_release_is_the_booted_kernel or "
                        "test_page_size or test_detached_events_flag"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    run = (tmp_path / "reports" / "latest").resolve()
    browser = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                              "--virtual-time-budget=5000", "--dump-dom",
                              (run / "report.html").as_uri()],
                             capture_output=True, text=True, timeout=180)
    dom = browser.stdout
    assert "test_release_is_the_booted_kernel" in dom, browser.stderr[-2000:]
    release = json.loads((run / "summary.json").read_text())["release"]
    # The run's facts (environment table), per-test results, probe output and the guest dmesg.
    assert release in dom and "accel" in dom and "lab commit" in dom
    assert "Passed" in dom and "Skipped" in dom
    assert "probe_capabilities" in dom and "probe output" in dom


def test_a_hung_guest_fails_its_test_in_bounded_time(tmp_path: Path, make_lab_yaml) -> None:
    start = time.monotonic()
    p = run_suite("suite_guest_hang.py", tmp_path, make_lab_yaml())
    took = time.monotonic() - start
    assert p.returncode == 1, p.stdout[-3000:]
    cases = _cases(tmp_path / "junit.xml")
    # Each hanging test gave a 300 s command timeout; the lab must end it long before.
    hung, stalled = cases["test_a_hangs_the_guest"], cases["test_b_stalls_one_cpu"]
    assert "hung (no answer from the guest and no console output" in \
        hung.find("failure").get("message")
    assert float(hung.get("time")) < 60
    # The kernel's own report (an RCU stall or a soft lockup) ends it, before the heartbeat.
    assert "the kernel reports a lockup: " in stalled.find("failure").get("message")
    assert float(stalled.get("time")) < 60
    assert cases["test_c_gets_a_fresh_guest"].find("failure") is None
    # Each hang is rerun once in a fresh guest (a hang the lab classified): 2 + 2 + 1 boots.
    assert took < 360, f"hung guests must not hold the run up: {took:.0f} s"
    boots = json.loads((tmp_path / "run" / "summary.json").read_text())["boots"]
    assert len(boots) == 5, boots


def test_a_guest_flooding_its_console_is_capped_and_keeps_working(tmp_path: Path,
                                                                  make_lab_yaml) -> None:
    p = run_suite("suite_console_flood.py", tmp_path,
                  make_lab_yaml(machine={"console_log_mb": 1}))
    assert p.returncode == 0, p.stdout[-3000:]
    cases = _cases(tmp_path / "junit.xml")
    assert all(c.find("failure") is None for c in cases.values())
    console_log = next((tmp_path / "run").glob("console-*.log"))
    # One boot: at most its 1 MiB share (head + kept tail) and the flood note.
    assert console_log.stat().st_size < 2**20 + 4096
    text = console_log.read_text(errors="replace")
    assert "==== ringlab: console flood:" in text and "bytes not kept" in text
    assert "ringlab_splat: flood line 100000, 0 to go" in text, "the flood's end was not kept"
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["boots"][0]


def test_two_guests_at_once_give_one_report(tmp_path: Path, make_lab_yaml) -> None:
    """./lab run -j 2: pytest-xdist workers, a guest each, one set of run files written by
    the controller alone (the same results a serial run gives)."""
    env = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml()))
    p = subprocess.run(["./lab", "run", "-j", "2", "-k", "test_release_is_the_booted_kernel or "
                        "test_page_size or test_meta_page_fields_describe_the_buffer or "
                        "test_kernel_speaks_the_mainline_mapping_abi"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "2 workers" in p.stdout
    run = (tmp_path / "reports" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"] == {"passed": 4}, summary["counts"]
    assert len(summary["boots"]) == 2 and summary["release"], summary
    # A fact learnt in a worker reaches the controller's summary.
    assert "trace_pipe_raw mmap ABI" in summary["kernel_facts"]
    assert len((run / "results.jsonl").read_text().splitlines()) == 4
    assert sorted(f.name for f in run.glob("console-*.log")) == [
        "console-trixie-cloud-gw0.log", "console-trixie-cloud-gw1.log"]
    assert len(_cases(run / "junit.xml")) == 4


def test_a_killed_run_leaves_no_guest_behind(tmp_path: Path, make_lab_yaml,
                                             running_qemus) -> None:
    """A run with two xdist workers killed with SIGKILL while each test holds its guest busy
    (tests/suites/suite_busy_guests.py, 120 s each): no cleanup code of the controller runs,
    yet its workers go at once (PR_SET_PDEATHSIG: SIGINT, the way Ctrl-C takes them), and with
    them every QEMU and guest folder (issue 44: they stayed 20-26 s, and 3 folders)."""
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    qemus_before = running_qemus()
    folders_before = set(tmp.glob("ringlab-guest-*"))
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "harness.pytest_plugin",
                             "-p", "no:cacheprovider", "-n", "2", "--dist", "load",
                             str(REPO / "tests" / "suites" / "suite_busy_guests.py"),
                             "--lab-config", str(make_lab_yaml()), "--lab-report-dir",
                             str(tmp_path / "run")], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while len(running_qemus() - qemus_before) < 2:
            assert proc.poll() is None, f"the run ended ({proc.returncode}) before 2 guests ran"
            assert time.monotonic() < deadline, "no 2 guests at once within 300 s"
            time.sleep(0.2)
        time.sleep(5)  # both tests in their `sleep 120` (a restore takes 1-3 s)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    killed = time.monotonic()
    while running_qemus() - qemus_before and time.monotonic() - killed < 60:
        time.sleep(0.1)
    took = time.monotonic() - killed
    print(f"QEMUs gone {took:.1f} s after the controller's SIGKILL")
    assert not running_qemus() - qemus_before, "QEMU outlived the killed run by 60 s"
    assert took < 3, f"QEMU outlived the killed run by {took:.1f} s (the target: 2 s)"
    while set(tmp.glob("ringlab-guest-*")) - folders_before and time.monotonic() - killed < 30:
        time.sleep(0.2)
    left = set(tmp.glob("ringlab-guest-*")) - folders_before
    assert not left, f"guest folders left by the killed run: {sorted(map(str, left))}"
