"""A suite for tests/e2e: real kernel WARNINGs from kernels/modules/ringlab_splat: one during a
test whose assertions pass (it must fail), one in a fixture's teardown and one from deferred
work a second after the test returned (each fails the test that caused it, "after the test
returned"), and tests around them that must stay green."""
from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from harness.guest.guest import Guest
from harness.resources import Lab

WARN = "echo 1 > /sys/module/ringlab_splat/parameters/warn"


@pytest.fixture
def splat_module(guest: Guest, lab: Lab) -> Guest:
    guest.insmod(lab.module("ringlab_splat", guest.kernel.name))
    return guest


@pytest.fixture
def warns_after(splat_module: Guest) -> Iterator[Guest]:
    yield splat_module
    splat_module.run(WARN)


def test_a_clean(guest: Guest) -> None:
    assert guest.run("true").exit_status == 0


def test_b_warns(splat_module: Guest) -> None:
    assert splat_module.run(WARN).exit_status == 0  # passes; the kernel's WARNING must not


def test_c_warns_in_teardown(warns_after: Guest) -> None:
    assert warns_after.run("true").exit_status == 0


def test_d_warns_from_deferred_work(splat_module: Guest) -> None:
    cmd = "echo 1500 > /sys/module/ringlab_splat/parameters/warn_later"
    assert splat_module.run(cmd).exit_status == 0  # the WARNING comes after the test returned


def test_e_no_guest() -> None:
    time.sleep(3)  # the deferred WARNING lands while no test uses the guest


def test_f_after(guest: Guest) -> None:
    assert guest.run("true").exit_status == 0
