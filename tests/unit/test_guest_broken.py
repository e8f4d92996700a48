"""A guest whose warm reboot did not come back is broken though its QEMU runs: health() says
so, which makes the plugin rerun the test on a fresh guest and replace this one (on a host
loaded fourfold a warm reboot stalled, and the next tests failed "not connected to the guest")."""
from __future__ import annotations

import pytest

from harness.errors import BootTimeout
from harness.guest.guest import Guest


def test_a_warm_reboot_that_does_not_come_back_breaks_the_guest() -> None:
    g = Guest.__new__(Guest)
    g.broken = None

    def stalls(timeout: float) -> float:
        raise BootTimeout("guest stalled: its console was silent for 30 s", "")
    g._warm_reboot = stalls  # type: ignore[method-assign]
    with pytest.raises(BootTimeout):
        g.warm_reboot(timeout=1)
    assert g.health() == "a warm reboot did not come back: guest stalled: its console was " \
                         "silent for 30 s"
