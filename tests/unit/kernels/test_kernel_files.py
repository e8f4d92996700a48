"""Kernel-side helpers: the bzImage version string, module load order, static busybox."""
from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from harness.kernels import initramfs, kernel
from harness.errors import KernelError


def fake_bzimage(path: Path, version: str) -> Path:
    head = bytearray(0x1000)
    head[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", head, 0x20E, 0x300)  # version string at 0x300 + 0x200
    text = f"{version} (builder@host) #1 SMP PREEMPT_DYNAMIC".encode() + b"\0"
    head[0x500:0x500 + len(text)] = text
    path.write_bytes(bytes(head))
    return path


def test_bzimage_release(tmp_path: Path) -> None:
    img = fake_bzimage(tmp_path / "bzImage", "6.12.107+deb13-cloud-amd64")
    assert kernel.bzimage_release(img) == "6.12.107+deb13-cloud-amd64"


def test_not_a_bzimage(tmp_path: Path) -> None:
    (tmp_path / "x").write_bytes(b"\0" * 4096)
    with pytest.raises(KernelError, match="not a bzImage"):
        kernel.bzimage_release(tmp_path / "x")


# Lines as depmod writes them for Debian's 6.12 cloud kernel.
MODULES_DEP = """\
kernel/drivers/block/virtio_blk.ko.xz:
kernel/net/core/failover.ko.xz:
kernel/drivers/net/net_failover.ko.xz: kernel/net/core/failover.ko.xz
kernel/drivers/net/virtio_net.ko.xz: kernel/drivers/net/net_failover.ko.xz kernel/net/core/failover.ko.xz
kernel/fs/ext4/ext4.ko.xz: kernel/fs/jbd2/jbd2.ko.xz kernel/fs/mbcache.ko.xz
"""


def test_module_order_puts_dependencies_first() -> None:
    order = initramfs.module_order(MODULES_DEP, ("virtio_blk", "virtio_net"))
    names = [Path(m).name for m in order]
    assert names == ["virtio_blk.ko.xz", "failover.ko.xz", "net_failover.ko.xz",
                     "virtio_net.ko.xz"]


def test_built_in_modules_are_skipped() -> None:
    assert initramfs.module_order(MODULES_DEP, ("virtio_pci",)) == []


def test_static_busybox_detection() -> None:
    if not Path("/bin/busybox").exists():
        pytest.skip("busybox-static is not installed on this host (./lab installs it)")
    assert initramfs.is_static_elf(Path("/bin/busybox"))
    assert not initramfs.is_static_elf(Path(shutil.which("ls")))


def test_prepared_kernel_from_another_initramfs_recipe_is_stale(tmp_path: Path) -> None:
    import json
    entry = tmp_path / "k"
    entry.mkdir()
    meta = {"layout": kernel.LAYOUT, "initramfs_recipe": initramfs.recipe_hash(), "name": "k",
            "release": "6.12", "description": "d", "has_modules": False, "has_config": False}
    (entry / "kernel.json").write_text(json.dumps(meta))
    assert kernel.load_prepared(entry) is not None
    (entry / "kernel.json").write_text(json.dumps({**meta, "initramfs_recipe": "old"}))
    assert kernel.load_prepared(entry) is None


def test_adding_ext4_to_the_initramfs_left_kernels_with_it_built_in_current() -> None:
    old = initramfs.recipe_hash(("virtio_blk", "virtio_net"))
    assert "ext4" in initramfs.BOOT_MODULES
    assert initramfs.is_current(initramfs.recipe_hash(), ext4_builtin=False)
    assert initramfs.is_current(old, ext4_builtin=True)
    assert not initramfs.is_current(old, ext4_builtin=False)  # rt, arm64: ext4=m, never booted


def test_ext4_and_its_crc32c_load_before_the_root_mount() -> None:
    dep = ("kernel/fs/ext4/ext4.ko.xz: kernel/fs/jbd2/jbd2.ko.xz kernel/fs/mbcache.ko.xz "
           "kernel/lib/crc16.ko.xz\nkernel/fs/jbd2/jbd2.ko.xz:\nkernel/fs/mbcache.ko.xz:\n"
           "kernel/lib/crc16.ko.xz:\nkernel/crypto/crc32c_generic.ko.xz:\n"
           "kernel/drivers/block/virtio_blk.ko.xz:\n")
    order = [p.rsplit("/", 1)[1] for p in initramfs.module_order(dep, initramfs.BOOT_MODULES)]
    assert order == ["virtio_blk.ko.xz", "crc32c_generic.ko.xz", "crc16.ko.xz",
                     "mbcache.ko.xz", "jbd2.ko.xz", "ext4.ko.xz"]


def test_arm64_image_release_from_its_banner(tmp_path: Path) -> None:
    from harness import arch as arches
    img = tmp_path / "Image"
    data = bytearray(0x2000)
    data[0x38:0x3C] = b"ARM\x64"
    banner = b"Linux version 7.2.13-arm64 (me@host) (gcc 14) #1 SMP\n"
    data[0x1000:0x1000 + len(banner)] = banner
    img.write_bytes(bytes(data))
    assert arches.of_image(img) == arches.ARM64
    assert kernel.image_release(img, arches.ARM64) == "7.2.13-arm64"
