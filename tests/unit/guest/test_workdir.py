"""Guest folders (harness/guest/workdir.py): each says whose it is, and the sweep removes those
whose lab and QEMU are both gone, never a live guest's (a recycled pid keeps nothing)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import cli
from harness.guest import workdir
from harness.guest.workdir import Owner, Process


@pytest.fixture
def spawn() -> Iterator:
    """Start a process (a stand-in lab or QEMU) that is killed at the test's end."""
    procs: list[subprocess.Popen] = []

    def start(*argv: str) -> subprocess.Popen:
        procs.append(subprocess.Popen(list(argv), stdout=subprocess.PIPE, text=True))
        # Until the child has exec'd, /proc/PID/cmdline is still pytest's: wait for its own.
        cmdline = Path(f"/proc/{procs[-1].pid}/cmdline")
        deadline = time.monotonic() + 10
        while argv[-1] not in cmdline.read_bytes().decode(errors="replace") and \
                time.monotonic() < deadline:
            time.sleep(0.005)
        return procs[-1]

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def a_dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def folder(root: Path, name: str, owner: Owner | None = None, qemu_pid: int | None = None
           ) -> Path:
    """A guest folder as a lab leaves it: owner file, QEMU's pidfile."""
    d = root / f"{workdir.PREFIX}{name}"
    d.mkdir()
    if owner is not None:
        (d / workdir.OWNER).write_text(owner.to_json())
    if qemu_pid is not None:
        (d / workdir.QEMU_PIDFILE).write_text(f"{qemu_pid}\n")
    return d


def me() -> Owner:
    owner = Owner.me()
    assert owner is not None
    return owner


def owned_by(lab: Process) -> Owner:
    return Owner(lab, me().boot_id, me().pid_ns)


def test_make_writes_who_owns_the_folder(tmp_path: Path) -> None:
    d = workdir.make(tmp_path)
    assert d.parent == tmp_path and d.name.startswith(workdir.PREFIX)
    assert Owner.read(d) == me()
    assert me().lab.pid == os.getpid() and me().lab.alive()
    assert [p.name for p in d.iterdir()] == [workdir.OWNER]  # no temporary name left
    assert workdir.find_orphans(tmp_path) == []


def test_the_default_root_is_the_temp_dir_so_the_unit_tier_leaves_nothing_in_tmp() -> None:
    d = workdir.make()
    try:
        assert not str(d).startswith("/tmp/ringlab-guest-"), d  # tests/unit/conftest.py
    finally:
        shutil.rmtree(d)


def test_a_dead_lab_without_qemu_is_swept_a_live_one_is_kept(tmp_path: Path) -> None:
    dead_lab = a_dead_pid()
    dead = folder(tmp_path, "dead", owned_by(Process(dead_lab, 12345)), qemu_pid=a_dead_pid())
    live = folder(tmp_path, "live", me(), qemu_pid=a_dead_pid())  # between two boots
    found = workdir.find_orphans(tmp_path)
    assert [(o.path, o.why) for o in found] == [
        (dead, f"its lab (pid {dead_lab}) and its QEMU are gone")]
    assert workdir.sweep_orphans(tmp_path) == [dead]
    assert not dead.exists() and live.exists()


def test_a_recycled_lab_pid_keeps_nothing(tmp_path: Path) -> None:
    """The owner's pid runs, but another process has it now (its start time differs)."""
    ours = me().lab
    recycled = folder(tmp_path, "recycled", owned_by(Process(ours.pid, ours.start - 1)))
    assert workdir.sweep_orphans(tmp_path) == [recycled]


def test_a_live_qemu_keeps_its_folder_a_recycled_qemu_pid_does_not(tmp_path: Path,
                                                                    spawn) -> None:
    gone = owned_by(Process(a_dead_pid(), 1))
    running = folder(tmp_path, "qemu-runs", gone)
    # A stand-in QEMU: its command line names its folder, as QEMU's -pidfile does.
    q = spawn(sys.executable, "-c", "import time; time.sleep(60)",
              str(running / workdir.QEMU_PIDFILE))
    (running / workdir.QEMU_PIDFILE).write_text(f"{q.pid}\n")
    other = spawn(sys.executable, "-c", "import time; time.sleep(60)")
    recycled = folder(tmp_path, "qemu-recycled", gone, qemu_pid=other.pid)
    assert workdir.qemu_of(running) == Process.of(q.pid)
    assert workdir.qemu_of(recycled) is None
    assert workdir.sweep_orphans(tmp_path) == [recycled]
    assert running.exists()


