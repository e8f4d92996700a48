"""harness/runs/interactive.py: the guests booted for a person. What is decided here, with a
fake Lab and guest (nothing boots): `./lab boot` keeps the guest with the console log named
after the kernel, a gdbstub port only with --gdb, and the gdb lines from the right vmlinux
(the -dbg one with --symbols, the build's own otherwise, moved by the KASLR offset only when
the file is there); SIGHUP stops it like Ctrl-C; `./lab ssh` reaches the kept guest over
OpenSSH with its host key pinned, and a throw-away guest runs a command through the probe
runner (its output and status passed on) or opens a shell over SSH."""
from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import cache
from harness.config import DebianKernel, KernelSpec, LabConfig
from harness.guest import kept
from harness.runs import interactive

SPEC = KernelSpec("debian:sid/cloud-amd64", DebianKernel("sid", "cloud-amd64"))


class FakeGuest(SimpleNamespace):
    """The parts of a Guest interactive.py uses."""


def _guest(tmp_path: Path, build_dir: Path | None = None, status: int = 0,
           out: str = "", err: str = "") -> FakeGuest:
    key = tmp_path / "key"
    g = FakeGuest(kernel=SimpleNamespace(name=SPEC.name, release="7.2.13-cloud-amd64",
                                         build_dir=build_dir),
                  record=SimpleNamespace(ssh_port=2222),
                  plan=SimpleNamespace(key=SimpleNamespace(private=key),
                                       rootfs=SimpleNamespace(host_key="ssh-ed25519 AAAAhost")),
                  execs=[])

    def exec_(command: str, timeout: float) -> tuple[int, str, str]:
        g.execs.append((command, timeout))
        return status, out, err
    g.runner = SimpleNamespace(exec=exec_)
    return g


class FakeLab:
    """A Lab that 'boots' `guest`, recording how it was asked to, and hands out `vmlinux`."""
    def __init__(self, tmp_path: Path, guest: FakeGuest, vmlinux: Path | None = None) -> None:
        self.config = LabConfig(tmp_path / "lab.yaml", {}, "", reports_dir=tmp_path / "reports")
        self.layout = cache.Layout(tmp_path / "cache")
        self.guest, self.vmlinux = guest, vmlinux
        self.boots: list[tuple[str, Path, dict]] = []
        self.symbols_asked: list[str] = []

    @contextlib.contextmanager
    def boot(self, name: str, console_log: Path, **kw: object) -> Iterator[FakeGuest]:
        self.boots.append((name, console_log, kw))
        yield self.guest

    def debug_vmlinux(self, name: str) -> Path:
        self.symbols_asked.append(name)
        assert self.vmlinux is not None
        return self.vmlinux


def _calls(monkeypatch: pytest.MonkeyPatch, status: int = 0) -> list[list[str]]:
    calls: list[list[str]] = []
    monkeypatch.setattr(subprocess, "call", lambda argv: calls.append(argv) or status)
    return calls


# --- keep_up ---------------------------------------------------------------------------------

