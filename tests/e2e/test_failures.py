"""Guests that fail in each way the issue names: a distinct, clear error, and no QEMU left."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import config
from harness.errors import BootPanic, BootTimeout, SSHError
from harness.guest import accel
from harness.resources import Lab

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_stray_qemu")]


def test_kernel_panic_at_boot(tmp_path: Path, make_lab_yaml) -> None:
    lab = Lab(config.load(make_lab_yaml()))
    with pytest.raises(BootPanic) as e:
        lab.boot(None, tmp_path / "console.log", cmdline="rdinit=/bin/busybox")
    assert "panicked during boot" in e.value.message
    assert "Attempted to kill init" in e.value.message
    # Under TCG a boot panic is rerun once in a fresh guest before it is reported.
    if lab.accel(lab.kernel(None))[0] == "tcg":
        assert "again on a rerun in a fresh guest" in e.value.message
        assert (tmp_path / "console.log").read_text().count("==== ringlab: boot") == 2
    assert "Kernel panic" in e.value.console_tail


def test_boot_timeout_shows_last_console_lines(tmp_path: Path, make_lab_yaml) -> None:
    lab = Lab(config.load(make_lab_yaml(machine={"boot_timeout_s": 15})))
    start = time.monotonic()
    with pytest.raises(BootTimeout) as e:
        # init becomes `busybox sleep 3600`: the guest boots but never gets ready.
        lab.boot(None, tmp_path / "console.log", cmdline="rdinit=/bin/busybox -- sleep 3600")
    assert time.monotonic() - start < 30
    assert "not ready within 15 s" in e.value.message
    assert "Run /bin/busybox as init process" in e.value.console_tail


def test_ssh_that_never_comes_up(tmp_path: Path, make_lab_yaml) -> None:
    lab = Lab(config.load(make_lab_yaml(machine={"boot_timeout_s": 25})))
    start = time.monotonic()
    with pytest.raises(SSHError, match="no SSH answer from the guest"):
        lab.boot(None, tmp_path / "console.log", cmdline="ringlab.sshd=off")
    assert time.monotonic() - start < 40


@pytest.fixture
def boot_cli(make_lab_yaml):
    """Start `./lab boot` and return once its guest is up; always reaped, even on failure."""
    procs: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        env = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml()))
        # Started with SIGINT ignored, as a background job of a script is: Ctrl-C (SIGINT)
        # must stop the lab all the same (it once hung here, on CI runners started that way).
        proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "boot"], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        procs.append(proc)
        deadline = time.monotonic() + 180
        assert proc.stdout is not None
        for line in proc.stdout:
            if "Ctrl-C stops it" in line:
                return proc
            assert time.monotonic() < deadline, "guest did not come up"
        raise AssertionError(f"./lab boot exited early with {proc.wait()}")

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_ctrl_c_stops_the_guest(boot_cli, running_qemus) -> None:
    before = running_qemus()
    proc = boot_cli()
    assert running_qemus() - before, "no QEMU while the guest is up"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    assert not running_qemus() - before


def test_killed_harness_takes_qemu_with_it(boot_cli, running_qemus) -> None:
    before = running_qemus()
    proc = boot_cli()
    proc.kill()  # SIGKILL: no cleanup code runs; PR_SET_PDEATHSIG must do it
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while running_qemus() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not running_qemus() - before


def test_kvm_check_is_bounded_and_remembered(tmp_path: Path) -> None:
    lab = Lab(config.load(REPO / "lab.yaml"))
    k = lab.kernel(None)
    start = time.monotonic()
    works, why = accel.check_kvm(k, tmp_path, timeout_s=20)
    assert time.monotonic() - start < 30 and why
    # The verdict is written once per host and reused: no second check.
    first = accel.choose("auto", k, tmp_path)
    verdict = next((tmp_path / "hosts").glob("*-kvm.json"))
    stamp = verdict.stat().st_mtime_ns
    assert accel.choose("auto", k, tmp_path) == first
    assert verdict.stat().st_mtime_ns == stamp
    assert first[0] == ("kvm" if works else "tcg")


def test_stalled_boot_is_detected_early_and_retried_once(tmp_path: Path, make_lab_yaml,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    lab = Lab(config.load(make_lab_yaml(machine={"boot_timeout_s": 300})))
    start = time.monotonic()
    with pytest.raises(BootTimeout, match="guest stalled: its console was silent"):
        lab.boot(None, tmp_path / "console.log", cmdline="rdinit=/bin/busybox -- sleep 3600")
    took = time.monotonic() - start
    # Each attempt that stalls costs ~5 s of boot + 30 s of silence; the first attempt may
    # instead die of a TCG artefact (a double fault was seen in CI), which is retried too.
    # Either way the verdict comes far below the 300 s boot timeout.
    stalls = 1 + ("retrying once" in caplog.text and "stalled" in caplog.text.split("retrying once")[0])
    assert 30 * stalls < took < 150
    assert "retrying once in a fresh guest" in caplog.text
    assert (tmp_path / "console.log").read_text().count("==== ringlab: boot") == 2
