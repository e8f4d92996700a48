"""`./lab mutate`: the command line parses to the verb's main."""
from __future__ import annotations

from harness import cli, host
from harness.commands import mutate


def test_mutate_parses_and_dispatches_to_main() -> None:
    args = cli.build_parser(("mutate",)).parse_args(
        ["mutate", "--kernel", "src-6.12-min", "--mutants", "00[1-3]*", "-k", "mmap",
         "--whole-suite", "--explore", "2m", "--selftests", "--", "-x"])
    assert args.func is mutate.main
    assert (args.kernel, args.mutants, args.k, args.whole_suite, args.explore, args.selftests,
            args.jobs, args.pytest_args) == ("src-6.12-min", "00[1-3]*", "mmap", True, "2m",
                                             True, 1, ["-x"])


def test_the_verb_declares_its_own_logging_and_the_build_tools() -> None:
    needs = host.verb_needs("mutate")
    assert needs.own_logging is True and needs.host_tools == ("build",)
