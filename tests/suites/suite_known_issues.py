"""A suite for tests/e2e: a known-issues list (written by the e2e test) bound to the symptom of
check `abi-rule` with `got == 1`: shown (XFAIL), not shown (passes, "not seen"), shown beside a
second failed check or an exception (each must FAIL), and another symptom of the same check."""
from __future__ import annotations

from harness.guest.guest import Guest


def broken(guest: Guest) -> int:
    """Stands for a probe's observation of a kernel that breaks the rule (1, where 0 is right)."""
    return int(guest.run("echo 1").stdout)


def test_symptom_shows(guest: Guest, check) -> None:
    got = broken(guest)
    check("abi-rule", got == 0, f"the rule wants 0, the kernel gave {got}", got=got)


def test_symptom_absent(guest: Guest, check) -> None:
    check("abi-rule", True, "the kernel got fixed", got=0)


def test_symptom_and_another_check(guest: Guest, check) -> None:
    got = broken(guest)
    check("abi-rule", got == 0, f"the rule wants 0, the kernel gave {got}", got=got)
    check("other-rule", False, "a second bug in the same test", got=7)


def test_symptom_and_an_exception(guest: Guest, check) -> None:
    got = broken(guest)
    check("abi-rule", got == 0, f"the rule wants 0, the kernel gave {got}", got=got)
    assert guest.run("false").exit_status == 0, "a second bug: an assertion"


def test_another_symptom_of_the_check(guest: Guest, check) -> None:
    check("abi-rule", False, "the rule wants 0, the kernel gave 2", got=2)
