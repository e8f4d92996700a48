"""`./lab bisect-step`: the command line parses to the verb's main; it needs no `./lab
bisect` (neither verb imports the other)."""
from __future__ import annotations

import subprocess
import sys

from harness import cli, host
from harness.commands import bisect_step
from harness.paths import REPO


def test_bisect_step_parses_and_dispatches_to_main() -> None:
    parser = cli.build_parser(("bisect-step",))
    args = parser.parse_args(["bisect-step", "--tree", "/t", "-k", "mmap", "--steps-log",
                              "/r/steps.jsonl", "--report-dir", "/r"])
    assert args.func is bisect_step.main
    assert (args.tree, args.k, args.steps_log, args.report_dir, args.on_build_failure,
            args.on_boot_failure) == ("/t", "mmap", "/r/steps.jsonl", "/r", "skip", "skip")
    assert parser.parse_args(["bisect-step", "--on-boot-failure", "bad"]).on_boot_failure == "bad"


def test_the_step_verb_does_not_import_the_bisect_verb() -> None:
    done = subprocess.run([sys.executable, "-c", "import sys, harness.commands.bisect_step; "
                           "print('harness.commands.bisect' in sys.modules)"],
                          cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_the_verb_declares_the_build_tools_and_logs_to_the_screen() -> None:
    needs = host.verb_needs("bisect-step")
    assert needs.own_logging is False and needs.host_tools == ("build",)
