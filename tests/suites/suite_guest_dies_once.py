"""A suite for tests/e2e: one test loses its guest on the first attempt only, as an emulator
artefact would (QEMU killed from the host: no kernel splat), another fails its first attempt
only (flag files on the host). The first is rerun in a fresh guest and passes; the second is
an assertion failure: never rerun unless the user asks for --reruns, then flaky."""
from __future__ import annotations

import os
import signal
from pathlib import Path

from harness.guest.guest import Guest


def test_dies_once(guest: Guest) -> None:
    flag = Path(os.environ["RINGLAB_DIES_ONCE_FLAG"])
    if not flag.exists():
        flag.touch()
        os.kill(guest.vm.pid, signal.SIGKILL)
    assert guest.run("true").exit_status == 0


def test_fails_once(guest: Guest) -> None:
    flag = Path(os.environ["RINGLAB_DIES_ONCE_FLAG"] + ".failed")
    first = not flag.exists()
    flag.touch()
    assert not first, "fails on the first attempt only"
