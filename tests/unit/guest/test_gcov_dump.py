"""A guest's gcov dump: the tar its script writes, unpacked whole or not at all."""
from __future__ import annotations

import base64
import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness.guest import gcov
from harness.guest.ssh import CommandResult


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_unpack_keeps_gcda_files_only_and_refuses_escapes(tmp_path: Path) -> None:
    d = gcov.unpack(_tar({"root/out/kernel/events/core.gcda": b"gcda",
                          "root/out/kernel/events/core.gcno": b"no",
                          "../evil.gcda": b"x"}), tmp_path / "g1")
    assert d.files == 1
    assert (tmp_path / "g1/root/out/kernel/events/core.gcda").read_bytes() == b"gcda"
    assert not (tmp_path / "evil.gcda").exists() and not (tmp_path / "g1.part").exists()


class FakeGuest:
    """Runs the dump script on this host, over a folder standing in for debugfs."""
    def __init__(self, root: Path) -> None:
        self.root = root

    def run(self, command: str, timeout: float = 60.0, user: str = "root") -> CommandResult:
        script = command.split("; python3 -c '", 1)[1].rstrip("'")
        script = script.replace(gcov.GCOV_ROOT, str(self.root))
        p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        return CommandResult(command, p.returncode, p.stdout, p.stderr, 0.0)


def test_the_dump_script_reads_every_gcda_under_debugfs(tmp_path: Path) -> None:
    root = tmp_path / "gcov"
    (root / "b/out/kernel/trace").mkdir(parents=True)
    (root / "b/out/kernel/trace/trace.gcda").write_bytes(b"\x00counts")
    (root / "b/out/kernel/trace/trace.gcno").symlink_to(tmp_path)
    d = gcov.dump(FakeGuest(root), tmp_path / "dump")
    assert d.files == 1
    assert (tmp_path / "dump/b/out/kernel/trace/trace.gcda").read_bytes() == b"\x00counts"


def test_a_failed_read_is_an_oserror(tmp_path: Path) -> None:
    class Broken:
        def run(self, command: str, timeout: float = 60.0, user: str = "root") -> CommandResult:
            return CommandResult(command, 1, "", "No such file or directory", 0.0)
    with pytest.raises(OSError, match="No such file"):
        gcov.dump(Broken(), tmp_path / "d")


def test_lost_leaves_a_note_beside_the_dumps(tmp_path: Path) -> None:
    folder = gcov.guest_folder(tmp_path / "console.log", "g-1")
    gcov.lost(folder, "kernel panic: x")
    assert (folder.parent / (folder.name + ".lost")).read_text() == "kernel panic: x\n"


def _guest(tmp_path: Path, config: str, health: str | None) -> object:
    """A Guest as keep_coverage() sees it: its plan's kernel config, console log, health."""
    from types import SimpleNamespace

    from harness.guest.guest import Guest
    (tmp_path / "config").write_text(config)
    kernel = SimpleNamespace(config_option=lambda o: "y" if f"CONFIG_{o}=y" in config else None)
    g = Guest.__new__(Guest)
    g.plan = SimpleNamespace(kernel=kernel, console_log=tmp_path / "console.log")  # type: ignore[assignment]
    g.workdir = tmp_path / "ringlab-guest-x"
    g.coverage_kept, g.coverage_dumps = False, 0
    g.health = lambda: health  # type: ignore[method-assign]
    g.run = FakeGuest(tmp_path / "debugfs").run  # type: ignore[method-assign]
    return g


def test_a_dead_guest_leaves_a_lost_note_and_a_live_one_its_counters(tmp_path: Path) -> None:
    (tmp_path / "debugfs/b/out/kernel/events").mkdir(parents=True)
    (tmp_path / "debugfs/b/out/kernel/events/core.gcda").write_bytes(b"x")
    dead = _guest(tmp_path, "CONFIG_GCOV_KERNEL=y\n", "kernel panic: Oops")
    dead.keep_coverage()  # type: ignore[attr-defined]
    notes = list((tmp_path / "gcov").glob("*.lost"))
    assert len(notes) == 1 and notes[0].read_text() == "kernel panic: Oops\n"
    live = _guest(tmp_path, "CONFIG_GCOV_KERNEL=y\n", None)
    live.keep_coverage()  # type: ignore[attr-defined]
    live.keep_coverage()  # type: ignore[attr-defined]  # once per boot
    assert len(list((tmp_path / "gcov").rglob("core.gcda"))) == 1


def test_a_kernel_without_gcov_is_not_read(tmp_path: Path) -> None:
    g = _guest(tmp_path, "# CONFIG_GCOV_KERNEL is not set\n", None)
    g.keep_coverage()  # type: ignore[attr-defined]
    assert not (tmp_path / "gcov").exists()


@pytest.mark.parametrize("restored", [False, True])
def test_a_cold_boot_keeps_what_it_ran_before_the_counters_are_zeroed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restored: bool) -> None:
    """The persistent buffer is set up only while booting: a cold boot's counters are a dump
    of their own (`-boot`), then zeroed; a restored guest's are only zeroed."""
    from types import SimpleNamespace

    from harness.guest import guest as guest_module
    (tmp_path / "debugfs/b/out/kernel/trace").mkdir(parents=True)
    (tmp_path / "debugfs/b/out/kernel/trace/ring_buffer.gcda").write_bytes(b"x")
    g = _guest(tmp_path, "CONFIG_GCOV_KERNEL=y\n", None)
    g.record = SimpleNamespace(restored=restored)  # type: ignore[attr-defined]
    resets = []
    monkeypatch.setattr(guest_module, "_boot", lambda plan: g)
    monkeypatch.setattr(guest_module.coverage, "reset", lambda guest: resets.append(guest))
    assert guest_module.boot(g.plan) is g  # type: ignore[attr-defined, arg-type]
    boot_dumps = [d.name for d in (tmp_path / "gcov").glob("*-boot")] \
        if (tmp_path / "gcov").exists() else []
    assert resets == [g] and len(boot_dumps) == (0 if restored else 1)
    assert g.coverage_kept is False  # type: ignore[attr-defined]  # the stop's dump is still owed
