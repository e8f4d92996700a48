"""The guest `./lab boot` keeps up (harness/guest/kept.py), with a stand-in for the detached
lab: the caller returns once the state file names its child, says why a boot failed, and
--stop leaves no process, no folder and no state behind."""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import cache, cli
from harness.guest import kept
from harness.errors import LabError
from harness.guest import workdir


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
def layout(tmp_path: Path) -> Iterator[cache.Layout]:
    the_layout = cache.Layout(tmp_path / "cache")
    yield the_layout
    if (left := kept.read_state(the_layout)) is not None and left.lab().alive():
        os.kill(left.pid, 9)


def child(script: str, layout: cache.Layout, root: Path) -> list[str]:
    """The stand-in detached lab's command line."""
    root.mkdir(exist_ok=True)
    return [sys.executable, "-c", script, str(kept.state_path(layout)), str(root)]


def test_detach_returns_once_up_and_stop_leaves_nothing(
        layout: cache.Layout, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = child(UP, layout, tmp_path / "tmp")
    assert kept.detach(layout, argv) == 0
    out = capsys.readouterr()
    assert "guest trixie-cloud (6.12) up" in out.out and "booting the guest" in out.err
    up = kept.running(layout)
    assert up is not None and up.detached and Path(up.workdir).is_dir()
    with pytest.raises(LabError, match="a guest of ./lab boot is up already"):
        kept.detach(layout, argv)
    assert kept.stop(layout) == 0
    assert "stopped the guest trixie-cloud (6.12)" in capsys.readouterr().out
    assert not up.lab().alive() and not Path(up.workdir).exists()
    assert not kept.state_path(layout).exists()
    with pytest.raises(LabError, match="no guest of ./lab boot is up"):
        kept.stop(layout)


def test_a_detached_boot_that_fails_says_why(layout: cache.Layout, tmp_path: Path) -> None:
    with pytest.raises(LabError) as e:
        kept.detach(layout, child(FAILS, layout, tmp_path / "tmp"))
    assert e.value.message == "the detached guest did not come up: guest boot failed " \
                              "(reached: init)"
    assert str(kept.detached_log(layout)) in (e.value.hint or "")


def test_a_state_left_by_a_killed_lab_is_not_running_and_stop_clears_it(layout: cache.Layout,
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
    kept.state_path(layout).parent.mkdir(parents=True)
    kept.state_path(layout).write_text(json.dumps(state))
    assert kept.read_state(layout) is not None and kept.running(layout) is None  # a recycled pid
    with pytest.raises(LabError, match="no guest of ./lab boot is up"):
        kept.stop(layout)
    assert not kept.state_path(layout).exists() and not folder.exists()


def test_the_detached_lab_is_given_the_options_again() -> None:
    opts = kept.BootOptions(kernel="debian:sid/cloud-amd64", cpus=2, cmdline="-x nokaslr",
                            gdb=True, lab_config="x.yaml", verbose=True)
    argv = opts.detached_argv()
    assert argv[:3] == [sys.executable, "-m", "harness.cli"]
    again = cli.build_parser(("boot",)).parse_args(argv[3:])
    assert again.detached_child and not again.detach and again.lab_config == "x.yaml"
    assert again.verbose and again.gdb and not again.symbols and not again.refresh
    assert (again.kernel, again.cmdline, again.cpus) == ("debian:sid/cloud-amd64",
                                                          "-x nokaslr", 2)
