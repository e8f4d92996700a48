"""A suite for tests/e2e: test_a makes the kernel printk 100000 lines as fast as the console
takes them, and keeps working with the guest meanwhile. Flood lines are not splats, so the test
passes; the lab must keep answering, cap the console log (machine.console_log_mb) while keeping
the flood's last lines, and run test_b on the same guest."""
from __future__ import annotations

import time

from harness.guest.guest import Guest
from harness.resources import Lab

FLOOD = "/sys/module/ringlab_splat/parameters/flood"
LINES = 100000


def test_a_floods_the_console(guest: Guest, lab: Lab) -> None:
    guest.insmod(lab.module("ringlab_splat", guest.kernel.name))
    guest.run(f"echo {LINES} > {FLOOD}")
    deadline = time.monotonic() + 240
    left = LINES
    commands = 0
    while left > 0:
        assert time.monotonic() < deadline, f"the flood did not end: {left} lines to go"
        left = int(guest.run(f"cat {FLOOD}", timeout=30).stdout)
        result = guest.probe("probe_capabilities", timeout=30)
        assert result.data["paths"]["perf_ring"]["available"]
        commands += 1
    assert commands >= 2, "the flood ended before the guest was put to work during it"


def test_b_same_guest_after_the_flood(guest: Guest) -> None:
    assert guest.run(f"cat {FLOOD}").stdout.strip() == "0"
