"""Nothing left behind (issue 31, section 5): `./lab boot --detach` returns with its guest up,
`./lab ssh` reaches it, `./lab boot --stop` leaves no QEMU and no folder; and the folder of a
lab killed with SIGKILL is removed by the next `./lab gc`."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.guest import kept, workdir
from harness.resources import Lab

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600),
              pytest.mark.usefixtures("no_stray_qemu")]


def lab_cli(env: dict[str, str], *argv: str, timeout: float = 300
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *argv], cwd=REPO, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


def guest_folders(tmp: Path) -> set[Path]:
    return set(tmp.glob(f"{workdir.PREFIX}*"))


@pytest.fixture
def env(make_lab_yaml, lab: Lab):
    """The environment of a `./lab` this test starts; one `./lab boot` guest is up at a time
    on a cache (its state file), so a developer's is not stopped by this test."""
    if (up := kept.running(lab.layout)) is not None:
        pytest.skip(f"a guest of ./lab boot is up on this host (lab pid {up.pid})")
    e = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml()))
    yield e
    if (left := kept.running(lab.layout)) is not None and left.detached:
        lab_cli(e, "boot", "--stop")


def test_detach_ssh_and_stop_leave_nothing(env, private_tmpdir: Path, running_qemus) -> None:
    before, folders_before = running_qemus(), guest_folders(private_tmpdir)
    up = lab_cli(env, "boot", "--detach")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "shell: ./lab ssh" in up.stdout and "./lab boot --stop" in up.stdout, up.stdout
    # The caller is gone and the guest is up: its QEMU, its folder, reachable over SSH.
    assert running_qemus() - before, "no QEMU after ./lab boot --detach returned"
    assert len(guest_folders(private_tmpdir) - folders_before) == 1
    ssh = lab_cli(env, "ssh", "--", "true", timeout=120)
    assert ssh.returncode == 0, ssh.stdout + ssh.stderr
    assert "throw-away" not in ssh.stderr  # the detached guest answered, not a new one
    stop = lab_cli(env, "boot", "--stop", timeout=120)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert "stopped the guest" in stop.stdout
    assert not running_qemus() - before
    assert guest_folders(private_tmpdir) == folders_before
    again = lab_cli(env, "boot", "--stop", timeout=60)
    assert again.returncode == 2
    assert again.stderr.startswith("lab: error: no guest of ./lab boot is up"), again.stderr


def test_the_folder_of_a_sigkilled_lab_goes_at_the_next_lab_gc(
        env, private_tmpdir: Path, tmp_path: Path, running_qemus) -> None:
    before, folders_before = running_qemus(), guest_folders(private_tmpdir)
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "boot"], cwd=REPO, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 300
        for line in proc.stdout:
            if "Ctrl-C stops it" in line or time.monotonic() > deadline:
                break
        assert proc.poll() is None, "./lab boot ended before its guest was up"
        (left,) = guest_folders(private_tmpdir) - folders_before
    finally:
        proc.kill()  # SIGKILL: no cleanup code runs
        proc.wait()
    deadline = time.monotonic() + 10
    while running_qemus() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not running_qemus() - before, "QEMU outlived its lab"
    assert left.is_dir(), "the killed lab's guest folder is the one the sweep must remove"
    # An empty cache of its own: this gc removes nothing of the developer's cache.
    gc = lab_cli(dict(env, RINGLAB_CACHE=str(tmp_path / "cache")), "gc", timeout=60)
    assert gc.returncode == 0, gc.stdout + gc.stderr
    assert f"removed guest folder {left}: its lab (pid {proc.pid}) and its QEMU are gone" \
        in gc.stdout, gc.stdout
    assert not left.exists()
