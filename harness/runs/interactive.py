"""Guests booted for a person rather than for the suite: the one `./lab boot` keeps up until
it is stopped, and the throw-away one `./lab ssh` boots when none is up.

Here, not in the guest layer, because booting takes a Lab (the kernel, the rootfs, the cache
in one session), and the guest layer may not import harness.resources; what needs no Lab (the
state file, the detached lab, --stop) is harness/guest/kept.py."""
from __future__ import annotations

import signal
import subprocess
import sys

from harness import config as lab_config
from harness.config import KernelSpec
from harness.guest import kept
from harness.guest.gdb import gdb_help, kaslr_offset
from harness.guest.guest import Guest, free_port
from harness.resources import Lab

# A command in a throw-away guest: its output comes back when it ends (a shell, for longer work).
COMMAND_TIMEOUT_S = 3600.0


def keep_up(lab: Lab, spec: KernelSpec, opts: kept.BootOptions, detached: bool) -> int:
    """Boot the guest and keep it (kept.keep) until Ctrl-C, SIGTERM (what --stop sends) or
    SIGHUP (the terminal closed), each of which stops it cleanly: QEMU stopped, its folder
    removed. (Not SIG_IGN for SIGHUP, even detached: QEMU would inherit it, and it is stopped
    with SIGHUP.)"""
    signal.signal(signal.SIGHUP, signal.default_int_handler)
    console_log = lab.config.reports_dir / f"boot-{lab_config.file_safe(spec.name)}-console.log"
    gdb_port = free_port() if opts.gdb else None
    with lab.boot(spec.name, console_log, cpus=opts.cpus, cmdline=opts.cmdline or "",
                  gdb_port=gdb_port) as g:
        gdb = gdb_lines(lab, g, gdb_port, opts.symbols) if gdb_port else ""
        return kept.keep(lab.layout, g, spec.name, console_log, gdb, detached)


def gdb_lines(lab: Lab, g: Guest, port: int, symbols: bool) -> str:
    """gdb_help for the guest: with its vmlinux (fetched if asked) moved by its KASLR offset."""
    vmlinux = lab.debug_vmlinux(g.kernel.name) if symbols else (
        g.kernel.build_dir / "vmlinux" if g.kernel.build_dir else None)
    offset = kaslr_offset(g, vmlinux) if vmlinux and vmlinux.exists() else None
    return gdb_help(g.kernel, port, vmlinux if symbols else None, offset)


def shell(lab: Lab, booted: kept.BootedGuest, command: list[str]) -> int:
    """A shell (or `command`) over SSH in the guest `./lab boot` keeps up."""
    return subprocess.call(kept.ssh_argv(lab.layout, booted.port, booted.key, booted.host_key)
                           + command)


def throwaway(lab: Lab, spec: KernelSpec, command: list[str]) -> int:
    """A guest booted for one shell or one command and stopped after it. A command goes
    through the probe runner (no SSH handshake at all); a shell over SSH."""
    console_log = lab.config.reports_dir / f"ssh-{lab_config.file_safe(spec.name)}-console.log"
    with lab.boot(spec.name, console_log) as g:
        if command:
            status, out, err = g.runner.exec(" ".join(command), COMMAND_TIMEOUT_S)
            sys.stdout.write(out)
            sys.stderr.write(err)
            return status
        return subprocess.call(kept.ssh_argv(lab.layout, g.record.ssh_port,
                                             str(g.plan.key.private), g.plan.rootfs.host_key))
