"""`./lab review`: the command line parses to the verb's main."""
from __future__ import annotations

from harness import cli, host
from harness.commands import review


def test_review_parses_and_dispatches_to_main() -> None:
    args = cli.build_parser(("review",)).parse_args(
        ["review", "s.mbox", "tests/kernel/test_perf_ring.py", "--kernel", "src-6.12-min",
         "-k", "perf", "--bench-runs", "0", "--selftests"])
    assert args.func is review.main
    assert (args.series, args.kernel, args.k, args.bench_runs, args.selftests,
            args.pytest_args) == ("s.mbox", "src-6.12-min", "perf", 0, True,
                                 ["tests/kernel/test_perf_ring.py"])


def test_the_verb_declares_its_own_logging_and_the_build_tools() -> None:
    needs = host.verb_needs("review")
    assert needs.own_logging is True and needs.host_tools == ("build",)
