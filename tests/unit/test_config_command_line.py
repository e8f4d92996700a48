"""Kernels named on the command line (`--kernel debian:...`, an image, a make O= folder, a
source tree) rather than in lab.yaml: what each form becomes, and one clear error otherwise."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from harness import arch as arches, config
from harness.errors import ConfigError
from harness.paths import FRAGMENTS


def lab(tmp_path: Path) -> config.LabConfig:
    path = tmp_path / "lab.yaml"
    path.write_text("kernels: {mine: {debian: {suite: trixie, flavour: cloud-amd64}}}\n")
    return config.load(path)


def bzimage(path: Path) -> Path:
    head = bytearray(0x1000)
    head[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", head, 0x20E, 0x300)
    head[0x500:0x520] = b"7.2.13 (me@host) #1 SMP\0".ljust(0x20, b"\0")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(head))
    return path


def arm64_image(path: Path) -> Path:
    head = bytearray(0x2000)
    head[0x38:0x3C] = b"ARM\x64"
    banner = b"Linux version 7.2.13-arm64 (me@host) (gcc 14) #1 SMP\n\0"
    head[0x1000:0x1000 + len(banner)] = banner
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(head))
    return path


def test_a_lab_yaml_name_still_wins(tmp_path: Path) -> None:
    assert lab(tmp_path).kernel("mine").name == "mine"


@pytest.mark.parametrize("arg, suite, flavour, version, arch", [
    ("debian:sid/cloud-amd64", "sid", "cloud-amd64", None, "x86_64"),
    ("debian:trixie-backports/cloud-amd64=7.2.12-1~bpo13+1", "trixie-backports",
     "cloud-amd64", "7.2.12-1~bpo13+1", "x86_64"),
    ("debian:trixie/arm64-16k=6.12.117", "trixie", "arm64-16k", "6.12.117", "arm64"),
])
def test_debian_kernel(tmp_path: Path, arg: str, suite: str, flavour: str,
                       version: str | None, arch: str) -> None:
    spec = lab(tmp_path).kernel(arg)
    assert spec.name == arg and spec.arch == arch
    assert spec.source == config.DebianKernel(suite, flavour, arches.get(arch).debian, version)


def test_a_malformed_debian_kernel_says_the_form(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"debian:SUITE/FLAVOUR\[=VERSION\]"):
        lab(tmp_path).kernel("debian:sid")


def test_an_image_without_modules_named_leaves_them_to_the_kernel_stage(tmp_path: Path) -> None:
    # Where its modules are is decided once, by harness/kernels/kernel.py modules_of().
    mods = tmp_path / "usr/lib/modules/7.2.13+deb14-cloud-amd64"
    image = bzimage(mods / "vmlinuz")
    (mods / "modules.order").write_text("")
    spec = lab(tmp_path).kernel(str(image))
    assert spec.name == str(image) and spec.arch == "x86_64"
    assert spec.source == config.PathKernel(image=image, modules=None)


def test_an_image_with_modules_named(tmp_path: Path) -> None:
    image = bzimage(tmp_path / "bzImage")
    (tmp_path / "mods").mkdir()
    spec = lab(tmp_path).kernel(str(image), modules=str(tmp_path / "mods"))
    # The name says which modules (a report's title); the spec itself travels to child runs.
    assert spec.name == f"{image}{config.MODULES_SUFFIX}{tmp_path / 'mods'}"
    assert spec.source == config.PathKernel(image=image, modules=tmp_path / "mods")


def test_an_arm64_image_is_an_arm64_kernel(tmp_path: Path) -> None:
    spec = lab(tmp_path).kernel(str(arm64_image(tmp_path / "Image")))
    assert spec.arch == "arm64"


def test_a_relative_image_path_becomes_absolute(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    bzimage(tmp_path / "out" / "bzImage")
    monkeypatch.chdir(tmp_path)
    assert lab(tmp_path).kernel("out/bzImage").name == str(tmp_path / "out" / "bzImage")


def test_a_make_o_folder_is_used_as_built(tmp_path: Path) -> None:
    out = tmp_path / "out"
    image = bzimage(out / "arch/x86/boot/bzImage")
    (out / ".config").write_text("CONFIG_MODULES=y\n")
    spec = lab(tmp_path).kernel(str(out))
    assert spec.source == config.PathKernel(image=image, build_dir=out)


def test_a_source_tree_is_built_with_ringbuf_config(tmp_path: Path) -> None:
    tree = tmp_path / "linux"
    tree.mkdir()
    (tree / "Kconfig").write_text("")
    (tree / "Makefile").write_text("")
    spec = lab(tmp_path).kernel(str(tree))
    assert isinstance(spec.source, config.BuildKernel)
    assert spec.source.tree == tree and spec.source.base == "defconfig"
    assert [f.name for f in spec.source.fragments] == ["ringbuf.config"]
    # review and bisect vary it like a build kernel of lab.yaml.
    varied = config.with_build(lab(tmp_path), str(tree), tree=tmp_path)
    assert varied.kernel(str(tree)).source.tree == tmp_path  # type: ignore[union-attr]


@pytest.mark.parametrize("make, match", [
    (lambda p: (p / "notes.txt").write_text("hello"), "not a kernel image"),
    (lambda p: (p / "empty").mkdir(), "neither a built kernel"),
])
def test_what_is_no_kernel_is_one_clear_error(tmp_path: Path, make, match: str) -> None:
    make(tmp_path)
    target = next(p for p in tmp_path.iterdir() if p.name in ("notes.txt", "empty"))
    with pytest.raises(ConfigError, match=match):
        lab(tmp_path).kernel(str(target))


def test_a_missing_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file or folder"):
        lab(tmp_path).kernel(str(tmp_path / "nope" / "bzImage"))


def test_an_unknown_plain_name_lists_lab_yaml_and_the_forms(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown kernel 'nope'.*defines: mine.*debian:SUITE"):
        lab(tmp_path).kernel("nope")


def test_file_safe_names() -> None:
    assert config.file_safe("trixie-cloud") == "trixie-cloud"
    assert config.file_safe("debian:sid/cloud-amd64=7.2.13-1") == "debian-sid-cloud-amd64=7.2.13-1"
    assert "/" not in config.file_safe("/home/me/linux/out?modules=/tmp/m")
