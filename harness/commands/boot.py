"""`./lab boot`: a guest kept up until Ctrl-C, or with --detach in the background until
`./lab boot --stop` (harness/guest/kept.py: its state file, the detached lab, --stop;
harness/runs/interactive.py boots it)."""
from __future__ import annotations

import argparse

from harness.commands import options
from harness.errors import LabError
from harness.guest import kept
from harness.resources import Lab
from harness.runs import interactive, run_folder

OWN_LOGGING: bool = False
HOST_TOOLS: tuple[str, ...] = ()


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("boot", help="boot a guest and keep it until Ctrl-C (or, detached, "
                       "until ./lab boot --stop)", description=main.__doc__)
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
    b.add_argument("--detach", action="store_true", help="keep the guest in the background: "
                   "return once it is up (a script's exit does not stop it); ./lab ssh reaches "
                   "it, ./lab boot --stop stops it")
    b.add_argument("--stop", action="store_true", help="stop the guest of ./lab boot --detach "
                   "(or of a ./lab boot in another shell), and wait until it is gone")
    # The detached lab itself, started by --detach (never typed).
    b.add_argument("--detached-child", action="store_true", help=argparse.SUPPRESS)
    b.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Boot a guest and keep it until Ctrl-C; `./lab ssh` finds it. With --detach the lab goes
    on in the background once the guest is up, until `./lab boot --stop`."""
    if args.stop and (args.detach or args.gdb or args.kernel or args.cmdline or args.cpus):
        raise LabError("--stop takes no other option: it stops the guest that is up")
    if args.stop:
        return kept.stop(Lab(run_folder.config(args)).layout)
    # Resolved here, once; a kernel name that is wrong is said here, not in a log.
    cfg, spec = options.config_and_kernel(args)
    opts = kept.BootOptions(args.kernel, args.cpus, args.cmdline, args.refresh, args.gdb,
                            args.symbols, args.lab_config, args.verbose)
    if args.detach:
        return kept.detach(Lab(cfg).layout, opts.detached_argv())
    return interactive.keep_up(Lab(cfg, refresh=args.refresh), spec, opts,
                               detached=args.detached_child)
