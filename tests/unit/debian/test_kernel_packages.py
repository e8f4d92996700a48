"""A Debian kernel resolved as apt installs it, on real Packages stanzas of both layouts:
trixie's 6.12 (one versioned image package) and the split 7.x of trixie-backports and sid."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.debian import archive, kernel_packages
from harness.errors import KernelError
from harness.kernels import kernel

DATA = Path(__file__).resolve().parents[1] / "data" / "packages"


def index(suite: str) -> dict[str, list[archive.PackageRecord]]:
    text = (DATA / f"{suite}-linux-amd64.txt").read_text()
    return kernel_packages.index(archive.parse_packages(text))


def names(resolved: kernel_packages.KernelPackages) -> set[str]:
    return {f"{r.name}={r.version}" for r in resolved.closure}


def test_trixie_612_is_the_metapackage_and_one_image_package() -> None:
    got = kernel_packages.resolve(index("trixie"), "cloud-amd64")
    assert got.image.name == "linux-image-6.12.117+deb13-cloud-amd64"
    # kmod, linux-base and initramfs-tools are no kernel packages: the rootfs has its own.
    assert {r.name for r in got.closure} == {"linux-image-cloud-amd64",
                                              "linux-image-6.12.117+deb13-cloud-amd64"}


def test_backports_73_pulls_binary_modules_and_base() -> None:
    got = kernel_packages.resolve(index("trixie-backports"), "cloud-amd64")
    v = "7.3.4-1~bpo13+1"
    assert got.image.name == "linux-image-7.3.4+deb13-cloud-amd64"
    assert got.image.version == v
    assert names(got) == {f"{n}={v}" for n in (
        "linux-image-cloud-amd64", "linux-base-cloud-amd64", "linux-modules-cloud-amd64",
        "linux-image-7.3.4+deb13-cloud-amd64", "linux-binary-7.3.4+deb13-cloud-amd64",
        "linux-modules-7.3.4+deb13-cloud-amd64", "linux-base-7.3.4+deb13-cloud-amd64")}


def test_sid_72_reaches_the_modules_through_the_versioned_image() -> None:
    # sid's metapackage does not name linux-modules-cloud-amd64; linux-image-<release> does.
    got = kernel_packages.resolve(index("sid"), "cloud-amd64")
    assert "linux-modules-7.2.13+deb14-cloud-amd64=7.2.13-1" in names(got)
    assert "linux-binary-7.2.13+deb14-cloud-amd64=7.2.13-1" in names(got)


@pytest.mark.parametrize("version", ["7.2.12-1~bpo13+1", "7.2.12"])
def test_an_older_version_of_the_suite_by_debian_or_upstream_version(version: str) -> None:
    got = kernel_packages.resolve(index("trixie-backports"), "cloud-amd64", version)
    assert got.root.name == got.image.name == "linux-image-7.2.12+deb13-cloud-amd64"
    assert "linux-binary-7.2.12+deb13-cloud-amd64=7.2.12-1~bpo13+1" in names(got)
    assert not any("7.3.4" in n for n in names(got))


def test_a_flavour_is_not_matched_by_another_ending_in_the_same_word() -> None:
    # linux-image-6.12.117+deb13-cloud-amd64 ends in -amd64 too; the amd64 flavour is not it.
    got = kernel_packages.resolve(index("trixie"), "amd64", "6.12.117")
    assert got.image.name == "linux-image-6.12.117+deb13-amd64"
    assert kernel_packages.image_package_name("amd64", [
        "linux-image-6.12.117+deb13-cloud-amd64", "linux-image-6.12.117+deb13-rt-amd64",
        "linux-image-6.12.117+deb13-amd64-unsigned", "linux-image-6.12.117+deb13-amd64"]) \
        == ["linux-image-6.12.117+deb13-amd64"]


def test_unknown_flavour_names_the_ones_there() -> None:
    with pytest.raises(KernelError, match=r"no package linux-image-cloud-arm64 in .*"
                                          r"flavours there: .*cloud-amd64"):
        kernel_packages.resolve(index("sid"), "cloud-arm64")


def test_unknown_version_lists_the_versions_there() -> None:
    with pytest.raises(KernelError, match=r"at version 9\.9 .*7\.3\.4-1~bpo13\+1"):
        kernel_packages.resolve(index("trixie-backports"), "cloud-amd64", "9.9")


def test_a_missing_kernel_package_of_the_closure_is_named() -> None:
    packages = index("trixie-backports")
    del packages["linux-binary-7.3.4+deb13-cloud-amd64"]
    with pytest.raises(KernelError, match=r"depends on linux-binary-7\.3\.4\+deb13-cloud-amd64 "
                                          r"\(= 7\.3\.4-1~bpo13\+1\), which is not"):
        kernel_packages.resolve(packages, "cloud-amd64")


def test_a_version_relation_that_no_record_meets_is_not_satisfied() -> None:
    packages = index("sid")
    rec = packages["linux-binary-7.2.13+deb14-cloud-amd64"][0]
    packages[rec.name] = [archive.PackageRecord(**{**rec.__dict__, "version": "7.2.13-2"})]
    with pytest.raises(KernelError, match="which is not in the suite's index"):
        kernel_packages.resolve(packages, "cloud-amd64")


def _touch(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_layout_612_boot_folder(tmp_path: Path) -> None:
    rel = "6.12.117+deb13-cloud-amd64"
    _touch(tmp_path / f"boot/vmlinuz-{rel}")
    _touch(tmp_path / f"boot/config-{rel}")
    _touch(tmp_path / f"boot/System.map-{rel}")
    _touch(tmp_path / f"lib/modules/{rel}/modules.order")
    files = kernel.debian_layout(tmp_path, "test")
    assert files.release == rel
    assert files.image == tmp_path / f"boot/vmlinuz-{rel}"
    assert files.config == tmp_path / f"boot/config-{rel}"
    assert files.system_map is not None and files.modules_base == tmp_path


def test_layout_7x_usr_lib_modules(tmp_path: Path) -> None:
    rel = "7.3.4+deb13-cloud-amd64"
    mods = tmp_path / "usr/lib/modules" / rel
    for name in ("vmlinuz", "config", "System.map", "modules.order"):
        _touch(mods / name)
    files = kernel.debian_layout(tmp_path, "test")
    assert files.release == rel
    assert files.image.read_text() == "x" and files.image.name == "vmlinuz"
    assert files.config is not None and files.system_map is not None
    assert files.modules_base == tmp_path / "usr"
    # The image is not left in the modules folder that becomes the guest's /lib/modules.
    assert sorted(p.name for p in mods.iterdir()) == ["modules.order"]


def test_layout_without_an_image_is_an_error(tmp_path: Path) -> None:
    _touch(tmp_path / "usr/share/doc/linux-image-cloud-amd64/copyright")
    with pytest.raises(KernelError, match="no kernel image"):
        kernel.debian_layout(tmp_path, "linux-image-cloud-amd64 7.3.4")
