"""A debugger on a guest: QEMU's gdbstub, and what to type to attach gdb to it.

`./lab boot --gdb` starts QEMU with the stub (-gdb); `./lab run --gdb-on-failure` opens one on
a guest already running (HMP `gdbserver`) and pauses it (QMP `stop`), so the guest of the
first failing test stays as the failure left it.
"""
from __future__ import annotations

import asyncio
import re
import subprocess
import time
from pathlib import Path

from qemu.qmp import QMPError

from harness.guest import monitor
from harness.guest.guest import Guest
from harness.kernels.kernel import BootableKernel


def gdb_help(k: BootableKernel, port: int, symbols: Path | None = None,
             offset: int | None = None) -> str:
    """What to type to attach gdb to the guest's gdbstub: with the vmlinux of a build kernel
    (or a Debian kernel's from its -dbg package, `symbols`), moved by the KASLR `offset` the
    guest's kernel runs at, and a build's scripts/gdb helpers (lx-dmesg, lx-lsmod, ...)."""
    target = f"-ex 'target remote 127.0.0.1:{port}'"
    vmlinux = symbols or (k.build_dir / "vmlinux" if k.build_dir else None)
    if vmlinux is None or not vmlinux.exists():
        return (f"  gdb:   gdb {target}\n"
                f"         (no vmlinux here: a Debian kernel's symbols are in its -dbg package, "
                f"linux-image-{k.release}-dbg: `./lab boot --gdb --symbols` fetches it, "
                "~300 MB once)\n")
    if offset:
        load = f"-ex 'add-symbol-file {vmlinux} -o {offset:#x}'"
        where = f"(the kernel runs {offset:#x} above its link address: KASLR)"
    else:
        load = str(vmlinux)
        where = ("(symbols at the link address: the guest said so)" if offset == 0 else
                 "(symbols match the running kernel only with --cmdline nokaslr)")
    helpers = k.build_dir / "vmlinux-gdb.py" if k.build_dir else None
    source = f" -ex 'source {helpers}'" if helpers and helpers.exists() else ""
    hint = "" if source or symbols else " (no vmlinux-gdb.py: CONFIG_GDB_SCRIPTS is off)"
    return f"  gdb:   gdb {load} {target}{source}{hint}\n         {where}\n"


def kaslr_offset(g: Guest, vmlinux: Path) -> int | None:
    """How far the guest's kernel runs from `vmlinux`'s link address: _text in the guest's
    /proc/kallsyms (read as root) less _text in the file; None if either cannot be read."""
    ran = g.run("grep -m1 ' _text$' /proc/kallsyms")
    nm = subprocess.run(["nm", str(vmlinux)], capture_output=True, text=True)
    linked = re.search(r"^([0-9a-f]+) \w _text$", nm.stdout, re.M)
    if ran.exit_status != 0 or not ran.stdout.strip() or linked is None:
        return None
    running = int(ran.stdout.split()[0], 16)
    if running == 0:  # kptr_restrict hid it
        return None
    return running - int(linked.group(1), 16)


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
