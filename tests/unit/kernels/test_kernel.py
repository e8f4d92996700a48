"""harness/kernels/kernel.py modules_of(): the one place an image kernel's modules folder is
interpreted, whether lab.yaml or --modules named it or it sits beside the image."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.config import PathKernel
from harness.errors import KernelError
from harness.kernels.kernel import modules_of

RELEASE = "7.2.13+deb14-cloud-amd64"


def test_a_named_folder_is_the_release_folder_or_holds_it(tmp_path: Path) -> None:
    (tmp_path / "lib/modules" / RELEASE).mkdir(parents=True)
    image = tmp_path / "bzImage"
    for given in (tmp_path / "lib/modules", tmp_path / "lib/modules" / RELEASE):
        assert modules_of("k", PathKernel(image, given), RELEASE) == \
            tmp_path / "lib/modules" / RELEASE


def test_a_named_folder_without_the_release_is_an_error_naming_it(tmp_path: Path) -> None:
    why = f"no directory for release {RELEASE} at {tmp_path}"
    with pytest.raises(KernelError, match=re.escape(why)):
        modules_of("k", PathKernel(tmp_path / "bzImage", tmp_path), RELEASE)


def test_debian_7x_keeps_vmlinuz_in_the_modules_folder(tmp_path: Path) -> None:
    mods = tmp_path / "usr/lib/modules" / RELEASE
    mods.mkdir(parents=True)
    (mods / "modules.order").write_text("")
    assert modules_of("k", PathKernel(mods / "vmlinuz"), RELEASE) == mods


def test_modules_installed_beside_the_image_are_found(tmp_path: Path) -> None:
    (tmp_path / "lib/modules" / RELEASE).mkdir(parents=True)
    assert modules_of("k", PathKernel(tmp_path / "bzImage"), RELEASE) == \
        tmp_path / "lib/modules" / RELEASE
    assert modules_of("k", PathKernel(tmp_path / "bzImage"), "6.12.0") is None


def test_a_make_folder_brings_its_own(tmp_path: Path) -> None:
    (tmp_path / "lib/modules" / RELEASE).mkdir(parents=True)
    src = PathKernel(tmp_path / "arch/x86/boot/bzImage", build_dir=tmp_path)
    assert modules_of("k", src, RELEASE) is None
