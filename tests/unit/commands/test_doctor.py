"""`./lab doctor`: the command line parses to the verb's main; what main prints and returns
given fake host checks: each tool ok or MISSING (exit 1 if any is), the config read (exit 2 if
it cannot be), the mirror (an error is exit 1, the rest still shown), the KVM verdict kept in
the cache or "not checked yet", and the cache by kind. No tool, mirror or KVM is probed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import cache, cli, host
from harness.commands import doctor
from harness.debian import mirror
from harness.errors import LabError
from harness.guest import accel

TOOLS = (host.Tool("qemu-img", "qemu-utils", "disk images"),
         host.Tool("absent-tool", "absent-pkg", "nothing"))


def _setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: tuple[str, ...] = ()
           ) -> Path:
    """lab.yaml with a mirror, the cache in tmp_path, the tools and host id fakes."""
    monkeypatch.setattr(host, "ALL_TOOLS", TOOLS)
    monkeypatch.setattr(host, "missing",
                        lambda tools: [t for t in tools if t.command in missing])
    monkeypatch.setattr(accel, "host_id", lambda: "thishost")
    monkeypatch.setenv("RINGLAB_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "lab.yaml"
    path.write_text("default_kernel: deb\nkernels:\n"
                    "  deb:\n    debian: {suite: trixie, flavour: cloud-amd64}\n"
                    "  sid:\n    debian: {suite: sid, flavour: cloud-amd64}\n"
                    "mirror:\n  url: http://mirror.invalid/debian\n")
    return path


def _doctor(lab_yaml: Path) -> int:
    return doctor.main(cli.build_parser(("doctor",)).parse_args(
        ["--lab-config", str(lab_yaml), "doctor"]))


def test_doctor_parses_and_dispatches_to_main() -> None:
    assert cli.build_parser(("doctor",)).parse_args(["doctor"]).func is doctor.main


def test_the_verb_declares_no_build_tools_and_logs_to_the_screen() -> None:
    needs = host.verb_needs("doctor")
    assert needs.own_logging is False and needs.host_tools == ()
    assert (doctor.OWN_LOGGING, doctor.HOST_TOOLS) == (False, ())


def test_all_well_is_0_with_each_part_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    lab_yaml = _setup(tmp_path, monkeypatch)
    verdict = cache.Layout(tmp_path / "cache").kvm_verdict("thishost")
    verdict.parent.mkdir(parents=True)
    verdict.write_text(json.dumps({"kvm_works": False, "reason": "no /dev/kvm",
                                   "checked_at": 0}))
    kernel_dir = cache.Layout(tmp_path / "cache").folder("kernels") / "k1"
    kernel_dir.mkdir(parents=True)
    (kernel_dir / "vmlinuz").write_bytes(b"\0" * 2048)
    assert _doctor(lab_yaml) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["host tools:",
                         f"  ok      {'qemu-img':20s} (qemu-utils: disk images)",
                         f"  ok      {'absent-tool':20s} (absent-pkg: nothing)"]
    assert lines[3] == f"config: {lab_yaml} (kernels: deb, sid; default deb)"
    assert lines[4].startswith("mirror: http://mirror.invalid/debian (from lab.yaml mirror.url")
    assert lines[5].startswith("kvm: does not work (no /dev/kvm; checked ")
    assert lines[6] == "machine.accel: auto"
    assert lines[7].startswith(f"cache: {tmp_path / 'cache'} (")
    # One line per kind in the cache: its size (on disk, so not asserted) and its entries.
    assert len(lines) == 9 and lines[8].startswith(f"  {'kernels':20s} ")
    assert lines[8].endswith(" KiB (1 entries)")


def test_a_missing_tool_is_said_and_the_exit_is_1(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    lab_yaml = _setup(tmp_path, monkeypatch, missing=("absent-tool",))
    assert _doctor(lab_yaml) == 1
    out = capsys.readouterr().out
    assert f"  MISSING {'absent-tool':20s} (absent-pkg: nothing)" in out.splitlines()
    assert "kvm: not checked yet" in out  # the rest is still shown


def test_a_config_that_cannot_be_read_is_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _setup(tmp_path, monkeypatch)
    assert _doctor(tmp_path / "nosuch.yaml") == 2
    out = capsys.readouterr().out
    assert f"config: ERROR {tmp_path / 'nosuch.yaml'}: no such file" in out
    assert "mirror:" not in out


def test_a_mirror_error_is_exit_1_and_the_rest_still_shown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    lab_yaml = _setup(tmp_path, monkeypatch)

    def resolve(spec: object) -> mirror.Mirror:
        raise LabError("no Debian archive in the host's apt sources")
    monkeypatch.setattr(mirror, "resolve", resolve)
    assert _doctor(lab_yaml) == 1
    out = capsys.readouterr().out
    assert "mirror: ERROR no Debian archive in the host's apt sources" in out
    assert "machine.accel: auto" in out and "cache: " in out
