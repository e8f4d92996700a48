"""`./lab ssh`: a shell (or a command) in the guest of `./lab boot`, else a throw-away one
(harness/runs/interactive.py)."""
from __future__ import annotations

import argparse
import logging

from harness import host
from harness.commands import options
from harness.guest import kept
from harness.resources import Lab
from harness.runs import interactive

log = logging.getLogger("ringlab")
OWN_LOGGING: bool = False
HOST_TOOLS: tuple[str, ...] = ()


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("ssh", help="a shell in the booted guest", description=main.__doc__)
    options.kernel(s, "the kernel of a throw-away guest when none is booted")
    # Not dest "command": that is the verb's own (cli.py's subparsers), which it would overwrite.
    s.add_argument("guest_command", metavar="command", nargs="*",
                   help="command to run instead of a shell")
    s.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """A shell in the guest of `./lab boot`, or in a throw-away guest booted for it."""
    cfg, spec = options.config_and_kernel(args)
    lab = Lab(cfg)
    host.require(tuple(t for t in host.ALL_TOOLS if t.command == "ssh"))
    if (booted := kept.running(lab.layout)) is not None:  # detached or in another shell
        return interactive.shell(lab, booted, args.guest_command)
    log.info("no guest from `./lab boot` is running; booting a throw-away one")
    return interactive.throwaway(lab, spec, args.guest_command)
