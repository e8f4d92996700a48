"""`./lab bisect`: find the commit that broke a test (harness/bisect/: the revisions, the
cache's worktree, git bisect run of `./lab bisect-step`, steps.jsonl and bisect.txt)."""
from __future__ import annotations

import argparse

from harness import config as lab_config
from harness.bisect.session import BisectRequest, run
from harness.commands import options
from harness.results import known_issues
from harness.runs import run_folder

OWN_LOGGING: bool = True
HOST_TOOLS: tuple[str, ...] = ("build",)


def register(sub: argparse._SubParsersAction) -> None:
    bi = sub.add_parser("bisect", help="find the commit that broke a test (git bisect run)",
                        description=main.__doc__)
    bi.add_argument("--good", required=True, metavar="REV", help="a commit where the tests pass")
    bi.add_argument("--bad", required=True, metavar="REV", help="a later commit where they fail")
    options.kernel(bi, "the kernel to bisect (a build kernel or a source tree, a git checkout)")
    options.selection(bi, "the tests that decide (pytest -k)")
    options.failure_policies(bi)
    bi.add_argument("--known-issues-fail", action="store_true",
                    help="judge each step with no known kernel issue excused, so that a known "
                    "bug's symptom is a failure: finds the commit that brought a known issue "
                    "(back); without it a step with the symptom xfails, and is good")
    options.pytest_args(bi)
    bi.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Find the first bad commit between --good and --bad of a `build` kernel's git tree: git
    bisect run with a step that builds, boots and runs the selected tests."""
    cfg, spec = options.config_and_kernel(args)
    out = run_folder.open_run(cfg, args, f"bisect-{lab_config.file_safe(spec.name)}")
    extra = ("--known-issues", known_issues.NONE) if args.known_issues_fail else ()
    return run(BisectRequest(cfg, spec, args.good, args.bad, args.k, out,
                             tuple(args.pytest_args) + extra, args.on_build_failure,
                             args.on_boot_failure))
