"""`./lab report`: a known issue's folder, its reproducer built here and run on a kernel with
the bug and one without (issue 30)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900),
              pytest.mark.usefixtures("no_stray_qemu")]


def test_the_double_charge_report_fails_on_7x_passes_on_6_12(tmp_path: Path,
                                                             make_lab_yaml) -> None:
    env = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml()))
    out = tmp_path / "report"
    p = subprocess.run(["./lab", "report", "perf-mmap-second-mapping-charged", "--kernel",
                        "sid-cloud", "--kernel", "trixie-cloud", "--out", str(out),
                        # the tree the kbuild tier fetches anyway
                        "--source", "src-7.2-min"], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=850)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert {"report.txt", "repro.c", "repro.py", "runs.json"} <= {f.name for f in out.iterdir()}
    runs = {r["kernel"]: r for r in json.loads((out / "runs.json").read_text())}
    assert runs["sid-cloud"]["verdict"] == "FAIL", runs["sid-cloud"]
    assert runs["trixie-cloud"]["verdict"] == "PASS", runs["trixie-cloud"]
    text = (out / "report.txt").read_text()
    assert text.startswith("Subject: [BUG] perf/core: ")
    assert 'Fixes: 0c8a4e4139ad ("perf/core: Further simplify perf_mmap()")' in text
    assert "static int perf_mmap_rb(" in text and "FAIL  7.2.13" in text
    assert "perf_mmap_rb() (linux-source-7.2 7.2.13-1):" in text
    assert not (out / "repro").exists(), "the built binary is not part of the report"


def test_an_unknown_issue_is_one_error_naming_the_list(make_lab_yaml) -> None:
    env = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml()))
    p = subprocess.run(["./lab", "report", "no-such-issue"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("lab: error:") == 1, p.stderr
    assert "'no-such-issue' is not an issue of" in p.stderr
    assert "perf-mmap-second-mapping-charged" in p.stderr and "Traceback" not in p.stderr
