"""Every kind of splat `ringlab_splat` can fire, fired on every x86 kernel line of lab.yaml
(Debian's 6.12.117, sid's 7.2.13, trixie-backports' 7.3.4; the 7.2 build in the kbuild tier):
each fails the test it happened in, with a title that names its kind and site, the same title
on every line (issue 33). And `./lab run` proves it sees this kernel's splats before it judges
anything on it (harness/splat_proof.py)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "tests" / "suites" / "suite_splat_kinds.py"
DEBIAN_X86 = ("trixie-cloud", "sid-cloud", "bpo-cloud")
# The title of each kind: the same on every kernel line (harness/kernellog/splats.py title()).
TITLES = {
    "warn": r"WARNING at \S*ringlab_splat\.c:\d+ ringlab_splat_warn",
    "bug": r"kernel BUG at \S*ringlab_splat\.c:\d+",
    "null": r"BUG: kernel NULL pointer dereference in fire_null",
    "refcount": r"refcount_t: addition on 0; use-after-free in fire_refcount",
    "list": r"list_add corruption\. next->prev should be prev in fire_list",
    "alloc": r"vmalloc error in fire_alloc",
    "ubsan": r"UBSAN: array-index-out-of-bounds at \S*ringlab_splat\.c:\d+",
    "kasan": r"KASAN: slab-out-of-bounds in fire_kasan",
    "lockdep": r"WARNING: possible circular locking dependency detected",
    "hung": r"INFO: task ringlab_hung blocked in fire_hung",
}
# Kinds every kernel the lab runs must fire: no config option of theirs is optional on a
# kernel with modules (the others need UBSAN_BOUNDS, KASAN, PROVE_LOCKING, DEBUG_LIST).
ALWAYS = ("warn", "bug", "null", "refcount", "alloc", "hung")

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800),
              pytest.mark.usefixtures("no_stray_qemu")]


def fire_every_kind(kernel: str, tmp_path: Path, lab_yaml: Path) -> dict[str, dict]:
    """The splat-kinds suite on `kernel`; its results by kind."""
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "harness.pytest_plugin",
                        "-p", "no:cacheprovider", str(SUITE), "--lab-config", str(lab_yaml),
                        "--kernel", kernel, "--lab-report-dir", str(tmp_path / "run")],
                       cwd=REPO, capture_output=True, text=True, timeout=1700)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    return {re.search(r"\[(\w+)\]", r["test"]).group(1): r  # type: ignore[union-attr]
            for r in summary["results"] if r["outcome"] != "rerun"}


def check_kinds(results: dict[str, dict], build_kernel: bool) -> None:
    assert set(results) == set(TITLES), sorted(results)
    for kind, r in results.items():
        if r["outcome"] == "skipped":
            assert kind not in ALWAYS and "cannot fire" in r["reason"], (kind, r)
            continue
        assert r["outcome"] == "failed", (kind, r["outcome"], r["reason"][:500])
        titles = [s["title"] for s in r.get("splats", [])]
        assert any(re.fullmatch(TITLES[kind], t) for t in titles), (kind, titles, r["reason"])
        assert any(t in r["reason"] for t in titles), (kind, r["reason"][:500])
        if build_kernel:  # a vmlinux to decode with: the frames as file:line
            assert any(s.get("decoded") for s in r["splats"]), (kind, r["splats"][0])
    fired = [k for k, r in results.items() if r["outcome"] == "failed"]
    assert set(ALWAYS) <= set(fired), fired


@pytest.mark.parametrize("kernel", DEBIAN_X86)
def test_every_splat_kind_fails_its_test_with_its_title(kernel: str, tmp_path: Path,
                                                        make_lab_yaml) -> None:
    check_kinds(fire_every_kind(kernel, tmp_path, make_lab_yaml()), build_kernel=False)


@pytest.mark.parametrize("kernel", DEBIAN_X86)
def test_lab_run_proves_it_sees_the_kernels_splats(kernel: str, tmp_path: Path,
                                                   make_lab_yaml) -> None:
    env = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml()))
    p = subprocess.run(["./lab", "run", "--kernel", kernel, "-k",
                        "test_release_is_the_booted_kernel"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=1700)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    run = (tmp_path / "reports" / "latest").resolve()
    header = (run / "summary.txt").read_text().splitlines()[3]
    assert header.startswith("splat detection: proved on this kernel (WARNING at "), header
    assert "ringlab_splat_warn; kernel BUG at " in header, header
    proof = json.loads((run / "splat-proof.json").read_text())
    assert proof["proved"] and proof["release"] and proof["kernel"] == kernel, proof
