"""`./lab coverage`: the command line, and the errors given before anything is built."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli
from harness.bench import review as review_run
from harness.commands import coverage
from harness.errors import LabError

REPO = Path(__file__).resolve().parents[3]


def test_coverage_parses_and_dispatches_to_main() -> None:
    args = cli.build_parser(("coverage",)).parse_args(
        ["coverage", "--kernel", "src-7.2-ringbuf", "-k", "perf", "--explore", "60s",
         "--selftests", "--steer"])
    assert args.func is coverage.main
    assert (args.kernel, args.k, args.explore, args.selftests, args.steer, args.no_suite) == \
        ("src-7.2-ringbuf", "perf", "60s", True, True, False)


def _main(argv: list[str]) -> int:
    args = cli.build_parser(("coverage",)).parse_args(
        ["--lab-config", str(REPO / "lab.yaml"), "coverage", *argv])
    return coverage.main(args)


def test_a_debian_kernel_is_refused_naming_a_build_kernel() -> None:
    with pytest.raises(LabError, match=r"has no gcov.*--kernel src-7\.3-ringbuf"):
        _main(["--kernel", "trixie-cloud"])


def test_no_suite_alone_leaves_nothing_to_run() -> None:
    with pytest.raises(LabError, match="nothing to run"):
        _main(["--kernel", "src-7.2-ringbuf", "--no-suite"])


def test_a_bad_budget_is_refused() -> None:
    with pytest.raises(LabError):
        _main(["--kernel", "src-7.2-ringbuf", "--explore", "soon"])


def test_review_profiles_the_c_files_a_series_changes() -> None:
    assert review_run.changed_c_files(REPO / "kernels/series/revoke-aux") == (
        "kernel/events/ring_buffer.c",)
    # The selftest the series adds is not a kernel object.
    assert review_run.changed_c_files(REPO / "kernels/series/fix-second-mapping-charge") == (
        "kernel/events/core.c",)
