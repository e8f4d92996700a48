"""A suite for tests/e2e (issue 23 §1): a test's reason is its own. A fixture changes a perf
sysctl and puts it back in its teardown while the test fails an assertion: the guest must not
be judged (and stopped) before that teardown, so the reason stays the assertion and the guest
is kept. A test that leaves the sysctl changed after its teardown gets its guest replaced. A
fixture whose teardown fails after the test failed adds a second failure, never a new first."""
from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from harness.guest.guest import Guest

PARANOID = "/proc/sys/kernel/perf_event_paranoid"
MLOCK = "/proc/sys/kernel/perf_event_mlock_kb"


def write(guest: Guest, path: str, value: str) -> None:
    r = guest.run(f"echo {value} > {path}")
    assert r.exit_status == 0, f"cannot write {value} to {path}: {r.stderr}"


@pytest.fixture
def paranoid(guest: Guest) -> Iterator[Callable[[str], None]]:
    """As tests/kernel/test_perf_ring.py's: set perf_event_paranoid, put it back after."""
    before = guest.run(f"cat {PARANOID}").stdout.strip()
    yield lambda value: write(guest, PARANOID, value)
    write(guest, PARANOID, before)


@pytest.fixture
def teardown_fails(guest: Guest) -> Iterator[Guest]:
    yield guest
    raise AssertionError("the fixture's teardown failed too")


def test_a_fails_while_a_fixture_holds_a_sysctl(guest: Guest, paranoid) -> None:
    before = guest.run(f"cat {PARANOID}").stdout.strip()
    paranoid("1" if before == "2" else "2")
    assert guest.run(f"cat {PARANOID}").stdout.strip() != before
    assert False, "the test's own failure"


def test_b_leaves_a_sysctl_changed(guest: Guest) -> None:
    write(guest, MLOCK, "1024")
    assert False, "fails and leaves perf_event_mlock_kb changed"


def test_c_fails_then_its_teardown_fails(teardown_fails: Guest) -> None:
    assert teardown_fails.run("true").exit_status == 0
    assert False, "the first failure"


def test_d_passes_then_its_teardown_fails(teardown_fails: Guest) -> None:
    assert teardown_fails.run("true").exit_status == 0


def test_e_after(guest: Guest) -> None:
    assert guest.run(f"cat {MLOCK}").stdout.strip() != "1024", "a changed guest was kept"
