"""harness/lifetime.py: a child armed with PR_SET_PDEATHSIG goes when its parent goes, also
when the parent went before it asked (an xdist worker whose lab was killed while it started)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from harness import paths

# The child: arms itself, says so, then waits far longer than the test does.
CHILD = ("import signal, sys, time; from harness import lifetime; "
         "time.sleep(float(sys.argv[1])); "
         "lifetime.die_with_parent_now(signal.SIGTERM, int(sys.argv[2])); "
         "print('armed', flush=True); time.sleep(60)")
# The parent: starts the child, prints its pid, and leaves without waiting for it.
PARENT = ("import subprocess, sys, os; p = subprocess.Popen([sys.executable, '-c', sys.argv[1], "
          "sys.argv[2], str(os.getpid())], stdout=open(sys.argv[3], 'w'), stderr=subprocess.DEVNULL); "
          "print(p.pid, flush=True); "
          "sys.argv[2] == '0' and __import__('time').sleep(1); os._exit(0)")


def _gone(pid: int, within_s: float) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def _orphan(tmp_path: Path, delay_s: str) -> tuple[int, Path]:
    out = tmp_path / "child.out"
    p = subprocess.run([sys.executable, "-c", PARENT, CHILD, delay_s, str(out)], cwd=paths.REPO,
                       capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONPATH": str(paths.REPO)})
    return int(p.stdout), out


def test_a_child_goes_with_its_parent(tmp_path: Path) -> None:
    pid, out = _orphan(tmp_path, "0")   # armed while the parent still waits a second
    try:
        assert _gone(pid, 10), "the child outlived its parent"
        assert out.read_text() == "armed\n"
    finally:
        _kill(pid)


def test_a_child_whose_parent_went_first_goes_when_it_asks(tmp_path: Path) -> None:
    pid, out = _orphan(tmp_path, "0.5")  # the parent is gone before the child arms itself
    try:
        assert _gone(pid, 10), "the child outlived its parent"
        assert out.read_text() == "", "it went at once, before saying it was armed"
    finally:
        _kill(pid)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
