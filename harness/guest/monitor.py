"""QEMU's monitor (QMP) for the lab: the connection the snapshots and a warm reboot use.

Every guest's QEMU listens on workdir/qmp.sock (harness/guest/qemu.py). The `qemu.qmp`
package (QEMU's own asyncio client) talks to it, one `asyncio.run` per operation.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

from qemu.qmp import QMPClient, QMPError

from harness.errors import BootError


class MonitorError(BootError):
    """QEMU's monitor did not answer, or refused a command."""


@contextlib.asynccontextmanager
async def connect(sock: Path, deadline: float,
                  error: type[BootError] = MonitorError) -> AsyncIterator[QMPClient]:
    """A QMP connection to a QEMU started with -qmp unix:SOCK,server=on,wait=off (retried
    until the socket is there, or `deadline`; then `error`)."""
    client = QMPClient("ringlab")
    while not sock.exists() and time.monotonic() < deadline:  # QEMU is still starting
        await asyncio.sleep(0.01)
    while True:
        try:
            await client.connect(str(sock))
            break
        except (QMPError, OSError):
            if time.monotonic() > deadline:
                raise error(f"QEMU's QMP socket {sock} did not answer") from None
            await asyncio.sleep(0.02)
    try:
        yield client
    finally:
        await client.disconnect()


def warm_reset(sock: Path, deadline: float) -> None:
    """Reset the machine as its reset button would: the CPUs start over at the firmware, which
    loads the same kernel again, and the RAM keeps what it held. The lab's QEMU runs with
    -no-reboot (a reset ends it: a panic must stop the guest), so the reboot action is set to
    `reset` for this one reset; `reboot_ends_qemu()` puts it back once the kernel is up."""
    async def go() -> None:
        async with connect(sock, deadline) as qmp:
            await qmp.execute("set-action", {"reboot": "reset"})
            await qmp.execute("system_reset")
    try:
        asyncio.run(go())
    except QMPError as e:
        raise MonitorError(f"QEMU refused the warm reset: {e}") from None


def reboot_ends_qemu(sock: Path, deadline: float) -> None:
    """A guest reboot (and so a panic, with panic=-1) ends QEMU again, as -no-reboot does."""
    async def go() -> None:
        async with connect(sock, deadline) as qmp:
            await qmp.execute("set-action", {"reboot": "shutdown"})
    try:
        asyncio.run(go())
    except QMPError as e:
        raise MonitorError(f"QEMU refused set-action reboot=shutdown: {e}") from None
