"""A suite for tests/e2e: tests that a known-issues list (written by the e2e test) turns into
xfail, XPASS(strict) and a plain failure, on a real guest."""
from __future__ import annotations

from harness.boot.guest import Guest


def test_breaks_the_abi(guest: Guest) -> None:
    assert guest.run("true").exit_status == 1, "stands for a kernel that breaks an ABI rule"


def test_got_fixed(guest: Guest) -> None:
    assert guest.run("true").exit_status == 0


def test_breaks_it_on_another_kernel(guest: Guest) -> None:
    assert guest.run("true").exit_status == 1, "listed for other kernel versions only"
