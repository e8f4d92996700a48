"""`./lab boot --gdb` (issue 30, section 4): QEMU's gdbstub on a loopback port, and the gdb
command the lab prints attaches to the running guest."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300),
              pytest.mark.usefixtures("no_stray_qemu")]

def output_until(proc: subprocess.Popen, marker: str, seconds: float) -> str:
    """What `proc` printed up to the line holding `marker` (or for `seconds`)."""
    assert proc.stdout is not None
    lines, deadline = [], time.monotonic() + seconds
    for line in proc.stdout:
        lines.append(line)
        if marker in line or time.monotonic() > deadline:
            break
    return "".join(lines)



@pytest.mark.skipif(shutil.which("gdb") is None, reason="no gdb on this host (./lab selftest "
                    "installs it)")
def test_the_printed_gdb_command_attaches_to_the_guest(make_lab_yaml) -> None:
    env = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml()))
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "boot", "--gdb"], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        text = output_until(proc, "Ctrl-C stops it", 180)
        m = re.search(r"gdb:\s+gdb .*-ex '(target remote 127\.0\.0\.1:\d+)'", text)
        assert m, text[-2000:]
        gdb = subprocess.run(["gdb", "-batch", "-ex", m.group(1), "-ex", "info registers rip",
                              "-ex", "detach"], capture_output=True, text=True, timeout=120)
        # gdb attached and read the vCPU: where it stopped is the guest's (the kernel's idle
        # loop mostly, a user process now and then: rip 0x5308e0 in a cold CI simulation)
        assert re.search(r"^rip\s+0x[0-9a-f]+", gdb.stdout, re.M), gdb.stdout + gdb.stderr
        assert "detached" in gdb.stdout
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0


@pytest.mark.skipif(shutil.which("gdb") is None, reason="no gdb on this host (./lab selftest "
                    "installs it)")
def test_the_first_failing_tests_guest_is_kept_paused_for_gdb(tmp_path: Path,
                                                               make_lab_yaml) -> None:
    argv = [sys.executable, "-m", "pytest", "-p", "harness.pytest_plugin", "-p",
            "no:cacheprovider", str(REPO / "tests" / "suites" / "suite_gdb_on_failure.py"),
            "--lab-config", str(make_lab_yaml()), "--lab-report-dir", str(tmp_path / "run"),
            "--gdb-on-failure"]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        text = output_until(proc, "Ctrl-C (or SIGTERM) stops it", 240)
        assert "the guest of tests/suites/suite_gdb_on_failure.py::test_b_fails_leaving_a_mark" \
            " is paused" in text, text[-3000:]
        m = re.search(r"gdb:\s+gdb .*-ex '(target remote 127\.0\.0\.1:\d+)'", text)
        assert m, text[-3000:]
        ssh = re.search(r"(ssh -p \d+ -i \S+) -o HostKeyAlias=ringlab-guest root@127\.0\.0\.1",
                        text)
        assert ssh, text[-3000:]
        ssh_argv = ssh.group(1).split() + ["-o", "StrictHostKeyChecking=no", "-o",
                                           "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
                                           "-o", "ConnectTimeout=5", "root@127.0.0.1"]
        paused = subprocess.run(ssh_argv + ["true"], capture_output=True, text=True, timeout=60)
        assert paused.returncode != 0, "a paused guest does not answer SSH"
        gdb = subprocess.run(["gdb", "-batch", "-ex", m.group(1), "-ex", "info registers rip",
                              "-ex", "detach"], capture_output=True, text=True, timeout=120)
        # gdb attached and read the vCPU: where it stopped is the guest's (the kernel's idle
        # loop mostly, a user process now and then: rip 0x5308e0 in a cold CI simulation)
        assert re.search(r"^rip\s+0x[0-9a-f]+", gdb.stdout, re.M), gdb.stdout + gdb.stderr
        # Detached, the guest runs again: the one the failing test left, its mark still there.
        mark = subprocess.run(ssh_argv + ["cat", "/dev/shm/mark"], capture_output=True,
                              text=True, timeout=120)
        assert mark.stdout.strip() == "ringlab-gdb-mark", mark.stdout + mark.stderr
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=90)
    text += out
    assert proc.returncode == 1, text[-3000:]  # a test failed: not an interrupted run
    assert "1 failed, 1 passed" in text and "test_c_never_runs" not in text, text[-3000:]


@pytest.mark.skipif(shutil.which("gdb") is None, reason="no gdb on this host (./lab selftest "
                    "installs it)")
def test_a_debian_kernels_symbols_are_fetched_and_placed_at_its_kaslr_offset(
        make_lab_yaml) -> None:
    env = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml()))
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "boot", "--gdb", "--symbols"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        text = output_until(proc, "Ctrl-C stops it", 280)
        m = re.search(r"gdb:\s+gdb (-ex 'add-symbol-file (\S+)/vmlinux -o 0x[0-9a-f]+') "
                      r"-ex '(target remote 127\.0\.0\.1:\d+)'", text)
        assert m, text[-2000:]
        release = m.group(2).rsplit("/", 1)[-1]
        gdb = subprocess.run(["gdb", "-batch", "-ex", m.group(1).split("'")[1], "-ex",
                              m.group(3), "-ex", "p init_uts_ns.name.release",
                              "-ex", "info symbol $pc", "-ex", "detach"],
                             capture_output=True, text=True, timeout=120)
        # The symbols are the running kernel's: its utsname read through them, $pc named.
        assert f'"{release}"' in gdb.stdout, gdb.stdout + gdb.stderr
        assert re.search(r"^\w+ \+ \d+ in section \.text", gdb.stdout, re.M), gdb.stdout
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
