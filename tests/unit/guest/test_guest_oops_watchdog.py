"""A command the kernel oopsed under ends within OOPS_GRACE_S of the Oops (issue 31 §4): the
watchdog of a wait raises KernelOops, and only for an Oops since that wait began."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from harness.errors import GuestHang, KernelOops
from harness.guest import guest as guest_mod
from harness.guest.guest import Guest


def _guest(oops: str | None, oops_at: float, health: str | None = None) -> Guest:
    g = object.__new__(Guest)
    g.vm = SimpleNamespace(oops=oops, oops_at=oops_at)  # type: ignore[assignment]
    g.health = lambda: health  # type: ignore[method-assign]
    return g


def test_an_oops_during_the_wait_ends_it_after_the_grace() -> None:
    now = time.monotonic()
    g = _guest("Oops: Oops: 0000 [#1] SMP NOPTI", now - guest_mod.OOPS_GRACE_S - 0.5)
    with pytest.raises(KernelOops, match=r"oopsed .* Oops: Oops: 0000 \[#1\]"):
        g._raise_if_dead(since=now - 10)


def test_an_oops_within_the_grace_lets_the_command_come_back() -> None:
    now = time.monotonic()
    _guest("Oops: Oops: 0000 [#1] SMP", now - 0.5)._raise_if_dead(since=now - 10)


def test_an_oops_before_the_wait_began_is_not_this_commands() -> None:
    now = time.monotonic()
    _guest("Oops: Oops: 0000 [#1] SMP", now - 60)._raise_if_dead(since=now - 1)


def test_a_dead_guest_is_said_first() -> None:
    now = time.monotonic()
    g = _guest("Oops: Oops: 0000 [#1] SMP", now - 60, health="kernel panic: Fatal exception")
    with pytest.raises(GuestHang, match="the guest died: kernel panic") as e:
        g._raise_if_dead(since=now - 100)
    assert not isinstance(e.value, KernelOops)
