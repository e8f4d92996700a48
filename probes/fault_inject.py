"""Allocation failures on demand: make the Nth allocation of one system call fail, for every N
until the call no longer reaches N, the way syzkaller's fail_nth does. Stdlib only: this runs
in the guest.

The kernel side is the fault-injection framework (Documentation/fault-injection/
fault-injection.rst): writing N to /proc/thread-self/fail-nth makes the Nth call of this
thread to a fault-injection point (a slab allocation with CONFIG_FAILSLAB, a page allocation
with CONFIG_FAIL_PAGE_ALLOC) fail; reading it back gives what is left of N, 0 once the failure
was injected. The debugfs knobs are set first: by default failslab and fail_page_alloc skip
allocations that may sleep (ignore-gfp-wait) and page allocations below order 1 (min-order),
which are nearly all of the ones the mapping paths make, and they print a stack trace for each
injected failure (verbose=2), which a splat reader would take for a kernel bug.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import probelib

FAIL_NTH = "/proc/thread-self/fail-nth"
DEBUGFS = "/sys/kernel/debug"
# knob -> value, for failslab and fail_page_alloc (fault-injection.rst, "debugfs entries")
KNOBS = {
    "failslab": {"ignore-gfp-wait": "N", "verbose": "0"},
    "fail_page_alloc": {"ignore-gfp-wait": "N", "ignore-gfp-highmem": "N", "min-order": "0",
                        "verbose": "0"},
}
# More allocations than any one mapping call makes; a sweep that gets here is itself a finding.
LIMIT = 400
T = TypeVar("T")


def prepare() -> list[str]:
    """Check the kernel can inject and turn the knobs: the points named in KNOBS it has
    (raises probelib.Skip with the exact reason when it cannot)."""
    if not os.path.exists(FAIL_NTH):
        raise probelib.Skip(f"kernel has no {FAIL_NTH} (CONFIG_FAULT_INJECTION is off)")
    if not os.path.isdir(f"{DEBUGFS}/failslab") and not os.path.isdir(
            f"{DEBUGFS}/fail_page_alloc"):
        raise probelib.Skip(f"kernel has neither {DEBUGFS}/failslab nor fail_page_alloc "
                            "(CONFIG_FAULT_INJECTION_DEBUG_FS with CONFIG_FAILSLAB or "
                            "CONFIG_FAIL_PAGE_ALLOC is off)")
    points = []
    for point, knobs in KNOBS.items():
        if not os.path.isdir(f"{DEBUGFS}/{point}"):
            continue
        for knob, value in knobs.items():
            with open(f"{DEBUGFS}/{point}/{knob}", "w") as f:
                f.write(value)
        points.append(point)
    return points


@dataclass
class Attempt:
    """The call with its Nth allocation failing: what it returned ('ok' or an errno name),
    whether the failure was injected (False: the call made fewer than N allocations), and what
    the check's judge saw afterwards."""
    nth: int
    outcome: str
    injected: bool
    after: dict

    def as_dict(self) -> dict:
        return {"nth": self.nth, "outcome": self.outcome, "injected": self.injected,
                **self.after}


class FailNth:
    """/proc/thread-self/fail-nth, opened once so that arming it costs one write and no
    allocation between the arming and the call under test."""

    def __init__(self) -> None:
        self.fd = os.open(FAIL_NTH, os.O_RDWR)

    def arm(self, nth: int) -> None:
        os.pwrite(self.fd, str(nth).encode(), 0)

    def disarm(self) -> bool:
        """Disarm; whether the failure was injected (what was left of N is 0)."""
        left = int(os.pread(self.fd, 32, 0) or b"0")
        os.pwrite(self.fd, b"0", 0)
        return left == 0

    def close(self) -> None:
        os.close(self.fd)


def sweep(setup: Callable[[], T], call: Callable[[T], object], judge: Callable[[T, str], dict],
          limit: int = LIMIT) -> list[Attempt]:
    """call(setup()) with its 1st, 2nd, ... allocation failing, until one that makes fewer
    than N allocations (the last attempt, not injected) or `limit`. fail-nth is armed after
    setup() and disarmed as soon as call() returns; call() raises OSError on a refusal.
    judge(state, outcome) runs with injection off: it says what it saw and undoes what setup()
    and call() made."""
    fail = FailNth()
    attempts = []
    try:
        for nth in range(1, limit + 1):
            state = setup()
            fail.arm(nth)
            try:
                call(state)
                outcome = "ok"
            except OSError as e:
                outcome = probelib.errname(e)
            finally:
                injected = fail.disarm()
            attempts.append(Attempt(nth, outcome, injected, judge(state, outcome)))
            if not injected:
                break
    finally:
        fail.close()
    return attempts


def summary(attempts: list[Attempt]) -> dict:
    """The sweep as a probe answers it: every attempt, and how many were injected."""
    return {"attempts": [a.as_dict() for a in attempts],
            "injected": sum(a.injected for a in attempts),
            "completed": bool(attempts) and not attempts[-1].injected}
