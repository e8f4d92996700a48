"""harness/commands/child_run.py: the one command line of a child `./lab run` (multi-kernel
runs, review, bisect steps, mutate all use it)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli
from harness.commands import child_run


def test_the_request_travels_whole_as_one_value() -> None:
    req = child_run.RunRequest(Path("/lab.yaml"), "k", Path("/r/k"))
    out = child_run.argv(req, python="py")
    assert out[:7] == ["py", "-m", "harness.cli", "--lab-config", "/lab.yaml", "run",
                       "--request"]
    assert len(out) == 8 and child_run.RunRequest.from_json(out[7]) == req


def test_every_field_round_trips() -> None:
    req = child_run.RunRequest(Path("/lab.yaml"), "/home/me/linux?modules=/m", Path("/r/k"),
                             selection="ring and not aux", jobs="2", tree=Path("/wt"),
                             series=(Path("/s1"), Path("/s2")), refresh=True, history="/h",
                             keep_guest=True, pytest_args=("-x", "--maxfail=2"))
    assert child_run.RunRequest.from_json(req.to_json()) == req


def test_the_child_command_line_parses_back_to_the_request() -> None:
    req = child_run.RunRequest(Path("/lab.yaml"), "k", Path("/r/k"), selection="ring",
                             tree=Path("/wt"), series=(Path("/s1"),), refresh=True,
                             history="/h", pytest_args=("-x",))
    args = cli.build_parser().parse_args(child_run.argv(req)[3:])
    assert (args.lab_config, args.command) == ("/lab.yaml", "run")
    assert child_run.RunRequest.from_json(args.request) == req


def test_jobs_auto_is_cores_over_guest_vcpus_and_bad_values_are_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(child_run.os, "cpu_count", lambda: 2)
    assert child_run.run_jobs(1, "auto") == 2
    assert child_run.run_jobs(2, "auto") == 1
    assert child_run.run_jobs(4, "auto") == 1  # at least one guest
    assert child_run.run_jobs(1, "3") == 3
    for bad in ("0", "two", "-1"):
        with pytest.raises(ValueError, match=f"got '{bad}'"):
            child_run.run_jobs(1, bad)
