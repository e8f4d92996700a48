"""A suite for tests/e2e: test_a hangs its 1-CPU guest for good (a CPU spinning with interrupts
off: no console output, no SSH answer, no panic); it must fail within its command timeout,
not the run's, and test_b must pass on a fresh guest."""
from __future__ import annotations

from harness.guest import Guest
from harness.lab import Lab


def test_a_hangs_the_guest(guest: Guest, lab: Lab) -> None:
    guest.insmod(lab.module("ringlab_splat", guest.kernel.name))
    guest.run("echo 1 > /sys/module/ringlab_splat/parameters/hang", timeout=20)


def test_b_gets_a_fresh_guest(guest: Guest) -> None:
    assert guest.run("test -d /sys/module/ringlab_splat").exit_status == 1
