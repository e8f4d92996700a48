"""A debugger on a guest: QEMU's gdbstub, and what to type to attach gdb to it.

`./lab boot --gdb` starts QEMU with the stub (-gdb); `./lab run --gdb-on-failure` opens one on
a guest already running (HMP `gdbserver`) and pauses it (QMP `stop`), so the guest of the
first failing test stays as the failure left it.
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

from qemu.qmp import QMPError

from harness.guest import monitor
from harness.kernels.kernel import BootableKernel


def gdb_help(k: BootableKernel, port: int) -> str:
    """What to type to attach gdb to the guest's gdbstub: with the vmlinux of a build kernel
    and its scripts/gdb helpers (lx-dmesg, lx-lsmod, lx-symbols) where the build made them."""
    target = f"-ex 'target remote 127.0.0.1:{port}'"
    vmlinux = k.build_dir / "vmlinux" if k.build_dir else None
    if vmlinux is None or not vmlinux.exists():
        return (f"  gdb:   gdb {target}\n"
                f"         (no vmlinux here: a Debian kernel's symbols are in its -dbg package, "
                f"linux-image-{k.release}-dbg, /usr/lib/debug/boot/vmlinux-{k.release})\n")
    helpers = k.build_dir / "vmlinux-gdb.py" if k.build_dir else None
    source = f" -ex 'source {helpers}'" if helpers and helpers.exists() else ""
    hint = "" if source else " (no vmlinux-gdb.py: CONFIG_GDB_SCRIPTS is off)"
    return (f"  gdb:   gdb {vmlinux} {target}{source}{hint}\n"
            f"         (symbols match the running kernel only with --cmdline nokaslr)\n")


def pause_with_gdbstub(qmp_socket: Path, port: int, timeout: float = 10.0) -> None:
    """Stop the guest's vCPUs and open QEMU's gdbstub on 127.0.0.1:port."""
    async def go() -> None:
        async with monitor.connect(qmp_socket, time.monotonic() + timeout) as qmp:
            await qmp.execute("stop")
            said = await qmp.execute("human-monitor-command",
                                     {"command-line": f"gdbserver tcp:127.0.0.1:{port}"})
            if "Waiting for gdb connection" not in str(said):
                raise monitor.MonitorError(f"QEMU's gdbserver did not start: {said}")
    try:
        asyncio.run(go())
    except QMPError as e:
        raise monitor.MonitorError(f"QEMU refused to pause for gdb: {e}") from None
