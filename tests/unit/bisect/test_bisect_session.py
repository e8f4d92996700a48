"""The whole bisect (harness/bisect/session.py): the `./lab bisect-step` command line git
bisect run is given parses back to the same request, and a kernel that cannot be bisected
is refused before any git command; the --bad end git names without having tested it is
tested before it is reported."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import cli, config
from harness.bisect import session, steps
from harness.bisect.session import BisectRequest, run, step_command
from harness.errors import BisectError


def _req(tmp_path: Path, name: str) -> BisectRequest:
    (tmp_path / "lab.yaml").write_text(
        f"kernels:\n  mine:\n    build:\n      tree: {tmp_path}\n"
        "  deb:\n    debian: {suite: trixie, flavour: cloud-amd64}\n")
    cfg = config.load(tmp_path / "lab.yaml")
    spec = cfg.kernel(name)
    return BisectRequest(cfg.with_kernel(spec), spec, "v1", "v2", "mmap and not slow",
                         tmp_path / "r", ("-x", "--count=2"), on_build_failure="bad")


def test_each_step_is_asked_what_the_bisect_was(tmp_path: Path) -> None:
    req = _req(tmp_path, "mine")
    argv = step_command(req, tmp_path / "wt", tmp_path / "r" / "steps.jsonl")
    assert argv[1:3] == ["-m", "harness.cli"]
    args = cli.build_parser(("bisect-step",)).parse_args(argv[3:])
    assert (args.command, args.lab_config, args.kernel, args.tree) == (
        "bisect-step", str(req.cfg.path), "mine", str(tmp_path / "wt"))
    assert (args.k, args.on_build_failure, args.on_boot_failure) == (
        "mmap and not slow", "bad", "skip")
    assert (args.report_dir, args.steps_log) == (str(tmp_path / "r"),
                                                 str(tmp_path / "r" / "steps.jsonl"))
    assert args.pytest_args == ["-x", "--count=2"]


def test_a_kernel_the_lab_does_not_build_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BisectError, match="kernel deb is not a `build` kernel"):
        run(_req(tmp_path, "deb"))


@pytest.mark.parametrize("tested, first, step_code, want", [
    (["aaa"], "bbb", 0, True),    # the untested --bad end passes: no first bad commit
    (["aaa"], "bbb", 1, False),   # it fails: git's answer holds
    (["aaa", "bbb"], "bbb", 0, False),  # a step tested it already: not run again
    (["aaa"], "aaa", 0, False),   # a tested commit named: not run again
])
def test_the_bad_end_is_tested_when_git_names_it_untested(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tested: list[str], first: str,
        step_code: int, want: bool) -> None:
    log = tmp_path / "r" / "steps.jsonl"
    for commit in tested:
        steps.record(log, steps.Step(commit, "s", "bad", "", 1.0, 1.0, 2.0))
    ran: list[list[str]] = []
    monkeypatch.setattr(session.trees, "git", lambda *a, **k: "")
    monkeypatch.setattr(session.subprocess, "run", lambda argv, **k: ran.append(argv) or
                        SimpleNamespace(returncode=step_code))
    assert session._bad_end_passes(_req(tmp_path, "mine"), tmp_path / "wt", "bbb", first,
                                   log) is want
    assert len(ran) == (1 if first == "bbb" and "bbb" not in tested else 0)
