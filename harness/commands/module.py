"""`./lab module NAME`: a test module of kernels/modules/ built for a kernel (cached)."""
from __future__ import annotations

import argparse

from harness.commands import options
from harness.runs import run_folder
from harness.resources import Lab

# Read by harness/cli.py, and as text by harness/host.py (./lab's host check): literals only.
OWN_LOGGING: bool = False
HOST_TOOLS: tuple[str, ...] = ()


def register(sub: argparse._SubParsersAction) -> None:
    mo = sub.add_parser("module", help="build a test module (kernels/modules/NAME) for a kernel",
                        description=main.__doc__)
    mo.add_argument("name", help="the module's folder under kernels/modules/")
    options.kernel(mo)
    mo.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Build a test module of kernels/modules/ for a kernel; print the .ko path."""
    cfg, spec = options.config_and_kernel(args)
    print(Lab(cfg).module(args.name, spec.name))
    return 0
