"""A suite for tests/e2e/test_gdb.py: the second test fails after leaving a mark in its guest;
with --gdb-on-failure the run stops there and that guest is kept paused for gdb, so the
third test never runs."""
from __future__ import annotations

from harness.guest.guest import Guest


def test_a_passes(guest: Guest) -> None:
    assert guest.run("true").exit_status == 0


def test_b_fails_leaving_a_mark(guest: Guest) -> None:
    guest.run("echo ringlab-gdb-mark > /dev/shm/mark")
    assert guest.run("cat /dev/shm/mark").stdout.strip() == "something else"


def test_c_never_runs(guest: Guest) -> None:
    assert False, "--gdb-on-failure stops the run at the first failure"
