"""--gdb-on-failure: the guest of the first failing test kept, paused, with gdb attachable.

The run stops after that test (its teardown runs as usual, so the lab's own checks of the
guest still hold); at the session's end, before the guests stop, that guest's vCPUs are
stopped and QEMU's gdbstub opened on a loopback port, and the lab waits for Ctrl-C with the
commands to type on stderr: with the kernel's vmlinux (a Debian kernel's from its -dbg
package, fetched once) at the KASLR offset the guest runs at. A test the known issues excuse (XFAIL) is not a failure here.
"""
from __future__ import annotations

import signal
import sys
import time
from collections.abc import Generator
from pathlib import Path

import pytest

from harness.errors import LabError
from harness.guest import gdb
from harness.guest.guest import Guest, free_port
from harness.pytest_plugin.guests import GUEST_KEY, Guests

OPTION = "--gdb-on-failure"


class GdbOnFailure:
    def __init__(self, guests: Guests) -> None:
        self.guests = guests
        self.kept: tuple[str, Guest] | None = None

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: sees the final report
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if self.kept is None and report.when == "call" and report.failed and \
                (g := item.stash.get(GUEST_KEY, None)) is not None:
            self.kept = (item.nodeid, g)
            item.session.shouldfail = f"{OPTION}: {item.nodeid} failed; its guest is kept"
        return report

    @pytest.hookimpl(tryfirst=True)  # before the guests plugin stops every guest
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.kept is None:
            return
        nodeid, g = self.kept
        if (dead := g.health()) is not None:
            print(f"\n{OPTION}: the guest of {nodeid} died ({dead}); nothing to attach to",
                  file=sys.stderr)
            return
        port = free_port()
        try:  # the symbols first (a Debian kernel's -dbg package), while the guest still runs
            vmlinux: Path | None = self.guests.get_pool().lab.debug_vmlinux(g.kernel.name)
        except LabError as e:
            print(f"\n{OPTION}: no symbols for {g.kernel.name}: {e}", file=sys.stderr)
            vmlinux = None
        offset = gdb.kaslr_offset(g, vmlinux) if vmlinux is not None else None
        try:
            gdb.pause_with_gdbstub(g.workdir / "qmp.sock", port)
        except LabError as e:
            print(f"\n{OPTION}: could not pause the guest of {nodeid}: {e}", file=sys.stderr)
            return
        print(f"\n{OPTION}: the guest of {nodeid} is paused ({g.kernel.name}, "
              f"{g.kernel.release}); QEMU's gdbstub on 127.0.0.1:{port}\n"
              + gdb.gdb_help(g.kernel, port, vmlinux, offset)
              + "         (gdb's `continue` or `detach` runs the guest again; then, to look "
              "around:\n"
              f"          ssh -p {g.record.ssh_port} -i {g.plan.key.private} "
              "-o HostKeyAlias=ringlab-guest root@127.0.0.1)\n"
              "Ctrl-C (or SIGTERM) stops it and ends the run.", file=sys.stderr, flush=True)
        previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            while g.vm.alive():
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
