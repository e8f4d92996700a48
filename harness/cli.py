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

from harness import cache
from harness.runs import run_folder
from harness.errors import LabError

log = logging.getLogger("ringlab")
# Each verb is one module of harness/commands/ with register(subparsers) and main(args) -> int,
# in help order. Only the verb typed is imported (a throw-away `./lab ssh` does not pay for
# the benches' and the explorer's imports); `./lab --help` imports them all.
VERBS: tuple[str, ...] = ("run", "explore", "boot", "ssh", "module", "build", "review",
                          "bisect", "bisect-step", "mutate", "nightly", "report", "splats",
                          "doctor", "gc", "selftest", "bench")
# Verbs that open their own run folder and log file (the others log to the screen).
OWN_LOGGING = ("run", "explore", "review", "bisect", "mutate", "nightly", "report")
# Options of ./lab itself that take a value (to find the verb in argv without parsing it).
_VALUED = ("--lab-config",)


def verb_module(verb: str) -> ModuleType:
    return importlib.import_module(f"harness.commands.{verb.replace('-', '_')}")


def verb_in(argv: list[str]) -> str | None:
    """The verb of a command line, if it names one (else None: parse with every verb)."""
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a in _VALUED:
            skip = True
        elif not a.startswith("-"):
            return a if a in VERBS else None
    return None


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
    if args.command not in OWN_LOGGING:
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
