"""Guest architectures: the arm64 guest's QEMU line, host tools, binfmt and rootfs recipe."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness import arch, host
from harness.config import RootfsSpec
from harness.errors import HostError
from harness.guest import qemu, rootfs


def spec(**kw: object) -> qemu.QemuSpec:
    base: dict = dict(kernel=Path("/k/vmlinuz"), initramfs=Path("/k/initramfs.gz"),
                      cmdline="quiet", cpus=1, memory_mb=1024, accel="tcg",
                      root_disk=Path("/run/root.qcow2"), ssh_port=2222, arch="arm64")
    base.update(kw)
    return qemu.QemuSpec(**base)


def value_of(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_an_arm64_guest_is_a_virt_machine_with_a_pl011_console_and_pci_virtio() -> None:
    argv = qemu.command(spec())
    assert argv[0] == "qemu-system-aarch64"
    assert value_of(argv, "-machine") == ["virt"]
    assert value_of(argv, "-cpu") == [qemu.TCG_CPU_ARM64]
    assert value_of(argv, "-append")[0].startswith("console=ttyAMA0,115200 root=/dev/vda ")
    assert value_of(argv, "-device") == ["virtio-net-pci,netdev=net0"]
    assert value_of(argv, "-serial") == ["stdio"] and "-no-reboot" in argv


def test_the_x86_line_is_unchanged_and_a_cpu_model_can_be_asked_for() -> None:
    argv = qemu.command(spec(arch="x86_64"))
    assert argv[0] == "qemu-system-x86_64" and value_of(argv, "-machine") == ["pc"]
    assert value_of(argv, "-cpu") == ["qemu64,-cx16"]
    assert value_of(argv, "-append")[0].startswith(qemu.BASE_CMDLINE)
    assert value_of(qemu.command(spec(tcg_cpu="cortex-a72")), "-cpu") == ["cortex-a72"]
    assert value_of(qemu.command(spec(accel="kvm")), "-cpu") == ["host"]


def test_arches_by_debian_name_and_host(monkeypatch: pytest.MonkeyPatch) -> None:
    assert arch.from_debian("arm64") is arch.ARM64 and arch.from_debian("amd64") is arch.X86_64
    assert arch.from_debian("armhf") is None
    monkeypatch.setattr(arch.platform, "machine", lambda: "aarch64")
    assert arch.is_native(arch.ARM64) and not arch.is_native(arch.X86_64)
    monkeypatch.setattr(arch.platform, "machine", lambda: "x86_64")
    assert not arch.is_native(arch.ARM64)


def test_host_tools_per_arch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(host, "_path", lambda: str(tmp_path))
    with pytest.raises(HostError, match="apt-get install qemu-system-arm qemu-utils"):
        host.require(host.boot_tools(arch.ARM64))
    monkeypatch.setattr(arch.platform, "machine", lambda: "x86_64")
    assert [t.package for t in host.foreign_rootfs_tools(arch.ARM64)] == ["qemu-user-static"]
    assert host.foreign_rootfs_tools(arch.X86_64) == ()


def test_binfmt_is_registered_from_qemu_user_static_conf(tmp_path: Path) -> None:
    root, conf = tmp_path / "binfmt_misc", tmp_path / "binfmt.d"
    root.mkdir()
    conf.mkdir()
    (root / "register").write_text("")
    line = ":qemu-aarch64:M::\\x7fELF:\\xff:/usr/libexec/qemu-binfmt/aarch64-binfmt-P:OPF"
    (conf / "qemu-aarch64.conf").write_text(f"# comment\n{line}\n")
    said = host.ensure_binfmt(arch.ARM64, root, conf)
    assert (root / "register").read_text() == line + "\n" and "registered qemu-aarch64" in said
    (root / "qemu-aarch64").write_text("enabled\n")
    assert "already registered" in host.ensure_binfmt(arch.ARM64, root, conf)


def test_binfmt_without_the_conf_names_the_package(tmp_path: Path) -> None:
    (tmp_path / "register").write_text("")
    with pytest.raises(HostError) as e:
        host.ensure_binfmt(arch.ARM64, tmp_path, tmp_path / "none")
    assert e.value.hint == "apt-get install qemu-user-static"


def test_the_rootfs_recipe_is_per_arch_and_x86_keeps_its_old_hash() -> None:
    x86 = rootfs.recipe(RootfsSpec(), "ssh-ed25519 AAAA")
    assert "architecture" not in x86  # the images (and snapshots) made before arches hold
    arm = rootfs.recipe(RootfsSpec(), "ssh-ed25519 AAAA", arch.ARM64)
    assert arm["architecture"] == "arm64"
    assert rootfs.recipe_hash(arm) != rootfs.recipe_hash(x86)


def test_cpu_models_bench_parses_models_and_says_which_boots_were_not_clean() -> None:
    from harness.commands import bench_cpu
    assert bench_cpu.parse_models(None, "arm64") == bench_cpu.ARM64_MODELS
    assert bench_cpu.parse_models("max,pauth-impdef=on; neoverse-n1", "arm64") == \
        ("max,pauth-impdef=on", "neoverse-n1")
    r = bench_cpu.ModelRuns("max", [30.0, 36.0, 41.0], ["run 4: WARNING at x"])
    assert "median  36.00" in r.line() and "1 not clean: run 4: WARNING at x" in r.line()
    assert "no clean boot" in bench_cpu.ModelRuns("cortex-a72").line()


def test_arm64_tcg_default_boots_every_page_size() -> None:
    """cortex-a72 was as fast, but has no 16 KiB granule: arm64-16k kernels would not boot."""
    assert qemu.TCG_CPUS["arm64"] == "neoverse-n1"


def test_host_tools_come_from_the_arch_records() -> None:
    """harness/host.py names no arch of its own: what differs per arch is in arch.py's Arch."""
    tree = ast.parse(Path(host.__file__).read_text())
    named = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not named & {"ARM64", "X86_64"}
    for a in arch.ARCHES.values():
        qemu_tool = host.Tool(a.qemu, a.qemu_package, f"runs the {a.name} guests")
        assert host.boot_tools(a) == (qemu_tool, host.OVERLAY_TOOL)
        assert host.rootfs_emulator(a).package == a.qemu_user_package