def test_a_folder_without_owner_is_swept_only_when_old_and_without_qemu(tmp_path: Path,
                                                                         spawn) -> None:
    young = folder(tmp_path, "young")  # make() this instant, or a lab of before owners
    old = folder(tmp_path, "old")
    old_with_qemu = folder(tmp_path, "old-qemu")
    q = spawn(sys.executable, "-c", "import time; time.sleep(60)",
              str(old_with_qemu / workdir.QEMU_PIDFILE))
    (old_with_qemu / workdir.QEMU_PIDFILE).write_text(f"{q.pid}\n")
    long_ago = time.time() - workdir.UNOWNED_GRACE_S - 60
    for d in (old, old_with_qemu):
        os.utime(d, (long_ago, long_ago))
    found = workdir.find_orphans(tmp_path)
    assert [o.path for o in found] == [old] and "no owner" in found[0].why
    workdir.remove(found)
    assert young.exists() and old_with_qemu.exists() and not old.exists()


def test_another_boot_of_the_host_and_another_pid_namespace(tmp_path: Path) -> None:
    ours = me()
    before_reboot = folder(tmp_path, "reboot", Owner(ours.lab, "another-boot", ours.pid_ns))
    container = folder(tmp_path, "container", Owner(Process(a_dead_pid(), 1), ours.boot_id,
                                                    "pid:[1]"))
    found = workdir.find_orphans(tmp_path)
    assert [(o.path, o.why) for o in found] == [
        (before_reboot, "left from before the host's last boot")]
    assert container.exists()


def test_what_is_not_a_guest_folder_is_left_alone(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / f"{workdir.PREFIX}link").symlink_to(elsewhere)
    (tmp_path / f"{workdir.PREFIX}file").write_text("x")
    (tmp_path / "other-dead").mkdir()
    (tmp_path / "other-dead" / workdir.OWNER).write_text(owned_by(Process(1, 1)).to_json())
    bad = folder(tmp_path, "bad-owner")
    (bad / workdir.OWNER).write_text("{not json")  # judged as one without owner: young
    assert workdir.find_orphans(tmp_path) == []
    assert workdir.find_orphans(tmp_path / "missing") == []


def test_a_process_whose_name_has_parentheses_and_spaces(tmp_path: Path, spawn) -> None:
    sleep = tmp_path / "a) (b c"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", sleep)
    p = spawn(str(sleep), "60")
    found = Process.of(p.pid)
    assert found is not None and found.alive() and found.start > 0
    p.kill()
    p.wait()
    assert Process.of(p.pid) is None and not found.alive()


def test_a_zombie_is_gone(spawn) -> None:
    p = spawn("true")
    deadline = time.monotonic() + 10
    while Path(f"/proc/{p.pid}/stat").read_text().split(")")[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert Process.of(p.pid) is None  # not reaped yet, but finished


def test_the_folder_of_a_sigkilled_lab_is_swept_by_the_next_lab_gc(
        tmp_path: Path, spawn, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A lab killed with SIGKILL runs no cleanup; `./lab gc` removes what it left, and leaves
    the folder of a lab that still runs."""
    root = tmp_path / "tmp"
    root.mkdir()
    lab = ("import sys, time; from pathlib import Path; from harness.guest import workdir; "
           "print(workdir.make(Path(sys.argv[1])), flush=True); time.sleep(60)")
    killed, alive = (spawn(sys.executable, "-c", lab, str(root)) for _ in range(2))
    killed_dir, alive_dir = (Path(p.stdout.readline().strip()) for p in (killed, alive))
    assert Owner.read(killed_dir).lab.pid == killed.pid  # type: ignore[union-attr]
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    monkeypatch.setenv("RINGLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("tempfile.tempdir", str(root))
    assert cli.main(["gc", "--dry-run"]) == 0
    assert f"would remove guest folder {killed_dir}: its lab (pid {killed.pid}) and its QEMU " \
           "are gone" in capsys.readouterr().out
    assert killed_dir.exists()
    assert cli.main(["gc"]) == 0
    assert f"removed guest folder {killed_dir}" in capsys.readouterr().out
    assert not killed_dir.exists() and alive_dir.exists()
    assert json.loads((alive_dir / workdir.OWNER).read_text())["pid"] == alive.pid
