"""A suite for tests/e2e: two tests, each holding its guest busy for 120 s over SSH, for a
run with two xdist workers that the e2e test kills with SIGKILL while both wait. An xdist
worker only notices its controller is gone between tests: without a death signal of its own
it would keep its guest (and QEMU, and the guest's folder) until the 120 s are over."""
from __future__ import annotations

from harness.guest.guest import Guest


def test_a_waits(guest: Guest) -> None:
    guest.run("echo ringlab-busy-a >/dev/kmsg; sleep 120", timeout=300)


def test_b_waits(guest: Guest) -> None:
    guest.run("echo ringlab-busy-b >/dev/kmsg; sleep 120", timeout=300)
