"""`./lab boot`: a guest kept up until Ctrl-C, with what `./lab ssh` needs to reach it."""
from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path

from harness import cache, config as lab_config
from harness.commands import options, run_folder
from harness.guest.gdb import gdb_help, kaslr_offset
from harness.guest.guest import Guest, free_port
from harness.resources import Lab

log = logging.getLogger("ringlab")


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("boot", help="boot a guest and keep it until Ctrl-C",
                       description=main.__doc__)
    options.kernel(b)
    b.add_argument("--cpus", type=int, help="vCPUs (default: machine.cpus)")
    b.add_argument("--cmdline", help="extra kernel command line")
    b.add_argument("--refresh", action="store_true", help="look for a newer kernel package")
    b.add_argument("--gdb", action="store_true", help="QEMU's gdbstub on a loopback port; "
                   "prints the gdb command line (with the vmlinux and scripts/gdb of a build "
                   "kernel)")
    b.add_argument("--symbols", action="store_true", help="with --gdb: a Debian kernel's "
                   "vmlinux from its -dbg package (downloaded once, ~300 MB), and the KASLR "
                   "offset it runs at, in the gdb command line")
    b.set_defaults(func=main)


def gdb_lines(lab: Lab, g: Guest, port: int, symbols: bool) -> str:
    """gdb_help for the guest: with its vmlinux (fetched if asked) moved by its KASLR offset."""
    vmlinux = lab.debug_vmlinux(g.kernel.name) if symbols else (
        g.kernel.build_dir / "vmlinux" if g.kernel.build_dir else None)
    offset = kaslr_offset(g, vmlinux) if vmlinux and vmlinux.exists() else None
    return gdb_help(g.kernel, port, vmlinux if symbols else None, offset)


def state_path(lab: Lab) -> Path:
    """Where the booted guest is described for `./lab ssh` (removed when it stops)."""
    return lab.layout.booted_guest()


def ssh_argv(lab: Lab, state: dict) -> list[str]:
    """OpenSSH's command line to the guest described by `state`, its host key pinned."""
    known = lab.layout.known_hosts()
    cache.write_atomic(known, f"ringlab-guest {state['host_key']}\n".encode())
    return ["ssh", "-p", str(state["port"]), "-i", state["key"], "-o", "IdentitiesOnly=yes",
            "-o", "HostKeyAlias=ringlab-guest", "-o", f"UserKnownHostsFile={known}",
            "-o", "StrictHostKeyChecking=yes", "root@127.0.0.1"]


def main(args: argparse.Namespace) -> int:
    """Boot a guest and keep it until Ctrl-C; `./lab ssh` finds it."""
    cfg = run_folder.config(args)
    lab = Lab(cfg, refresh=args.refresh)
    k = cfg.kernel(args.kernel)
    console_log = cfg.reports_dir / f"boot-{lab_config.file_safe(k.name)}-console.log"
    gdb_port = free_port() if args.gdb else None
    with lab.boot(k.name, console_log, cpus=args.cpus, cmdline=args.cmdline or "",
                  gdb_port=gdb_port) as g:
        # Ctrl-C from here on is the way to stop: it may come while "Ctrl-C stops it" is still
        # being printed (a script that waits for that line signals at once), so the print is
        # inside the try too, not before it.
        try:
            state = {"pid": os.getpid(), "port": g.record.ssh_port,
                     "key": str(g.plan.key.private), "host_key": g.plan.rootfs.host_key,
                     "kernel": k.name, "release": g.kernel.release}
            cache.write_atomic(state_path(lab), json.dumps(state).encode())
            print(f"guest {k.name} ({g.kernel.release}) up in {g.record.boot_s:.1f} s, accel "
                  f"{g.plan.accel}; console log: {console_log}\n"
                  f"  shell: ./lab ssh     (or: {' '.join(ssh_argv(lab, state))})\n"
                  + (gdb_lines(lab, g, gdb_port, args.symbols) if gdb_port else "")
                  + "Ctrl-C stops it.", flush=True)
            while g.health() is None:
                time.sleep(1)
            log.error("guest died: %s", g.health())
            return 1
        except KeyboardInterrupt:
            return 0
        finally:
            state_path(lab).unlink(missing_ok=True)
