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


@pytest.mark.skipif(shutil.which("gdb") is None, reason="no gdb on this host (./lab selftest "
                    "installs it)")
def test_the_printed_gdb_command_attaches_to_the_guest(make_lab_yaml) -> None:
    env = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml()))
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "boot", "--gdb"], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        lines, deadline = [], time.monotonic() + 180
        for line in proc.stdout:
            lines.append(line)
            if "Ctrl-C stops it" in line or time.monotonic() > deadline:
                break
        text = "".join(lines)
        m = re.search(r"gdb:\s+gdb .*-ex '(target remote 127\.0\.0\.1:\d+)'", text)
        assert m, text[-2000:]
        gdb = subprocess.run(["gdb", "-batch", "-ex", m.group(1), "-ex", "info registers rip",
                              "-ex", "detach"], capture_output=True, text=True, timeout=120)
        assert re.search(r"^rip\s+0xffff[0-9a-f]+", gdb.stdout, re.M), gdb.stdout + gdb.stderr
        assert "detached" in gdb.stdout
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
