"""harness/guest/gdb.py: gdb on a guest. What to type depends on the symbols there are (a
build's vmlinux, a -dbg package's, none) and on the KASLR offset the guest runs at; the offset
is the guest's _text less the file's, None when either cannot be read (kptr_restrict hides it
as zeros); pausing stops the vCPUs before opening the stub and says so when QEMU refuses.
nm, the guest and QMP are faked."""
from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from qemu.qmp import QMPError

from harness.guest import gdb, monitor
from harness.kernels.kernel import BootableKernel


def _kernel(build_dir: Path | None = None) -> BootableKernel:
    return BootableKernel(name="k", release="6.12.1-cloud-amd64", vmlinuz=Path("/v"),
                          initramfs=Path("/i"), modules_image=None, config=None,
                          description="k", build_dir=build_dir)


def _build(tmp_path: Path, helpers: bool) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    (out / "vmlinux").write_text("")
    if helpers:
        (out / "vmlinux-gdb.py").write_text("")
    return out


def test_without_symbols_the_help_names_the_dbg_package() -> None:
    text = gdb.gdb_help(_kernel(), 1234)
    assert "gdb -ex 'target remote 127.0.0.1:1234'" in text
    assert "linux-image-6.12.1-cloud-amd64-dbg: `./lab boot --gdb --symbols` fetches" in text


def test_a_build_with_its_helpers_at_a_kaslr_offset(tmp_path: Path) -> None:
    out = _build(tmp_path, helpers=True)
    text = gdb.gdb_help(_kernel(out), 1234, offset=0x1a000000)
    assert (f"gdb -ex 'add-symbol-file {out / 'vmlinux'} -o 0x1a000000' "
            f"-ex 'target remote 127.0.0.1:1234' -ex 'source {out / 'vmlinux-gdb.py'}'") in text
    assert "(the kernel runs 0x1a000000 above its link address: KASLR)" in text
    assert "CONFIG_GDB_SCRIPTS" not in text


def test_a_build_without_its_helpers_says_why(tmp_path: Path) -> None:
    out = _build(tmp_path, helpers=False)
    text = gdb.gdb_help(_kernel(out), 1, offset=0)
    assert f"gdb {out / 'vmlinux'} -ex" in text and "CONFIG_GDB_SCRIPTS is off" in text
    assert "(symbols at the link address: the guest said so)" in text


def test_an_unknown_offset_asks_for_nokaslr(tmp_path: Path) -> None:
    dbg = tmp_path / "vmlinux"
    dbg.write_text("")
    text = gdb.gdb_help(_kernel(), 1, symbols=dbg, offset=None)
    assert f"gdb {dbg} -ex" in text and "only with --cmdline nokaslr" in text
    assert "CONFIG_GDB_SCRIPTS" not in text  # a -dbg package has no helpers to miss


def test_symbols_that_are_not_there_are_no_symbols(tmp_path: Path) -> None:
    text = gdb.gdb_help(_kernel(), 1, symbols=tmp_path / "gone", offset=0x1000)
    assert "add-symbol-file" not in text and "-dbg: `./lab boot --gdb --symbols`" in text


def _offset(monkeypatch: pytest.MonkeyPatch, guest_says: str, nm_says: str,
            status: int = 0) -> int | None:
    monkeypatch.setattr(gdb.subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(
        argv, 0, nm_says, ""))
    g = SimpleNamespace(run=lambda cmd: SimpleNamespace(exit_status=status, stdout=guest_says))
    return gdb.kaslr_offset(g, Path("/vmlinux"))  # type: ignore[arg-type]


NM = "ffffffff81000000 T _stext\nffffffff81000000 T _text\nffffffff81000010 t _textish\n"


def test_the_offset_is_the_guests_text_less_the_files(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _offset(monkeypatch, "ffffffff9b000000 T _text\n", NM) == 0x1a000000


@pytest.mark.parametrize("guest_says,nm_says,status", [
    ("0000000000000000 T _text\n", NM, 0),          # kptr_restrict: zeros
    ("", NM, 1),                                     # no kallsyms
    ("ffffffff9b000000 T _text\n", "ffffffff81000000 T _stext\n", 0),  # no _text in the file
], ids=["hidden", "unread", "no-text-in-vmlinux"])
def test_an_offset_that_cannot_be_read_is_none(monkeypatch: pytest.MonkeyPatch, guest_says: str,
                                               nm_says: str, status: int) -> None:
    assert _offset(monkeypatch, guest_says, nm_says, status) is None


class FakeQMP:
    answers: dict[str, Any] = {}
    executed: list[tuple[str, Any]] = []

    def __init__(self, name: str) -> None:
        pass

    async def connect(self, address: str) -> None:
        pass

    async def execute(self, cmd: str, arguments: dict | None = None) -> Any:
        FakeQMP.executed.append((cmd, arguments))
        said = FakeQMP.answers.get(cmd, {})
        if isinstance(said, Exception):
            raise said
        return said

    async def disconnect(self) -> None:
        pass


@pytest.fixture
def qmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(monitor, "QMPClient", FakeQMP)
    monkeypatch.setattr(FakeQMP, "executed", [])
    monkeypatch.setattr(FakeQMP, "answers", {
        "human-monitor-command": "Waiting for gdb connection on device 'tcp:127.0.0.1:4321'\r\n"})
    sock = tmp_path / "qmp.sock"
    sock.touch()
    return sock


def test_the_guest_is_stopped_before_the_stub_opens(qmp: Path) -> None:
    gdb.pause_with_gdbstub(qmp, 4321)
    assert FakeQMP.executed == [
        ("stop", None),
        ("human-monitor-command", {"command-line": "gdbserver tcp:127.0.0.1:4321"})]


def test_a_stub_that_did_not_start_is_said_with_what_qemu_said(qmp: Path) -> None:
    FakeQMP.answers["human-monitor-command"] = "gdbstub: port busy"
    with pytest.raises(monitor.MonitorError, match="gdbserver did not start: gdbstub: port busy"):
        gdb.pause_with_gdbstub(qmp, 4321)


def test_a_qemu_refusing_to_stop_is_a_monitor_error(qmp: Path) -> None:
    FakeQMP.answers["stop"] = QMPError("not now")
    with pytest.raises(monitor.MonitorError, match="QEMU refused to pause for gdb: not now"):
        gdb.pause_with_gdbstub(qmp, 4321)
