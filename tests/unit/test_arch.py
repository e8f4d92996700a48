"""Guest architectures: every per-arch fact in an Arch record (and none elsewhere in
harness/), the arm64 guest's QEMU line, host tools, binfmt and rootfs recipe."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from harness import arch, host, paths
from harness.config import BuildKernel, KernelSpec, RootfsSpec
from harness.errors import BuildError, HostError
from harness.guest import qemu, rootfs
from harness.kernels import kbuild


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
    assert value_of(argv, "-cpu") == [arch.ARM64.tcg_cpu]
    assert value_of(argv, "-append")[0].startswith("console=ttyAMA0,115200 root=/dev/vda ")
    assert value_of(argv, "-device") == ["virtio-net-pci,netdev=net0"]
    assert value_of(argv, "-serial") == ["stdio"] and "-no-reboot" in argv


def test_the_x86_line_is_unchanged_and_a_cpu_model_can_be_asked_for() -> None:
    argv = qemu.command(spec(arch="x86_64"))
    assert argv[0] == "qemu-system-x86_64" and value_of(argv, "-machine") == ["pc"]
    assert value_of(argv, "-cpu") == ["qemu64,-cx16"]
    assert value_of(argv, "-append")[0].startswith("console=ttyS0,115200 root=/dev/vda ")
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


def test_arm64_tcg_default_boots_every_page_size() -> None:
    """cortex-a72 was as fast, but has no 16 KiB granule: arm64-16k kernels would not boot."""
    assert arch.ARM64.tcg_cpu == "neoverse-n1"


def test_host_tools_come_from_the_arch_records() -> None:
    """harness/host.py names no arch of its own: what differs per arch is in arch.py's Arch."""
    tree = ast.parse(Path(host.__file__).read_text())
    named = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not named & {"ARM64", "X86_64"}
    for a in arch.ARCHES.values():
        qemu_tool = host.Tool(a.qemu, a.qemu_package, f"runs the {a.name} guests")
        assert host.boot_tools(a) == (qemu_tool, host.OVERLAY_TOOL)
        assert host.rootfs_emulator(a).package == a.qemu_user_package


# --- every per-arch fact is in arch.py ------------------------------------------------------

def test_every_arch_carries_every_fact() -> None:
    """Each field set, for each arch: a new field or arch cannot leave one out (the records
    are built with keywords, so a missing one is a TypeError at import; an empty one here)."""
    may_be_empty = {"fixed_ram"}    # "": the arch has no memmap=, said so on purpose
    for a in arch.ARCHES.values():
        for f in dataclasses.fields(arch.Arch):
            value = getattr(a, f.name)
            if f.name in may_be_empty:
                assert value is not None, (a.name, f.name)
                continue
            assert value is not None and value != "" and value != (), (a.name, f.name)
        assert a.tcg_cpu and a.machine and a.tcg_cpu in a.tcg_cpu_models, a.name
        assert a.ssh_ready_target_s > 0
        assert a.image.endswith("Image") and a.image.startswith(f"arch/{a.kbuild}/")


def test_what_tells_arches_apart_differs_between_them() -> None:
    for name in ("name", "debian", "uname", "qemu", "machine", "console", "kconfig", "image",
                 "image_magic", "cross_compile", "qemu_user"):
        values = [getattr(a, name) for a in arch.ARCHES.values()]
        assert len(set(values)) == len(values), name


def test_only_the_default_arch_keeps_arch_less_cache_keys() -> None:
    assert [a.name for a in arch.ARCHES.values() if not a.named_in_keys] == [arch.DEFAULT]


@pytest.mark.parametrize("a", list(arch.ARCHES.values()), ids=list(arch.ARCHES))
def test_an_image_is_told_by_its_arch_magic(tmp_path: Path, a: arch.Arch) -> None:
    offset, magic = a.image_magic
    image = tmp_path / "image"
    image.write_bytes(bytes(offset) + magic + bytes(0x400))
    assert arch.of_image(image) is a
    image.write_bytes(bytes(0x400))
    assert arch.of_image(image) is None


@pytest.mark.parametrize("a", list(arch.ARCHES.values()), ids=list(arch.ARCHES))
def test_the_qemu_line_reads_the_arch(a: arch.Arch) -> None:
    argv = qemu.command(spec(arch=a.name))
    assert argv[0] == a.qemu and value_of(argv, "-machine") == [a.machine]
    assert value_of(argv, "-cpu") == [a.tcg_cpu]
    assert value_of(argv, "-append")[0].startswith(f"console={a.console},115200 ")


def test_a_build_refuses_a_config_of_another_arch() -> None:
    src = BuildKernel(tree=Path("/t"), base="defconfig", fragments=(), series=())
    kbuild.check_arch(KernelSpec("k", src), "CONFIG_X86=y\nCONFIG_X86_64=y\n")
    kbuild.check_arch(KernelSpec("k", src, arch="arm64"), "CONFIG_ARM64=y\n")
    with pytest.raises(BuildError, match="not an arm64 one .CONFIG_ARM64 is not set"):
        kbuild.check_arch(KernelSpec("k", src, arch="arm64"), "CONFIG_X86=y\n")
    with pytest.raises(BuildError, match="not an x86_64 one .CONFIG_X86 is not set"):
        kbuild.check_arch(KernelSpec("k", src), "CONFIG_ARM64=y\n")


# Modules that still name an arch, each with why; the move of each is pending elsewhere (issue
# 32 §3): drop its line when it reads the Arch field named.
NAMES_AN_ARCH = {
    "commands/report.py": "newest_source quotes code from kernels of the default arch only",
}


def arch_branches(path: Path) -> list[str]:
    """Where a module names an arch: a string that is an arch's name (lab, Debian or uname),
    a record by name (arch.ARM64), or a comparison with the default arch."""
    words = {w for a in arch.ARCHES.values() for w in (a.name, a.debian, a.uname)}
    records = {n for n, v in vars(arch).items() if isinstance(v, arch.Arch)}
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and node.value in words:
            found.append(f"{path}:{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr in records:
            found.append(f"{path}:{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Compare) and any(
                isinstance(n, ast.Attribute) and n.attr == "DEFAULT"
                for n in (node.left, *node.comparators)):
            found.append(f"{path}:{node.lineno}: a comparison with DEFAULT")
    return found


def test_no_module_but_arch_py_names_an_arch() -> None:
    """An `if arm64` outside harness/arch.py is a fact the Arch record lacks: add it there."""
    root = paths.REPO / "harness"
    found = [hit for p in sorted(root.rglob("*.py"))
             if p.relative_to(root).as_posix() not in {"arch.py", *NAMES_AN_ARCH}
             for hit in arch_branches(p)]
    assert found == []


def test_the_arch_branch_finder_finds_each_kind(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Docs may say arm64."""\nfrom harness import arch as arches\n'
                      'A = {"arm64": 1}\nB = arches.X86_64.qemu\n'
                      'C = 1 if x == arches.DEFAULT else 2\nD = os.uname().machine == "aarch64"\n')
    assert [h.split(": ", 1)[1] for h in arch_branches(module)] == \
        ["'arm64'", ".X86_64", "a comparison with DEFAULT", "'aarch64'"]
