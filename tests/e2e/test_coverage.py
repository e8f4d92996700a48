"""`./lab coverage` on a real gcov build (slow tier, `-m kbuild`: the variant of lab.yaml's
src-7.2-ringbuf is built, ~22 min cold on 2 cores, the same cache entry `./lab coverage
--kernel src-7.2-ringbuf` uses): one probe's test, and the lines of perf_mmap_rb() it ran
counted in summary.txt, coverage.json and the HTML report."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SRC_72 = yaml.safe_load((REPO / "lab.yaml").read_text())["kernels"]["src-7.2-ringbuf"]["build"]
RINGBUF_72 = {"debian_source": SRC_72["debian_source"],
              "config": {"base": SRC_72["config"]["base"],
                         "fragments": [str(REPO / f) for f in SRC_72["config"]["fragments"]]}}

pytestmark = [pytest.mark.e2e, pytest.mark.kbuild, pytest.mark.usefixtures("no_stray_qemu")]


def test_one_probe_on_the_coverage_variant_counts_perf_mmap_rb(tmp_path: Path,
                                                                make_lab_yaml) -> None:
    cfg = make_lab_yaml(kernels={"src-rb": {"build": RINGBUF_72}})
    env = dict(os.environ, RINGLAB_CONFIG=str(cfg))
    p = subprocess.run(["./lab", "coverage", "--kernel", "src-rb", "-k",
                        "test_control_page_describes_the_mapping"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=3600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    row = next(ln for ln in p.stdout.splitlines() if ln.startswith("perf_mmap_rb "))
    lines_run, lines = map(int, re.search(r"(\d+)/(\d+) \d+/\d+", row).groups())  # type: ignore[union-attr]
    assert 0 < lines_run <= lines, row
    out = Path(re.findall(r"^reports: (\S+)", p.stdout, re.M)[-1])  # the run's own, last
    trace = json.loads((out / "suite" / "coverage.json").read_text())
    core = next(f for f in trace["files"] if f["file"].endswith("kernel/events/core.c"))
    assert any(ln["count"] > 0 for ln in core["lines"] if ln.get("function_name") == "perf_mmap_rb")
    # The counters are the test's, zeroed at hand-out: it maps no AUX area.
    assert all(ln["count"] == 0 for ln in core["lines"]
               if ln.get("function_name") == "perf_mmap_aux")
    assert (out / "suite" / "html" / "index.html").is_file()
    # A Debian kernel: one line, naming a build kernel.
    p = subprocess.run(["./lab", "coverage", "--kernel", "trixie-cloud"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "has no gcov" in p.stderr and "e.g. --kernel src-" in p.stderr, \
        p.stderr
