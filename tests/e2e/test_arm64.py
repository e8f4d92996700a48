"""An arm64 guest end to end (issue 16): Debian's 16 KiB-page arm64 kernel under
qemu-system-aarch64 (TCG), its rootfs built through qemu-user, a few tests whose expected
values follow the guest's page size. 16 KiB rather than 4 KiB: a rule that silently assumes
4096 fails here and nowhere on x86."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KERNEL = "trixie-arm64-16k"
TESTS = ("test_release_is_the_booted_kernel", "test_page_size_is_read_from_the_guest",
         "test_perf_ring_buffer_maps_control_and_data_page",
         "test_mmap_length_must_be_one_plus_power_of_two_pages")

pytestmark = [pytest.mark.e2e, pytest.mark.foreign_arch, pytest.mark.timeout(2400),
              pytest.mark.usefixtures("no_stray_qemu")]


def test_a_16k_arm64_kernel_runs_page_size_rules(tmp_path: Path, make_lab_yaml) -> None:
    # Booted, not restored: the check below reads the boot's own console output, which a guest
    # restored from the snapshot a previous run saved never prints.
    env = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml()), RINGLAB_NO_SNAPSHOT="1")
    # One guest (-j 1): every guest boots here, and arm64 boots are whole-system TCG.
    p = subprocess.run(["./lab", "run", "-j", "1", "--kernel", KERNEL, "-k", " or ".join(TESTS)],
                       cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=2300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    run = next((tmp_path / "reports").glob(f"*-{KERNEL}"))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["arch"] == "arm64", summary["arch"]
    assert summary["counts"] == {"passed": len(TESTS)}, summary["counts"]
    assert summary["release"].endswith("-arm64-16k"), summary["release"]
    # The console is the PL011's.
    console = (run / f"console-{KERNEL}.log").read_text(errors="replace")
    assert "ttyAMA0" in console, console[-2000:]
