"""`./lab ssh`: a shell (or a command) in the guest of `./lab boot`, else a throw-away one."""
from __future__ import annotations

import argparse
import logging
import subprocess
import sys

from harness import config as lab_config, host
from harness.commands import boot, options
from harness.runs import run_folder
from harness.resources import Lab

log = logging.getLogger("ringlab")
# A command in a throw-away guest: its output comes back when it ends (a shell, for longer work).
COMMAND_TIMEOUT_S = 3600.0


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("ssh", help="a shell in the booted guest", description=main.__doc__)
    options.kernel(s, "the kernel of a throw-away guest when none is booted")
    s.add_argument("command", nargs="*", help="command to run instead of a shell")
    s.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """A shell in the guest of `./lab boot`, or in a throw-away guest booted for it."""
    cfg, spec = options.config_and_kernel(args)
    lab = Lab(cfg)
    host.require(tuple(t for t in host.ALL_TOOLS if t.command == "ssh"))
    if (booted := boot.running(lab)) is not None:  # detached or in another shell
        return subprocess.call(boot.ssh_argv(lab, booted.port, booted.key, booted.host_key)
                               + args.command)
    log.info("no guest from `./lab boot` is running; booting a throw-away one")
    k = spec
    console_log = lab.config.reports_dir / f"ssh-{lab_config.file_safe(k.name)}-console.log"
    with lab.boot(k.name, console_log) as g:
        if args.command:  # through the probe runner: no SSH handshake at all
            status, out, err = g.runner.exec(" ".join(args.command), COMMAND_TIMEOUT_S)
            sys.stdout.write(out)
            sys.stderr.write(err)
            return status
        return subprocess.call(boot.ssh_argv(lab, g.record.ssh_port, str(g.plan.key.private),
                                             g.plan.rootfs.host_key))
