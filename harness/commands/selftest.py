"""`./lab selftest`: the project's own tests, through tox.ini's tiers."""
from __future__ import annotations

import argparse
import logging
import shutil
import subprocess

from harness import paths
from harness.errors import LabError

# Read by harness/cli.py, and as text by harness/host.py (./lab's host check): literals only.
OWN_LOGGING: bool = False
HOST_TOOLS: tuple[str, ...] = ("build", "selftest")

log = logging.getLogger("ringlab")


def register(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("selftest", help="run the project's own tests (via tox)",
                       description=main.__doc__)
    t.add_argument("-e", "--env", help="tox environments (default: unit,types,e2e)")
    t.add_argument("--all", action="store_true", help="also the slow tiers: the arm64 guest "
                   "(tox env arches) and the one that builds and bisects real kernels (kbuild)")
    t.add_argument("tox_args", nargs="*", help="more tox arguments (after --)")
    t.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """The project's own tests, through tox: unit, types, then the end-to-end tier; with --all
    also the slow tiers: the arm64 guest (arches) and the kernel builds (kbuild)."""
    tox = shutil.which("tox")
    if tox is None:
        raise LabError("tox is not installed in the lab's virtualenv",
                       hint="rm -rf .venv and run ./lab again")
    env = args.env or ("unit,types,e2e,arches,kbuild" if args.all else None)
    argv = [tox, "-c", str(paths.REPO / "tox.ini")] + (["-e", env] if env else []) \
        + args.tox_args
    log.info("selftest: %s", " ".join(argv))
    return subprocess.call(argv, cwd=paths.REPO)
