"""`./lab bench`: each bench parses to the verb's main, with its own options."""
from __future__ import annotations

import pytest

from harness import cli, host
from harness.commands import bench


@pytest.mark.parametrize("argv, expected", [
    (["bench", "boot", "--runs", "2", "--cold"], {"bench": "boot", "runs": 2, "cold": True}),
    (["bench", "boot", "--throwaway"], {"throwaway": True, "runs": 5}),
    (["bench", "parallel", "--runs", "2", "-k", "perf"], {"runs": 2, "k": "perf"}),
    (["bench", "trace-mmap", "--events", "500"], {"events": 500, "runs": 3}),
    (["bench", "cpu-models", "--models", "max;cortex-a72"], {"models": "max;cortex-a72"}),
    (["bench", "explore", "--seconds", "5"], {"seconds": 5.0}),
    (["bench", "nightly", "-k", "a", "-k", "b"], {"k": ["a", "b"]}),
    (["bench", "build", "--no-ringbuf"], {"no_ringbuf": True}),
    (["bench", "aux", "--kernel", "sid-cloud"], {"kernel": "sid-cloud"}),
    (["bench", "perf-ring"], {"bench": "perf-ring"}),
])
def test_every_bench_parses_and_dispatches_to_main(argv: list[str], expected: dict) -> None:
    args = cli.build_parser(("bench",)).parse_args(argv)
    assert args.func is bench.main
    assert {k: getattr(args, k) for k in expected} == expected


def test_a_bench_must_be_named() -> None:
    with pytest.raises(SystemExit):
        cli.build_parser(("bench",)).parse_args(["bench"])


def test_the_verb_declares_its_logging_and_host_tools() -> None:
    needs = host.verb_needs("bench")
    assert needs.own_logging is False and needs.host_tools == ()
    assert (bench.OWN_LOGGING, bench.HOST_TOOLS) == (False, ())
