"""A suite for tests/e2e: its test crashes the guest on the first attempt only (the flag file
lives on the host), as an emulator artefact would; the rerun in a fresh guest passes."""
from __future__ import annotations

import os
from pathlib import Path

from harness.guest import Guest


def test_dies_once(guest: Guest) -> None:
    flag = Path(os.environ["RINGLAB_DIES_ONCE_FLAG"])
    if not flag.exists():
        flag.touch()
        guest.run("echo 1 > /proc/sys/kernel/sysrq; echo c > /proc/sysrq-trigger", timeout=120)
    assert guest.run("true").exit_status == 0
