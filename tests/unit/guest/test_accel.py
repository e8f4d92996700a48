"""harness/guest/accel.py: KVM or TCG. A machine.accel other than auto is obeyed as it is; auto
boots a check guest under KVM once per host and keeps the verdict, so a second run reads it
instead of booting again; a verdict that cannot be read is checked again; a failed check falls
back to TCG with the reason. The check guest and QEMU are faked: only the decisions run."""
from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness import cache
from harness.guest import accel
from harness.kernels.kernel import BootableKernel

KERNEL = BootableKernel(name="k", release="6.12", vmlinuz=Path("/vmlinuz"),
                        initramfs=Path("/initrd"), modules_image=None, config=None,
                        description="k")


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, str]]:
    """check_kvm's answers, in order (each call takes the next); the host's id fixed."""
    answers: list[tuple[bool, str]] = []
    monkeypatch.setattr(accel, "host_id", lambda: "host1")
    monkeypatch.setattr(accel, "check_kvm", lambda kernel, workdir: answers.pop(0))
    return answers


def test_a_setting_other_than_auto_is_obeyed_without_a_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accel, "check_kvm", lambda *a: pytest.fail("checked"))
    monkeypatch.setattr(accel, "host_id", lambda: pytest.fail("identified the host"))
    assert accel.choose("tcg", KERNEL, tmp_path) == ("tcg", "machine.accel is tcg")
    assert accel.choose("kvm", KERNEL, tmp_path) == ("kvm", "machine.accel is kvm")


def test_auto_checks_once_and_keeps_the_verdict_per_host(
        tmp_path: Path, checks: list[tuple[bool, str]]) -> None:
    checks.append((True, "a KVM guest reached its initramfs in 1.0 s"))
    first = accel.choose("auto", KERNEL, tmp_path)
    assert first == ("kvm", "KVM works here (a KVM guest reached its initramfs in 1.0 s)")
    assert accel.choose("auto", KERNEL, tmp_path) == first  # no answer left: read, not checked
    kept = json.loads(cache.Layout(tmp_path).kvm_verdict("host1").read_text())
    assert kept["kvm_works"] is True and kept["host"] == "host1"


def test_a_failed_check_falls_back_to_tcg_with_its_reason(
        tmp_path: Path, checks: list[tuple[bool, str]], caplog: pytest.LogCaptureFixture
        ) -> None:
    checks.append((False, "/dev/kvm does not exist"))
    with caplog.at_level(logging.WARNING):
        assert accel.choose("auto", KERNEL, tmp_path) == (
            "tcg", "KVM does not work here: /dev/kvm does not exist")
    path = cache.Layout(tmp_path).kvm_verdict("host1")
    assert f"Verdict kept in {path}: delete it to check again" in caplog.text


def test_an_unreadable_verdict_is_checked_again(tmp_path: Path,
                                                checks: list[tuple[bool, str]]) -> None:
    path = cache.Layout(tmp_path).kvm_verdict("host1")
    path.parent.mkdir(parents=True)
    path.write_text('{"kvm_works": true}')  # a verdict of an older format: fields missing
    checks.append((False, "QEMU with KVM exited before the guest booted: x"))
    assert accel.choose("auto", KERNEL, tmp_path)[0] == "tcg"
    assert json.loads(path.read_text())["kvm_works"] is False


def _qemu_version(monkeypatch: pytest.MonkeyPatch, out: str | Exception) -> None:
    def run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        if isinstance(out, Exception):
            raise out
        return subprocess.CompletedProcess(argv, 0, out, "")
    monkeypatch.setattr(accel.subprocess, "run", run)


def test_the_host_id_changes_with_the_qemu_version(monkeypatch: pytest.MonkeyPatch) -> None:
    _qemu_version(monkeypatch, "QEMU emulator version 9.2.0\nCopyright\n")
    a, again = accel.host_id("qemu"), accel.host_id("qemu")
    _qemu_version(monkeypatch, "QEMU emulator version 10.0.0\n")
    b = accel.host_id("qemu")
    assert a == again and a != b and len(a) == 16


def test_a_host_without_qemu_still_has_an_id(monkeypatch: pytest.MonkeyPatch) -> None:
    _qemu_version(monkeypatch, FileNotFoundError("qemu"))
    missing = accel.host_id("qemu")
    _qemu_version(monkeypatch, "")  # no output: no version line either
    assert accel.host_id("qemu") == missing


class _VM:
    """A check guest: reaches its initramfs (`ok`) or not, with what its console said."""
    ok = False
    console = ""
    stopped = False

    def __init__(self, argv: list[str], console_log: Path) -> None:
        _VM.stopped = False

    def start(self) -> None:
        pass

    def check_ok(self) -> bool:
        return _VM.ok

    def wait_for(self, check: Any, deadline: float) -> bool:
        return check()

    def stop(self) -> None:
        _VM.stopped = True

    def console_text(self) -> str:
        return _VM.console


@pytest.fixture
def kvm_device(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """A /dev/kvm that exists and is ours; QEMU's argv captured, the VM faked."""
    real_exists = accel.os.path.exists
    monkeypatch.setattr(accel.os.path, "exists",
                        lambda p: True if p == "/dev/kvm" else real_exists(p))
    monkeypatch.setattr(accel.os, "access", lambda p, mode: True)
    specs: list[Any] = []
    monkeypatch.setattr(accel.qemu, "command", lambda spec: specs.append(spec) or ["qemu"])
    monkeypatch.setattr(accel, "VM", _VM)
    monkeypatch.setattr(_VM, "ok", False)
    monkeypatch.setattr(_VM, "console", "")
    return specs


def test_no_dev_kvm_is_said_without_booting(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    real_exists = accel.os.path.exists
    monkeypatch.setattr(accel.os.path, "exists",
                        lambda p: False if p == "/dev/kvm" else real_exists(p))
    monkeypatch.setattr(accel, "VM", lambda *a: pytest.fail("booted"))
    assert accel.check_kvm(KERNEL, tmp_path) == (False, "/dev/kvm does not exist")


def test_a_dev_kvm_not_ours_is_said_without_booting(tmp_path: Path, kvm_device: list[Any],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accel.os, "access", lambda p, mode: False)
    works, why = accel.check_kvm(KERNEL, tmp_path)
    assert not works and why == "/dev/kvm is not readable and writable by this user"
    assert kvm_device == []


def test_a_check_guest_that_boots_proves_kvm(tmp_path: Path, kvm_device: list[Any]) -> None:
    _VM.ok = True
    works, why = accel.check_kvm(KERNEL, tmp_path)
    assert works and why.startswith("a KVM guest reached its initramfs in ")
    [spec] = kvm_device
    assert (spec.accel, spec.kernel, spec.initramfs, spec.cpus) == ("kvm", KERNEL.vmlinuz,
                                                                    KERNEL.initramfs, 1)
    assert _VM.stopped


def test_a_check_guest_that_never_boots_names_its_last_console_line(
        tmp_path: Path, kvm_device: list[Any]) -> None:
    _VM.console = "SeaBIOS\nBooting from ROM...\n\n"
    works, why = accel.check_kvm(KERNEL, tmp_path, timeout_s=0)
    assert not works
    assert why == "a KVM guest did not reach its initramfs in 0 s (last: Booting from ROM...)"
    assert _VM.stopped


def test_a_qemu_that_exits_early_is_told_from_a_hang(tmp_path: Path,
                                                     kvm_device: list[Any]) -> None:
    works, why = accel.check_kvm(KERNEL, tmp_path, timeout_s=3600)
    assert (works, why) == (False, "QEMU with KVM exited before the guest booted: "
                                   "no console output")
