"""`./lab bisect`: the command line parses to the verb's main."""
from __future__ import annotations

from types import SimpleNamespace

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


def test_known_issues_fail_asks_each_step_to_excuse_none(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    # Issue 44: a step with a known issue's symptom xfails and exits 0, so without this a
    # bisect cannot find the commit that brought a known issue (back).
    asked = []
    monkeypatch.setattr(bisect, "run", lambda req: asked.append(req) or 0)
    monkeypatch.setattr(bisect.options, "config_and_kernel", lambda args: (None, SimpleNamespace(
        name="src")))
    monkeypatch.setattr(bisect.run_folder, "open_run", lambda cfg, args, name: tmp_path)
    for flag, want in (([], ("-x",)), (["--known-issues-fail"], ("-x", "--known-issues",
                                                                   "none"))):
        args = cli.build_parser(("bisect",)).parse_args(
            ["bisect", "--good", "a", "--bad", "b", *flag, "--", "-x"])
        assert bisect.main(args) == 0
        assert asked[-1].pytest_args == want


def test_good_and_bad_are_required() -> None:
    with pytest.raises(SystemExit):
        cli.build_parser(("bisect",)).parse_args(["bisect", "--good", "a"])


def test_the_verb_declares_its_own_logging_and_the_build_tools() -> None:
    needs = host.verb_needs("bisect")
    assert needs.own_logging is True and needs.host_tools == ("build",)
