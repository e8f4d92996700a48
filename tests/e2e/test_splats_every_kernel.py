"""Every kind of splat `ringlab_splat` can fire, fired on every x86 kernel line of lab.yaml
(Debian's 6.12.117, sid's 7.2.13, trixie-backports' 7.3.4, experimental's 7.3~rc7; the 7.2
build in the kbuild tier): each fails the test it happened in, with a title that names its kind and site, the same title
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
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suites"))
from suite_splat_kinds import ALWAYS, TITLES  # noqa: E402  (the kinds and their titles)

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "tests" / "suites" / "suite_splat_kinds.py"
DEBIAN_X86 = ("trixie-cloud", "sid-cloud", "bpo-cloud", "exp-cloud")
# The 7.2 build of the e2e tier: sid's linux-source-7.2 as src-7.2-min pins it, tinyconfig +
# minimal.config (what a bisect step builds) + line-number debug info to decode frames with.
SRC_72 = yaml.safe_load((REPO / "lab.yaml").read_text())["kernels"]["src-7.2-min"]["build"]
BUILD_72 = {"debian_source": SRC_72["debian_source"],
            "config": {"base": "tinyconfig", "fragments": [
                str(REPO / "kernels/fragments/minimal.config"),
                str(REPO / "kernels/fragments/debuginfo.config")]}}

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800),
              pytest.mark.usefixtures("no_stray_qemu")]


def fire_every_kind(kernel: str, tmp_path: Path, lab_yaml: Path, *only: str
                    ) -> dict[str, dict]:
    """The splat-kinds suite on `kernel` (only these kinds, if any); its results by kind."""
    select = ["-k", " or ".join(f"[{k}]" for k in only)] if only else []
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "harness.pytest_plugin",
                        "-p", "no:cacheprovider", str(SUITE), "--lab-config", str(lab_yaml),
                        "--kernel", kernel, "--lab-report-dir", str(tmp_path / "run"),
                        *select], cwd=REPO, capture_output=True, text=True, timeout=1700)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    return {re.search(r"\[(\w+)\]", r["test"]).group(1): r  # type: ignore[union-attr]
            for r in summary["results"] if r["outcome"] != "rerun"}


def check_kinds(results: dict[str, dict], build_kernel: bool,
                required: tuple[str, ...] = ALWAYS) -> None:
    """Each kind fired failed its test with its title (decoded on a build kernel); a kind not
    fired was skipped because the kernel cannot report it, and is not one it must."""
    assert set(required) <= set(results), sorted(results)
    for kind, r in results.items():
        if r["outcome"] == "skipped":
            assert kind not in required and "cannot fire" in r["reason"], (kind, r)
            continue
        assert r["outcome"] == "failed", (kind, r["outcome"], r["reason"][:500])
        titles = [s["title"] for s in r.get("splats", [])]
        assert any(re.fullmatch(TITLES[kind], t) for t in titles), (kind, titles, r["reason"])
        assert any(t in r["reason"] for t in titles), (kind, r["reason"][:500])
        if build_kernel:  # a vmlinux to decode with: the frames as file:line
            assert any(s.get("decoded") for s in r["splats"]), (kind, r["splats"][0])
    fired = [k for k, r in results.items() if r["outcome"] == "failed"]
    assert set(required) <= set(fired), fired


@pytest.mark.parametrize("kernel", DEBIAN_X86)
def test_every_splat_kind_fails_its_test_with_its_title(kernel: str, tmp_path: Path,
                                                        make_lab_yaml) -> None:
    check_kinds(fire_every_kind(kernel, tmp_path, make_lab_yaml()), build_kernel=False)


@pytest.mark.parametrize("kernel", ["trixie-rt", pytest.param(
    "trixie-arm64-16k", marks=pytest.mark.foreign_arch)])
def test_the_oops_kinds_on_preempt_rt_and_arm64_fail_their_tests_with_their_titles(
        kernel: str, tmp_path: Path, make_lab_yaml) -> None:
    """PREEMPT_RT and arm64 print their Oops differently (arm64: "Unable to handle kernel ...",
    "Internal error: Oops", "pc : "); the WARN, the BUG and the NULL dereference, each titled
    as on x86 (every kind of both is in the unit tests' corpus: console-splat-kinds-{rt,arm64})."""
    kinds = ("warn", "bug", "null")
    check_kinds(fire_every_kind(kernel, tmp_path, make_lab_yaml(), *kinds),
                build_kernel=False, required=kinds)


@pytest.mark.parametrize("kernel", ["trixie-cloud", "sid-cloud"])
def test_lab_run_proves_it_sees_the_kernels_splats(kernel: str, tmp_path: Path,
                                                   make_lab_yaml) -> None:
    """The proof `./lab run` makes before it judges a kernel, and what its summary says of it,
    on a 6.12 and a 7.x kernel. That each other line shows its splats is what the tests above
    fire there; the proof's own code does not change with the kernel, and the other two
    kernels' proofs cost 110 s of a cold CI run (docs/contributing.md)."""
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


@pytest.mark.kbuild
def test_every_splat_kind_on_the_7_2_build_fails_its_test_decoded(tmp_path: Path,
                                                                  make_lab_yaml) -> None:
    """The 7.2 tree the lab builds: each splat fails its test with its title, and its frames
    decoded to file:line with the build's vmlinux. A tinyconfig kernel has no hung-task
    detector or list checks: the kinds it must fire are those of the proof and the Oops."""
    cfg = make_lab_yaml(kernels={"src-7.2-splats": {"build": BUILD_72}})
    env = dict(os.environ, RINGLAB_CONFIG=str(cfg))
    p = subprocess.run(["./lab", "build", "--kernel", "src-7.2-splats"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=3000)
    assert p.returncode == 0 and "src-7.2-splats: 7.2." in p.stdout, p.stderr[-3000:]
    results = fire_every_kind("src-7.2-splats", tmp_path, cfg)
    check_kinds(results, build_kernel=True, required=("warn", "bug", "null", "refcount"))
