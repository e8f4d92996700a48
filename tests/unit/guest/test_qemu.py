"""The QEMU command line."""
from __future__ import annotations

from pathlib import Path

from harness.guest import qemu


def spec(**kw: object) -> qemu.QemuSpec:
    base: dict = dict(kernel=Path("/k/vmlinuz"), initramfs=Path("/k/initramfs.gz"), cmdline="quiet",
                cpus=2, memory_mb=1024, accel="tcg", tcg_threads="single",
                root_disk=Path("/run/root.qcow2"), modules_disk=Path("/k/modules.ext4"),
                ssh_port=2222, pidfile=Path("/run/qemu.pid"))
    base.update(kw)
    return qemu.QemuSpec(**base)


def value_of(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_tcg_line() -> None:
    argv = qemu.command(spec())
    assert argv[0] == "qemu-system-x86_64"
    assert value_of(argv, "-accel") == ["tcg,thread=single"]
    assert value_of(argv, "-cpu") == ["qemu64,-cx16"]
    assert value_of(argv, "-smp") == ["2"] and value_of(argv, "-m") == ["1024"]
    assert "-no-reboot" in argv and value_of(argv, "-serial") == ["stdio"]
    assert value_of(argv, "-display") == ["none"]


def test_kvm_line() -> None:
    argv = qemu.command(spec(accel="kvm"))
    assert value_of(argv, "-accel") == ["kvm"] and value_of(argv, "-cpu") == ["host"]


def test_ssh_forward_binds_loopback_only() -> None:
    netdev = value_of(qemu.command(spec()), "-netdev")[0]
    assert "hostfwd=tcp:127.0.0.1:2222-:22" in netdev
    assert "restrict=on" in netdev


def test_disks_root_first_modules_read_only() -> None:
    drives = value_of(qemu.command(spec()), "-drive")
    assert drives[0].startswith("file=/run/root.qcow2,") and "format=qcow2" in drives[0]
    assert drives[1].startswith("file=/k/modules.ext4,") and "readonly=on" in drives[1]


def test_kernel_cmdline() -> None:
    append = value_of(qemu.command(spec()), "-append")[0]
    assert append.startswith(qemu.base_cmdline()) and append.endswith(" quiet")
    assert "panic=-1" in append and "console=ttyS0" in append


def test_optional_parts_left_out() -> None:
    argv = qemu.command(spec(root_disk=None, modules_disk=None, ssh_port=None, pidfile=None))
    assert "-drive" not in argv and "-netdev" not in argv and "-pidfile" not in argv


def test_tcg_threads_auto() -> None:
    assert qemu.tcg_threads("auto", 1) == "multi"
    assert qemu.tcg_threads("auto", 2) == "single"
    assert qemu.tcg_threads("multi", 2) == "multi"


def test_a_comma_in_a_cache_path_is_doubled_inside_drive_options_only() -> None:
    argv = qemu.command(spec(kernel=Path("/c,1/vmlinuz"), initramfs=Path("/c,1/initramfs.gz"),
                             root_disk=Path("/c,1/root.qcow2"),
                             modules_disk=Path("/c,1/modules.ext4")))
    drives = value_of(argv, "-drive")
    assert drives[0] == "file=/c,,1/root.qcow2,if=virtio,format=qcow2,cache=unsafe"
    assert drives[1] == "file=/c,,1/modules.ext4,if=virtio,format=raw,readonly=on"
    # -kernel and -initrd take one bare value: QEMU opens it as written.
    assert value_of(argv, "-kernel") == ["/c,1/vmlinuz"]
    assert value_of(argv, "-initrd") == ["/c,1/initramfs.gz"]


def test_qemu_itself_reads_the_escaped_drive_path_whole(tmp_path: Path) -> None:
    import shutil
    import subprocess

    import pytest

    if shutil.which(qemu.QEMU) is None:
        pytest.skip(f"{qemu.QEMU} is not installed")
    missing = tmp_path / "a,b" / "root.qcow2"
    argv = [qemu.QEMU, "-nodefaults", "-display", "none", "-machine", "none",
            "-drive", f"file={qemu.opt_value(missing)},if=none,format=qcow2"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and f"Could not open '{missing}'" in p.stderr


def test_a_gdbstub_listens_on_loopback_only_when_asked() -> None:
    argv = qemu.command(spec(gdb_port=40683))
    assert argv[argv.index("-gdb") + 1] == "tcp:127.0.0.1:40683"
    assert "-gdb" not in qemu.command(spec())
