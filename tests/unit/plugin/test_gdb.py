"""harness/pytest_plugin/gdb.py (--gdb-on-failure): only the first failing call of a test with
a guest is kept (a passing call, a setup error or a guestless test is not), the run is told to
stop after it; at the end a dead guest is said to have nothing to attach to, a guest QEMU would
not pause is said so, and a paused one gets the gdb commands with the KASLR offset read. The
guest, QMP and the wait for Ctrl-C are faked."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.errors import LabError
from harness.guest import monitor
from harness.pytest_plugin import gdb as plugin
from harness.pytest_plugin.guests import GUEST_KEY


def _guest(dead: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(health=lambda: dead, workdir=Path("/w"),
                           kernel=SimpleNamespace(name="k", release="6.12", build_dir=None),
                           record=SimpleNamespace(ssh_port=2222),
                           plan=SimpleNamespace(key=SimpleNamespace(private="/key")),
                           vm=SimpleNamespace(alive=lambda: False))


def _report(p: plugin.GdbOnFailure, nodeid: str, when: str, outcome: str,
            g: Any = None) -> Any:
    item = SimpleNamespace(nodeid=nodeid, stash=pytest.Stash(),
                           session=SimpleNamespace(shouldfail=False))
    if g is not None:
        item.stash[GUEST_KEY] = g
    hook = p.pytest_runtest_makereport(item, None)  # type: ignore[arg-type]
    next(hook)
    report = SimpleNamespace(when=when, failed=outcome == "failed")
    with pytest.raises(StopIteration):
        hook.send(report)
    return item


def _plugin(symbols: Path | Exception | None = None) -> plugin.GdbOnFailure:
    def debug_vmlinux(name: str) -> Path | None:
        if isinstance(symbols, Exception):
            raise symbols
        return symbols
    lab = SimpleNamespace(debug_vmlinux=debug_vmlinux)
    return plugin.GdbOnFailure(SimpleNamespace(get_pool=lambda: SimpleNamespace(lab=lab)))  # type: ignore[arg-type]


def test_only_the_first_failing_call_with_a_guest_is_kept() -> None:
    p = _plugin()
    g1, g2 = _guest(), _guest()
    assert not _report(p, "t::pass", "call", "passed", g1).session.shouldfail
    assert not _report(p, "t::setup", "setup", "failed", g1).session.shouldfail
    assert not _report(p, "t::noguest", "call", "failed").session.shouldfail
    first = _report(p, "t::first", "call", "failed", g1)
    assert first.session.shouldfail == "--gdb-on-failure: t::first failed; its guest is kept"
    _report(p, "t::second", "call", "failed", g2)
    assert p.kept == ("t::first", g1)


def test_nothing_kept_is_nothing_done(capsys: pytest.CaptureFixture[str]) -> None:
    _plugin().pytest_sessionfinish(None)  # type: ignore[arg-type]
    assert capsys.readouterr().err == ""


def test_a_dead_guest_has_nothing_to_attach_to(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    p = _plugin()
    p.kept = ("t::x", _guest(dead="Kernel panic"))  # type: ignore[assignment]
    monkeypatch.setattr(plugin.gdb, "pause_with_gdbstub", lambda *a: pytest.fail("paused"))
    p.pytest_sessionfinish(None)  # type: ignore[arg-type]
    assert "the guest of t::x died (Kernel panic); nothing to attach to" in capsys.readouterr().err


def test_a_guest_qemu_would_not_pause_is_said(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    p = _plugin()
    p.kept = ("t::x", _guest())  # type: ignore[assignment]
    monkeypatch.setattr(plugin, "free_port", lambda: 5555)

    def refuse(sock: Path, port: int) -> None:
        raise monitor.MonitorError("QEMU refused to pause for gdb: no")
    monkeypatch.setattr(plugin.gdb, "pause_with_gdbstub", refuse)
    p.pytest_sessionfinish(None)  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert "could not pause the guest of t::x: QEMU refused to pause for gdb: no" in err
    assert "gdbstub on" not in err


def test_a_paused_guest_gets_the_commands_at_its_offset(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    vmlinux = tmp_path / "vmlinux"
    vmlinux.write_text("")
    p = _plugin(vmlinux)
    g = _guest()
    p.kept = ("t::x", g)  # type: ignore[assignment]
    paused: list[tuple[Path, int]] = []
    monkeypatch.setattr(plugin, "free_port", lambda: 5555)
    monkeypatch.setattr(plugin.gdb, "kaslr_offset", lambda guest, v: 0x2000000)
    monkeypatch.setattr(plugin.gdb, "pause_with_gdbstub", lambda s, port: paused.append((s, port)))
    p.pytest_sessionfinish(None)  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert paused == [(Path("/w/qmp.sock"), 5555)]
    assert "the guest of t::x is paused (k, 6.12); QEMU's gdbstub on 127.0.0.1:5555" in err
    assert f"add-symbol-file {vmlinux} -o 0x2000000" in err
    assert "ssh -p 2222 -i /key" in err


def test_no_symbols_still_pauses_with_the_plain_commands(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    p = _plugin(LabError("no linux-image-6.12-dbg"))
    p.kept = ("t::x", _guest())  # type: ignore[assignment]
    monkeypatch.setattr(plugin, "free_port", lambda: 5555)
    monkeypatch.setattr(plugin.gdb, "kaslr_offset", lambda *a: pytest.fail("no vmlinux to read"))
    monkeypatch.setattr(plugin.gdb, "pause_with_gdbstub", lambda *a: None)
    p.pytest_sessionfinish(None)  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert "no symbols for k: no linux-image-6.12-dbg" in err
    assert "gdb -ex 'target remote 127.0.0.1:5555'" in err
