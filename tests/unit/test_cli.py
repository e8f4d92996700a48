"""User mistakes at the command line: one clear line, exit 2, no traceback."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def lab(*args: str, config: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if config:
        env["RINGLAB_CONFIG"] = str(config)
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_unknown_kernel() -> None:
    p = lab("run", "--kernel", "nope")
    assert p.returncode == 2
    assert "unknown kernel 'nope'" in p.stderr and "trixie-cloud" in p.stderr
    assert "Traceback" not in p.stderr


def test_bad_config(tmp_path: Path) -> None:
    cfg = tmp_path / "lab.yaml"
    cfg.write_text("kernels: {k: {debian: {suite: trixie, flavour: amd64}}}\nmachine: {cpus: 0}\n")
    p = lab("boot", config=cfg)
    assert p.returncode == 2
    assert f"{cfg}: machine.cpus: expected an integer from 1 to 64, got 0" in p.stderr
    assert "Traceback" not in p.stderr


def test_help_everywhere() -> None:
    for cmd in ([], ["run"], ["boot"], ["ssh"], ["doctor"], ["selftest"], ["bench"],
                ["bench", "boot"]):
        p = lab(*cmd, "--help")
        assert p.returncode == 0 and "usage:" in p.stdout, cmd


def test_only_the_verb_typed_is_imported() -> None:
    """A throw-away `./lab ssh` does not pay for every verb's imports (issue 31 §2)."""
    from harness import cli
    assert cli.verb_in(["ssh", "--", "true"]) == "ssh"
    assert cli.verb_in(["--lab-config", "run", "-v", "bisect-step", "x"]) == "bisect-step"
    assert cli.verb_in(["-v", "--help"]) is None and cli.verb_in(["nope"]) is None
    p = cli.build_parser(("gc",))
    assert p.parse_args(["gc"]).command == "gc"
    for verb in cli.VERBS:  # every verb's module is where its name says
        assert hasattr(cli.verb_module(verb), "register")


def test_the_verb_says_whether_it_logs_to_the_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    """OWN_LOGGING is the verb module's (issue 32 §3): cli.py keeps no list of its own."""
    from harness import cache, cli
    from harness.commands import gc
    from harness.runs import run_folder
    assert not hasattr(cli, "OWN_LOGGING")
    monkeypatch.delenv(cache.RUN_ENV, raising=False)  # cli.main sets it: undone after
    screen: list[bool] = []
    monkeypatch.setattr(run_folder, "setup_logging", lambda verbose: screen.append(verbose))
    monkeypatch.setattr(gc, "main", lambda args: 0)
    assert cli.main(["-v", "gc"]) == 0 and screen == [True]
    monkeypatch.setattr(gc, "OWN_LOGGING", True)
    assert cli.main(["gc"]) == 0 and screen == [True]
