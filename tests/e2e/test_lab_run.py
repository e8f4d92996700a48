"""`./lab run` and the pytest plugin, as a user runs them."""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_stray_qemu")]


def _cases(junit: Path) -> dict[str, ET.Element]:
    return {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}


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
    assert "ringlab: ready" in (run_dir / "console-trixie-cloud.log").read_text()


def test_guest_crash_fails_that_test_and_the_run_goes_on(tmp_path: Path, make_lab_yaml) -> None:
    junit = tmp_path / "junit.xml"
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "harness.pytest_plugin",
                        "-p", "no:cacheprovider", str(REPO / "tests" / "suites" / "suite_guest_crash.py"),
                        "--lab-config", str(make_lab_yaml()), "--lab-report-dir",
                        str(tmp_path / "run"), "--junitxml", str(junit),
                        "-o", "junit_logging=system-out"],
                       cwd=REPO, capture_output=True, text=True, timeout=900)
    assert p.returncode == 1, p.stdout[-3000:]
    cases = _cases(junit)
    a, b, c = (cases[f"test_{x}"] for x in ("a_logs_to_dmesg", "b_crashes_the_guest",
                                            "c_gets_a_fresh_guest"))
    assert a.find("failure") is None and "ringlab-dmesg-marker" in ET.tostring(a, "unicode")
    failure = b.find("failure")
    assert failure is not None
    text = failure.get("message", "") + (failure.text or "")
    assert "the guest died during this test" in text and "sysrq" in text.lower()
    assert c.find("failure") is None and c.find("error") is None
    summary = (tmp_path / "run" / "summary.json").read_text()
    assert '"cpus": 1' in summary and summary.count('"boot_s"') == 2
