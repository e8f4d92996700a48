"""`./lab boot`: the command line parses to the verb's main; --stop takes no other option;
--detach gives the detached lab the options typed."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness import cache, cli, host
from harness.commands import boot
from harness.errors import LabError
from harness.guest import kept


def test_boot_parses_and_dispatches_to_main() -> None:
    args = cli.build_parser(("boot",)).parse_args(
        ["boot", "--kernel", "trixie-cloud", "--cpus", "2", "--gdb", "--detach"])
    assert args.func is boot.main
    assert (args.kernel, args.cpus, args.gdb, args.detach, args.stop) == (
        "trixie-cloud", 2, True, True, False)


def test_stop_takes_no_boot_options() -> None:
    args = cli.build_parser(("boot",)).parse_args(["boot", "--stop", "--detach"])
    with pytest.raises(LabError, match="--stop takes no other option"):
        boot.main(args)


def test_detach_gives_the_detached_lab_the_options_typed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RINGLAB_CACHE", str(tmp_path / "cache"))
    started: list[list[str]] = []

    def detach(layout: cache.Layout, argv: list[str]) -> int:
        started.append(argv)
        return 0

    monkeypatch.setattr(kept, "detach", detach)
    typed = cli.build_parser(("boot",)).parse_args(
        ["-v", "boot", "--detach", "--kernel", "debian:sid/cloud-amd64", "--cmdline",
         "-x nokaslr", "--cpus", "2", "--gdb"])
    assert boot.main(typed) == 0
    (argv,) = started
    assert argv[:3] == [sys.executable, "-m", "harness.cli"]
    again = cli.build_parser(("boot",)).parse_args(argv[3:])
    assert again.detached_child and not again.detach and again.verbose and again.gdb
    assert (again.kernel, again.cmdline, again.cpus) == ("debian:sid/cloud-amd64",
                                                          "-x nokaslr", 2)


def test_the_verb_declares_no_build_tools_and_logs_to_the_screen() -> None:
    needs = host.verb_needs("boot")
    assert needs.own_logging is False and needs.host_tools == ()
