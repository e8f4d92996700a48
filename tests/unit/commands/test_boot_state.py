"""`./lab boot --detach` and `--stop` (harness/commands/boot.py) with a stand-in for the
detached lab: the caller returns once the state file names its child, says why a boot failed,
and --stop leaves no process, no folder and no state behind."""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import cli, config
from harness.commands import boot
from harness.errors import LabError
from harness.guest import workdir
from harness.resources import Lab

REPO = Path(__file__).resolve().parents[3]

# The detached lab, as far as its caller sees it: progress on its log, then the state file
# (its pid, its guest's folder), then it waits to be stopped.
UP = """
import json, os, sys, time
from pathlib import Path
from harness.guest.workdir import Process, make
state, root = Path(sys.argv[1]), Path(sys.argv[2])
print("booting the guest", flush=True)
me = Process.of(os.getpid())
folder = make(root)
fields = dict(pid=me.pid, start=me.start, port=2222, key="/k", host_key="ecdsa AAAA",
              kernel="trixie-cloud", release="6.12", workdir=str(folder), qemu_pid=None,
              qemu_start=None, detached=True, ssh="ssh -p 2222 root@127.0.0.1",
              banner="guest trixie-cloud (6.12) up\\n  shell: ./lab ssh")
state.parent.mkdir(parents=True, exist_ok=True)
(state.parent / "tmp.json").write_text(json.dumps(fields))
os.replace(state.parent / "tmp.json", state)
time.sleep(60)
"""
FAILS = """
import sys
print("booting the guest", flush=True)
print("lab: error: guest boot failed (reached: init)\\n  last console lines:\\n    | x",
      file=sys.stderr)
sys.exit(2)
"""


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    monkeypatch.setenv("RINGLAB_CACHE", str(tmp_path / "cache"))
    the_lab = Lab(config.load(REPO / "lab.yaml"))
    yield the_lab
    if (left := boot.read_state(the_lab)) is not None and left.lab().alive():
        os.kill(left.pid, 9)


def args(*argv: str) -> argparse.Namespace:
    return cli.build_parser(("boot",)).parse_args(["boot", *argv])


def child(monkeypatch: pytest.MonkeyPatch, script: str, lab: Lab, root: Path) -> None:
    root.mkdir(exist_ok=True)
    monkeypatch.setattr(boot, "child_command", lambda a: [
        sys.executable, "-c", script, str(boot.state_path(lab)), str(root)])


def test_detach_returns_once_up_and_stop_leaves_nothing(
        lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    child(monkeypatch, UP, lab, tmp_path / "tmp")
    assert boot.detach(args("--detach"), lab) == 0
    out = capsys.readouterr()
    assert "guest trixie-cloud (6.12) up" in out.out and "booting the guest" in out.err
    up = boot.running(lab)
    assert up is not None and up.detached and Path(up.workdir).is_dir()
    with pytest.raises(LabError, match="a guest of ./lab boot is up already"):
        boot.detach(args("--detach"), lab)
    assert boot.stop(lab) == 0
    assert "stopped the guest trixie-cloud (6.12)" in capsys.readouterr().out
    assert not up.lab().alive() and not Path(up.workdir).exists()
    assert not boot.state_path(lab).exists()
    with pytest.raises(LabError, match="no guest of ./lab boot is up"):
        boot.stop(lab)


def test_a_detached_boot_that_fails_says_why(lab: Lab, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    child(monkeypatch, FAILS, lab, tmp_path / "tmp")
    with pytest.raises(LabError) as e:
        boot.detach(args("--detach"), lab)
    assert e.value.message == "the detached guest did not come up: guest boot failed " \
                              "(reached: init)"
    assert str(boot.detached_log(lab)) in (e.value.hint or "")


def test_a_state_left_by_a_killed_lab_is_not_running_and_stop_clears_it(lab: Lab,
                                                                         tmp_path: Path) -> None:
    me = workdir.Process.of(os.getpid())
    assert me is not None
    folder = tmp_path / f"{workdir.PREFIX}x"
    folder.mkdir()
    (folder / workdir.OWNER).write_text(workdir.Owner(workdir.Process(me.pid, me.start - 1),
                                                      workdir.boot_id(),
                                                      workdir.pid_namespace()).to_json())
    state = dict(pid=me.pid, start=me.start - 1, port=1, key="k", host_key="h", kernel="k",
                 release="r", workdir=str(folder), qemu_pid=None, qemu_start=None,
                 detached=True, ssh="ssh", banner="up")
    boot.state_path(lab).parent.mkdir(parents=True)
    boot.state_path(lab).write_text(json.dumps(state))
    assert boot.read_state(lab) is not None and boot.running(lab) is None  # a recycled pid
    with pytest.raises(LabError, match="no guest of ./lab boot is up"):
        boot.stop(lab)
    assert not boot.state_path(lab).exists() and not folder.exists()


def test_the_detached_lab_gets_the_options_typed() -> None:
    typed = cli.build_parser(("boot",)).parse_args(
        ["--lab-config", "x.yaml", "-v", "boot", "--detach", "--kernel",
         "debian:sid/cloud-amd64", "--cmdline", "-x nokaslr", "--cpus", "2", "--gdb"])
    argv = boot.child_command(typed)
    assert argv[:3] == [sys.executable, "-m", "harness.cli"]
    again = cli.build_parser(("boot",)).parse_args(argv[3:])
    assert again.detached_child and not again.detach and again.lab_config == "x.yaml"
    assert again.verbose and again.gdb and not again.symbols
    assert (again.kernel, again.cmdline, again.cpus) == ("debian:sid/cloud-amd64",
                                                          "-x nokaslr", 2)


def test_stop_takes_no_boot_options(lab: Lab) -> None:
    with pytest.raises(LabError, match="--stop takes no other option"):
        boot.main(args("--stop", "--detach"))
