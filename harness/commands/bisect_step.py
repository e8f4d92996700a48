"""`./lab bisect-step`: one step of a bisect on the commit checked out in a tree
(harness/bisect/step.py); `./lab bisect` runs it inside `git bisect run`, and so may a user."""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from harness import config as lab_config
from harness.bisect.step import StepRequest, run
from harness.commands import options
from harness.runs import run_folder

OWN_LOGGING: bool = False
HOST_TOOLS: tuple[str, ...] = ("build",)


def register(sub: argparse._SubParsersAction) -> None:
    bs = sub.add_parser("bisect-step", help="one bisect step: build, boot, test; exit "
                        "0/1/125 for git bisect run", description=main.__doc__)
    options.kernel(bs, "the kernel to build (a build kernel or a source tree)")
    bs.add_argument("--tree", help="the checkout to build (default: the current folder)")
    options.selection(bs, "the tests that decide (pytest -k)")
    options.failure_policies(bs)
    bs.add_argument("--steps-log", help=argparse.SUPPRESS)   # set by ./lab bisect
    bs.add_argument("--report-dir", help=argparse.SUPPRESS)  # set by ./lab bisect
    options.pytest_args(bs)
    bs.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """One bisect step on the commit checked out in --tree (default: the current folder):
    build, boot, run the selected tests; exit 0 good, 1 bad, 125 skip (build or boot
    failure), 255 abort. Usable by hand: git bisect run ./lab bisect-step --kernel NAME -k EXPR"""
    cfg, spec = options.config_and_kernel(args)
    tree = Path(args.tree or os.getcwd()).resolve()
    out = run_folder.make(Path(args.report_dir) if args.report_dir else cfg.reports_dir
                          / time.strftime(f"%Y%m%d-%H%M%S-bisect-step-"
                                          f"{lab_config.file_safe(spec.name)}"))
    steps = Path(args.steps_log) if args.steps_log else out / "steps.jsonl"
    return run(StepRequest(cfg, spec, tree, args.k, steps, out, tuple(args.pytest_args),
                           args.on_build_failure, args.on_boot_failure))
