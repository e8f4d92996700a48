"""The `./lab` command line: parse, dispatch to the verb's module under harness/commands/,
stop guests on SIGINT/SIGTERM, and turn a LabError into one `lab: error:` line (exit 2)."""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
from types import ModuleType

from harness import cache, host
from harness.runs import run_folder
from harness.errors import LabError

log = logging.getLogger("ringlab")
# Each verb is one module of harness/commands/ with register(subparsers) and main(args) -> int,
# and its declarations (OWN_LOGGING, HOST_TOOLS: harness/host.py), listed here in help order
# (an order chosen, not one the modules could be sorted by). Only the verb typed is imported (a
# throw-away `./lab ssh` does not pay for the benches' and the explorer's imports); `./lab
# --help` imports them all. harness/host.py reads this tuple as text: keep it a literal.
VERBS: tuple[str, ...] = ("run", "explore", "coverage", "boot", "ssh", "module", "build",
                          "review", "bisect", "bisect-step", "mutate", "nightly", "report",
                          "splats", "doctor", "gc", "selftest", "bench")


def verb_module(verb: str) -> ModuleType:
    return importlib.import_module(f"harness.commands.{verb.replace('-', '_')}")


def verb_in(argv: list[str]) -> str | None:
    """The verb of a command line, if it names one (else None: parse with every verb); found
    by the rule ./lab's host check uses (host.verb_index)."""
    i = host.verb_index(argv)
    return argv[i] if i is not None and argv[i] in VERBS else None


def build_parser(verbs: tuple[str, ...] = VERBS) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="./lab", description="ringlab: a QEMU test lab for the "
                                "kernel's ring-buffer mapping paths")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging on screen")
    p.add_argument("--lab-config", metavar="PATH", help="lab.yaml to use (default: the "
                   "checkout's; or $RINGLAB_CONFIG)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for verb in verbs:
        verb_module(verb).register(sub)
    return p


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verb = verb_in(argv)
    args = build_parser((verb,) if verb else VERBS).parse_args(argv)
    # One id for this command and every lab it starts (./lab gc --keep counts runs).
    os.environ.setdefault(cache.RUN_ENV, cache.new_run_id())
    # A verb with its own run folder and lab.log sets up its logging there; the others log to
    # the screen.
    if not verb_module(args.command).OWN_LOGGING:
        run_folder.setup_logging(args.verbose)
    # SIGTERM takes the same path as Ctrl-C, so every guest is stopped on the way out. SIGINT
    # is set too: a lab started as a background job of a script inherits it ignored, and its
    # `kill -INT` (or a test's) would then never stop `./lab boot`.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return args.func(args)
    except LabError as e:
        print(f"lab: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("lab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
