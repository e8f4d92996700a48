"""`./lab selftest`: the command line parses to the verb's main, which declares the build and
selftest tools; main runs tox on tox.ini from the checkout with the environments asked for
(-e as given, --all adding the arches and kbuild tiers, neither: tox.ini's own envlist) and the tox
arguments after --, and returns tox's status; no tox is the user's error with a hint. tox itself
is never run here."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli, host, paths
from harness.commands import selftest
from harness.errors import LabError


def _tox(monkeypatch: pytest.MonkeyPatch, status: int = 0) -> list[tuple[list[str], Path]]:
    calls: list[tuple[list[str], Path]] = []
    monkeypatch.setattr(selftest.shutil, "which", lambda name: f"/venv/bin/{name}")
    monkeypatch.setattr(selftest.subprocess, "call",
                        lambda argv, cwd: calls.append((argv, cwd)) or status)
    return calls


def test_selftest_parses_and_dispatches_to_main() -> None:
    args = cli.build_parser(("selftest",)).parse_args(
        ["selftest", "-e", "unit", "--all", "--", "-r"])
    assert args.func is selftest.main
    assert (args.env, args.all, args.tox_args) == ("unit", True, ["-r"])


def test_the_verb_declares_the_build_and_selftest_tools() -> None:
    needs = host.verb_needs("selftest")
    assert needs.own_logging is False and needs.host_tools == ("build", "selftest")
    assert (selftest.OWN_LOGGING, selftest.HOST_TOOLS) == (False, ("build", "selftest"))


@pytest.mark.parametrize("argv, envs", [
    ([], []),
    (["-e", "unit"], ["-e", "unit"]),
    (["--env", "unit,types"], ["-e", "unit,types"]),
    (["--all"], ["-e", "unit,types,e2e,arches,kbuild"]),
    (["--all", "-e", "kbuild"], ["-e", "kbuild"]),  # -e says which, --all adds nothing to it
])
def test_the_tox_argv_for_env_and_all(monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                      envs: list[str]) -> None:
    calls = _tox(monkeypatch)
    assert selftest.main(cli.build_parser(("selftest",)).parse_args(["selftest", *argv])) == 0
    assert calls == [(["/venv/bin/tox", "-c", str(paths.REPO / "tox.ini"), *envs], paths.REPO)]


def test_tox_arguments_go_last_and_toxs_status_is_the_verbs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _tox(monkeypatch, status=3)
    args = cli.build_parser(("selftest",)).parse_args(
        ["selftest", "-e", "unit", "--", "-r", "--", "-k", "x"])
    assert selftest.main(args) == 3
    ((argv, _),) = calls
    assert argv[3:] == ["-e", "unit", "-r", "--", "-k", "x"]


def test_no_tox_is_an_error_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _tox(monkeypatch)
    monkeypatch.setattr(selftest.shutil, "which", lambda name: None)
    with pytest.raises(LabError, match="tox is not installed") as e:
        selftest.main(cli.build_parser(("selftest",)).parse_args(["selftest"]))
    assert e.value.hint and "./lab" in e.value.hint
    assert calls == []
