"""harness/guest/monitor.py: QEMU's monitor (QMP). A connection is retried while QEMU starts and
is an error of the caller's kind, naming the socket, past the deadline; the warm reset sets the
reboot action to reset before the reset (else -no-reboot would end QEMU), and a QEMU refusing a
command is a MonitorError saying which. QMPClient is faked: no QEMU runs."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from qemu.qmp import QMPError

from harness.errors import BootError, GuestHang
from harness.guest import monitor


class FakeQMP:
    """qemu.qmp.QMPClient as the lab uses it: `refusals` connects fail first; `answers` maps a
    command to its return value, or to an exception to raise."""
    made: list[FakeQMP] = []
    refusals = 0
    answers: dict[str, Any] = {}

    def __init__(self, name: str) -> None:
        self.executed: list[tuple[str, dict | None]] = []
        self.attempts = 0
        self.disconnected = False
        FakeQMP.made.append(self)

    async def connect(self, address: str) -> None:
        self.attempts += 1
        if self.attempts <= FakeQMP.refusals:
            raise ConnectionRefusedError(address)

    async def execute(self, cmd: str, arguments: dict | None = None) -> Any:
        self.executed.append((cmd, arguments))
        said = FakeQMP.answers.get(cmd, {})
        if isinstance(said, Exception):
            raise said
        return said

    async def disconnect(self) -> None:
        self.disconnected = True


@pytest.fixture
def qmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The socket's path (there already), with QMPClient faked."""
    monkeypatch.setattr(monitor, "QMPClient", FakeQMP)
    monkeypatch.setattr(FakeQMP, "made", [])
    monkeypatch.setattr(FakeQMP, "refusals", 0)
    monkeypatch.setattr(FakeQMP, "answers", {})
    sock = tmp_path / "qmp.sock"
    sock.touch()
    return sock


def test_the_warm_reset_lets_a_reset_through_then_resets(qmp: Path) -> None:
    monitor.warm_reset(qmp, time.monotonic() + 60)
    [c] = FakeQMP.made
    assert c.executed == [("set-action", {"reboot": "reset"}), ("system_reset", None)]
    assert c.disconnected


def test_after_the_reboot_a_reboot_ends_qemu_again(qmp: Path) -> None:
    monitor.reboot_ends_qemu(qmp, time.monotonic() + 60)
    assert FakeQMP.made[0].executed == [("set-action", {"reboot": "shutdown"})]


def test_a_qemu_still_starting_is_connected_to_on_a_later_attempt(qmp: Path) -> None:
    FakeQMP.refusals = 2
    monitor.reboot_ends_qemu(qmp, time.monotonic() + 60)
    assert FakeQMP.made[0].attempts == 3 and FakeQMP.made[0].executed


def test_a_socket_that_never_answers_is_an_error_naming_it(qmp: Path) -> None:
    FakeQMP.refusals = 10**9
    with pytest.raises(monitor.MonitorError, match=f"QEMU's QMP socket {qmp} did not answer"):
        monitor.warm_reset(qmp, time.monotonic() - 1)
    assert FakeQMP.made[0].executed == []


def test_the_caller_chooses_the_error_of_a_dead_socket(qmp: Path) -> None:
    import asyncio
    FakeQMP.refusals = 10**9

    async def go() -> None:
        async with monitor.connect(qmp, time.monotonic() - 1, error=GuestHang):
            pass
    with pytest.raises(GuestHang, match="did not answer"):
        asyncio.run(go())


def test_a_refused_command_is_a_monitor_error_saying_which(qmp: Path) -> None:
    FakeQMP.answers = {"system_reset": QMPError("machine is gone")}
    with pytest.raises(monitor.MonitorError, match="QEMU refused the warm reset: machine is gone"):
        monitor.warm_reset(qmp, time.monotonic() + 60)
    assert FakeQMP.made[0].disconnected  # the connection is closed whatever happened
    FakeQMP.answers = {"set-action": QMPError("no such action")}
    with pytest.raises(monitor.MonitorError, match="reboot=shutdown: no such action"):
        monitor.reboot_ends_qemu(qmp, time.monotonic() + 60)


def test_a_monitor_error_is_a_boot_error() -> None:
    assert issubclass(monitor.MonitorError, BootError)
