"""`./lab run --selftests`: the kernel's own selftests built from its Debian linux-source and
run in the guest, one test per case beside ours (issue 30 §3)."""
from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900),
              pytest.mark.usefixtures("no_stray_qemu")]


def test_kernel_selftests_run_beside_ours_one_test_per_case(tmp_path: Path,
                                                            make_lab_yaml) -> None:
    env = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml()))
    # A harness program (and its AUX variant, which finds the lab's test PMU), an ftracetest
    # case with its instance run, and one of ours in the same run.
    select = ("kselftest and (watermark_signal or aux.map or ringbuffer_size)"
              " or test_page_size_is_read_from_the_guest")
    p = subprocess.run(["./lab", "run", "--kernel", "trixie-cloud", "--selftests", "-k", select,
                        "--", "--basetemp", str(tmp_path / "pytest")], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=850)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    report = Path(next(line.split("reports: ", 1)[1].strip() for line in p.stdout.splitlines()
                       if line.startswith("reports: ")))
    names = {tc.get("name"): tc for tc in ET.parse(report / "junit.xml").iter("testcase")}
    for case in ("perf_events/watermark_signal/global.watermark_signal",
                 "perf_events/mmap/perf_mmap.aux.map", "ftrace/00basic/ringbuffer_size"):
        tc = names[f"test_selftest[{case}]"]
        assert tc.find("failure") is None and tc.find("skipped") is None, ET.tostring(tc)
        assert "ok 1 " in (tc.find("system-out").text or ""), "the program's own KTAP is kept"
    assert "test_page_size_is_read_from_the_guest" in names
    summary = (report / "summary.txt").read_text()
    assert "selftests from" in summary and "linux-source-6.12 6.12.117" in summary, summary
