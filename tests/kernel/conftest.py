"""Fixtures shared by the kernel suite."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from harness import splats
from harness.guest import Guest


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
