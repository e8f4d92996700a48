"""Fixtures shared by the kernel suite."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.boot import splats
from harness.errors import ModuleUnavailable
from harness.boot.guest import Guest
from harness.lab import Lab


@pytest.fixture
def new_splats(guest: Guest) -> Callable[[], list[str]]:
    """Call it to get the titles of the kernel splats logged since this test began: a probe
    that gets the right errno while the kernel WARNs has still found a bug."""
    guest.kmsg()
    start = len(guest.kernel_log)

    def since() -> list[str]:
        guest.kmsg()
        return [s.title for s in splats.find(guest.kernel_log[start:])]
    return since


@pytest.fixture
def test_pmu(guest: Guest, lab: Lab) -> int:
    """The lab's test PMU (kernels/modules/ringlab_aux) built for the guest's kernel and
    loaded; its perf type. Skips with the reason when the lab cannot build modules for this
    kernel; a module that does not build is an error, not a skip."""
    try:
        ko = lab.module("ringlab_aux", guest.kernel.name)
    except ModuleUnavailable as e:
        pytest.skip(f"no test PMU for this kernel: {e.message}")
    guest.insmod(ko)
    return int(guest.run("cat /sys/bus/event_source/devices/ringlab_aux/type").stdout)
