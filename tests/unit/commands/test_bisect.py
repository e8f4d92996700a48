"""`./lab bisect`: the command line parses to the verb's main."""
from __future__ import annotations

import pytest

from harness import cli, host
from harness.commands import bisect


def test_bisect_parses_and_dispatches_to_main() -> None:
    args = cli.build_parser(("bisect",)).parse_args(
        ["bisect", "--good", "v6.11", "--bad", "HEAD", "--kernel", "src", "-k", "mmap",
         "--on-build-failure", "bad", "--", "-x"])
    assert args.func is bisect.main
    assert (args.good, args.bad, args.kernel, args.k, args.on_build_failure,
            args.on_boot_failure, args.pytest_args) == ("v6.11", "HEAD", "src", "mmap", "bad",
                                                        "skip", ["-x"])


def test_good_and_bad_are_required() -> None:
    with pytest.raises(SystemExit):
        cli.build_parser(("bisect",)).parse_args(["bisect", "--good", "a"])


def test_the_verb_declares_its_own_logging_and_the_build_tools() -> None:
    needs = host.verb_needs("bisect")
    assert needs.own_logging is True and needs.host_tools == ("build",)
