"""End-to-end fixtures: the shipped lab.yaml, real kernels, real QEMU guests (TCG here)."""
from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness import config
from harness.guest.guest import Guest
from harness.resources import Lab

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"


def qemu_pids() -> set[int]:
    """This session's QEMU processes (a test compares the set before and after): this user's,
    whose command line names this session's TMPDIR (a guest's folder, its disk and sockets
    are there; see private_tmpdir), so another lab running on the host is not counted."""
    # -f: the kernel cuts a process name to 15 characters ("qemu-system-x86", "qemu-system-aar").
    out = subprocess.run(["pgrep", "-u", str(os.getuid()), "-f",
                          "(^|/)qemu-system-(x86_64|aarch64) "], capture_output=True,
                         text=True).stdout
    mine = os.environ.get("TMPDIR", "/tmp").rstrip("/") + "/"
    pids = set()
    for p in out.split():
        try:
            args = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone meanwhile
            continue
        if mine in args:
            pids.add(int(p))
    return pids


@pytest.fixture(scope="session", autouse=True)
def private_tmpdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A TMPDIR of this session's own, inherited by every ./lab it starts and used by the
    guests it boots itself: a QEMU left behind is then told apart from one that another lab on
    this host (a developer's run, a CI neighbour) started meanwhile."""
    path = tmp_path_factory.mktemp("tmp")
    saved_env, saved_tempdir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = str(path), str(path)
    yield path
    tempfile.tempdir = saved_tempdir
    if saved_env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved_env


def lab_yaml(tmp_path: Path, **overrides: dict) -> Path:
    """The shipped lab.yaml with sections overridden (e.g. machine={...}), reports in tmp."""
    data = yaml.safe_load((REPO / "lab.yaml").read_text())
    data["reports"] = {"dir": str(tmp_path / "reports")}
    for spec in data["kernels"].values():  # paths in the shipped file are relative to it
        config = spec.get("build", {}).get("config", {})
        config["fragments"] = [str(REPO / f) for f in config.get("fragments", [])]
    for section, values in overrides.items():
        data.setdefault(section, {}).update(values)
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def module_lab_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped lab.yaml with reports in a folder of this test module's own (for a
    module-scoped fixture that runs a command once for several tests)."""
    return lab_yaml(tmp_path_factory.mktemp("lab"))


@pytest.fixture
def make_lab_yaml(tmp_path: Path):
    """lab_yaml(**overrides) bound to this test's tmp_path."""
    return lambda **overrides: lab_yaml(tmp_path, **overrides)


@pytest.fixture
def running_qemus():
    return qemu_pids


@pytest.fixture(scope="session")
def lab() -> Lab:
    return Lab(config.load(REPO / "lab.yaml"))


@pytest.fixture(scope="session")
def guest(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guest]:
    """One guest for the session, with the lab's own misbehaving test probes pushed too."""
    log = tmp_path_factory.mktemp("console") / "console.log"
    with lab.boot(None, log, extra_probe_dirs=(DATA / "probes",)) as g:
        yield g


@pytest.fixture
def no_stray_qemu() -> Iterator[None]:
    before = qemu_pids()
    yield
    left = qemu_pids() - before
    assert not left, f"QEMU processes left behind: {sorted(left)}"
