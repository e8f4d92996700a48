"""A suite for tests/e2e: one test crashes the guest on its first attempt only, as an emulator
artefact would, another fails its first attempt only (flag files on the host); each passes on
its rerun in a fresh guest, so each is flaky."""
from __future__ import annotations

import os
from pathlib import Path

from harness.boot.guest import Guest


def test_dies_once(guest: Guest) -> None:
    flag = Path(os.environ["RINGLAB_DIES_ONCE_FLAG"])
    if not flag.exists():
        flag.touch()
        guest.run("echo 1 > /proc/sys/kernel/sysrq; echo c > /proc/sysrq-trigger", timeout=120)
    assert guest.run("true").exit_status == 0


def test_fails_once(guest: Guest) -> None:
    flag = Path(os.environ["RINGLAB_DIES_ONCE_FLAG"] + ".failed")
    first = not flag.exists()
    flag.touch()
    assert not first, "fails on the first attempt only"
