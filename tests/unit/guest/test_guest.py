"""Warm reboots: a reset that shows no kernel banner is done again, and a guest whose warm
reboot did not come back is broken though its QEMU runs: health() says so, which makes the
plugin rerun the test on a fresh guest and replace this one (before, the next tests failed
"not connected to the guest")."""
from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.errors import BootTimeout
from harness.guest import guest as guest_mod
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


def test_a_warm_reset_with_no_kernel_banner_is_done_again(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    """Under TCG a reset of a QEMU that booted a nokaslr kernel itself shows nothing; a
    second one boots. One with a banner is not repeated; RESETS bounds the tries."""
    monkeypatch.setattr(guest_mod, "KERNEL_START_S", 0.2)
    monkeypatch.setattr(guest_mod, "_console_note", lambda plan, text: None)
    for banners_at, expected in (([2], 2), ([1], 1), ([], guest_mod.RESETS)):
        resets = []
        vm = SimpleNamespace(kernel_starts=0, exited=threading.Event())

        def reset(sock, deadline, vm=vm, resets=resets, banners_at=banners_at) -> None:
            resets.append(1)
            if len(resets) in banners_at:
                vm.kernel_starts += 1
        monkeypatch.setattr(guest_mod.monitor, "warm_reset", reset)
        g = Guest.__new__(Guest)
        g.vm, g.plan = vm, SimpleNamespace(kernel=SimpleNamespace(name="k"))
        g._reset_until_the_kernel_starts(tmp_path / "qmp.sock", 1e18)
        assert len(resets) == expected, banners_at