def _keep(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    kept_: list[tuple] = []
    monkeypatch.setattr(kept, "keep", lambda layout, g, kernel, console_log, gdb, detached:
                        kept_.append((layout, g, kernel, console_log, gdb, detached)) or 7)
    monkeypatch.setattr(interactive, "free_port", lambda: 4321)
    return kept_


def test_keep_up_boots_without_a_gdbstub_unless_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept_ = _keep(monkeypatch)
    monkeypatch.setattr(interactive, "gdb_lines", lambda *a: pytest.fail("no gdb asked"))
    g = _guest(tmp_path)
    lab = FakeLab(tmp_path, g)
    opts = kept.BootOptions(kernel=SPEC.name, cpus=2, cmdline="nokaslr")
    assert interactive.keep_up(lab, SPEC, opts, detached=True) == 7  # type: ignore[arg-type]
    log = tmp_path / "reports" / "boot-debian-sid-cloud-amd64-console.log"
    assert lab.boots == [(SPEC.name, log, {"cpus": 2, "cmdline": "nokaslr", "gdb_port": None})]
    assert kept_ == [(lab.layout, g, SPEC.name, log, "", True)]
    # SIGHUP (the terminal closed) stops the guest as Ctrl-C does.
    assert signal.getsignal(signal.SIGHUP) is signal.default_int_handler


def test_keep_up_with_gdb_opens_a_port_and_hands_its_lines_to_keep(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept_ = _keep(monkeypatch)
    asked: list[tuple] = []
    monkeypatch.setattr(interactive, "gdb_lines",
                        lambda lab, g, port, symbols: asked.append((g, port, symbols)) or "GDB\n")
    g = _guest(tmp_path)
    lab = FakeLab(tmp_path, g)
    assert interactive.keep_up(lab, SPEC, kept.BootOptions(gdb=True, symbols=True),  # type: ignore[arg-type]
                               detached=False) == 7
    assert lab.boots[0][2] == {"cpus": None, "cmdline": "", "gdb_port": 4321}
    assert asked == [(g, 4321, True)]
    assert kept_[0][4:] == ("GDB\n", False)


# --- gdb_lines -------------------------------------------------------------------------------

def test_gdb_lines_with_symbols_load_the_dbg_vmlinux_at_the_kaslr_offset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vmlinux = tmp_path / "vmlinux-dbg"
    vmlinux.write_bytes(b"ELF")
    offsets: list[tuple] = []
    monkeypatch.setattr(interactive, "kaslr_offset",
                        lambda g, v: offsets.append((g, v)) or 0x1e000000)
    g = _guest(tmp_path)
    lab = FakeLab(tmp_path, g, vmlinux)
    text = interactive.gdb_lines(lab, g, 4321, symbols=True)  # type: ignore[arg-type]
    assert lab.symbols_asked == [SPEC.name] and offsets == [(g, vmlinux)]
    assert f"-ex 'add-symbol-file {vmlinux} -o 0x1e000000'" in text
    assert "-ex 'target remote 127.0.0.1:4321'" in text


@pytest.mark.parametrize("helpers", [True, False])
def test_gdb_lines_of_a_build_use_its_own_vmlinux_and_fetch_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helpers: bool) -> None:
    build = tmp_path / "build"
    build.mkdir()
    (build / "vmlinux").write_bytes(b"ELF")
    if helpers:
        (build / "vmlinux-gdb.py").write_text("")
    offsets: list[Path] = []
    monkeypatch.setattr(interactive, "kaslr_offset", lambda g, v: offsets.append(v) or 0)
    g = _guest(tmp_path, build_dir=build)
    lab = FakeLab(tmp_path, g)
    text = interactive.gdb_lines(lab, g, 1234, symbols=False)  # type: ignore[arg-type]
    assert lab.symbols_asked == [] and offsets == [build / "vmlinux"]
    assert f"gdb {build / 'vmlinux'} -ex 'target remote 127.0.0.1:1234'" in text
    assert "the guest said so" in text  # offset 0: symbols at the link address
    # The build's own vmlinux is not "symbols fetched": without the build's gdb helpers the
    # lines say CONFIG_GDB_SCRIPTS is off.
    assert (f"-ex 'source {build / 'vmlinux-gdb.py'}'" in text) is helpers
    assert ("CONFIG_GDB_SCRIPTS is off" in text) is not helpers


@pytest.mark.parametrize("built", [False, True])
def test_no_vmlinux_at_hand_asks_no_offset_and_says_how_to_get_symbols(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, built: bool) -> None:
    """A Debian kernel (no build folder), or a build folder whose vmlinux is gone: the guest is
    not asked for its KASLR offset of a file that is not there."""
    monkeypatch.setattr(interactive, "kaslr_offset", lambda g, v: pytest.fail("no vmlinux"))
    build = tmp_path / "build"
    build.mkdir()
    g = _guest(tmp_path, build_dir=build if built else None)
    text = interactive.gdb_lines(FakeLab(tmp_path, g), g, 1234, symbols=False)  # type: ignore[arg-type]
    assert "gdb -ex 'target remote 127.0.0.1:1234'" in text
    assert "`./lab boot --gdb --symbols` fetches it" in text


# --- shell and throwaway ---------------------------------------------------------------------

def test_shell_reaches_the_kept_guest_with_its_host_key_pinned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _calls(monkeypatch, status=5)
    lab = FakeLab(tmp_path, _guest(tmp_path))
    booted = kept.BootedGuest(pid=1, start=2, port=2200, key="/k", host_key="ssh-ed25519 AAAAx",
                              kernel="k", release="r", workdir="/w", qemu_pid=None,
                              qemu_start=None, detached=False, ssh="", banner="")
    assert interactive.shell(lab, booted, ["uname", "-r"]) == 5  # type: ignore[arg-type]
    (argv,) = calls
    assert argv[:5] == ["ssh", "-p", "2200", "-i", "/k"]
    assert argv[-3:] == ["root@127.0.0.1", "uname", "-r"]
    known = lab.layout.known_hosts()
    assert f"UserKnownHostsFile={known}" in argv
    assert known.read_text() == "ringlab-guest ssh-ed25519 AAAAx\n"


def test_a_throwaway_command_goes_through_the_runner_and_its_status_is_returned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    calls = _calls(monkeypatch)
    g = _guest(tmp_path, status=3, out="7.2.13\n", err="warning\n")
    lab = FakeLab(tmp_path, g)
    assert interactive.throwaway(lab, SPEC, ["uname", "-r"]) == 3  # type: ignore[arg-type]
    assert g.execs == [("uname -r", interactive.COMMAND_TIMEOUT_S)]
    assert calls == []  # no SSH for a command
    assert capsys.readouterr() == ("7.2.13\n", "warning\n")
    assert lab.boots == [(SPEC.name,
                          tmp_path / "reports" / "ssh-debian-sid-cloud-amd64-console.log", {})]


def test_a_throwaway_without_a_command_is_a_shell_over_ssh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _calls(monkeypatch, status=130)
    g = _guest(tmp_path)
    assert interactive.throwaway(FakeLab(tmp_path, g), SPEC, []) == 130  # type: ignore[arg-type]
    assert g.execs == []
    (argv,) = calls
    assert argv[:5] == ["ssh", "-p", "2222", "-i", str(tmp_path / "key")]
    assert argv[-1] == "root@127.0.0.1"
