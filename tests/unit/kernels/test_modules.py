"""harness/kernels/modules.py: what a test module's build needs, decided from the kernel, and the
errors it gives when it cannot build."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.kernels import modules
from harness.config import DebianKernel, KernelSpec, PathKernel
from harness.errors import ModuleError, ModuleUnavailable
from harness.kernels.kernel import BootableKernel


def kernel(tmp_path: Path, config: str, version: str | None = "6.12.107-1") -> BootableKernel:
    cfg = tmp_path / "config"
    cfg.write_text(config)
    return BootableKernel(name="k", release="6.12.107+deb13-cloud-amd64", vmlinuz=cfg,
                          initramfs=cfg, modules_image=None, config=cfg, description="",
                          package_version=version)


DEBIAN = KernelSpec("k", DebianKernel("trixie", "cloud-amd64"))
CONFIG = 'CONFIG_CC_VERSION_TEXT="x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0"\n' \
         "CONFIG_MODULES=y\n"


def test_the_build_root_holds_the_kernels_compiler_and_headers(tmp_path: Path) -> None:
    r = modules.build_root_recipe(DEBIAN, kernel(tmp_path, CONFIG))
    assert r["suite"] == "trixie"
    assert r["packages"] == ["gcc-14", "linux-headers-6.12.107+deb13-cloud-amd64=6.12.107-1",
                             "make"]


@pytest.mark.parametrize("text, package", [
    ('"gcc-12 (Debian 12.2.0-14) 12.2.0"', "gcc-12"),
    ('"x86_64-linux-gnu-gcc-13 (Debian 13.3.0-1) 13.3.0"', "gcc-13"),
])
def test_compiler_package(tmp_path: Path, text: str, package: str) -> None:
    assert modules.compiler_package(kernel(tmp_path, f"CONFIG_CC_VERSION_TEXT={text}\n")) \
        == package


@pytest.mark.parametrize("spec, config, version, reason", [
    (KernelSpec("k", PathKernel(Path("/boot/vmlinuz"))), CONFIG, None,
     "neither a Debian package kernel nor built by the lab"),
    (DEBIAN, CONFIG.replace("CONFIG_MODULES=y", "# CONFIG_MODULES is not set"), "1",
     "no module support"),
    (DEBIAN, "CONFIG_MODULES=y\n", "1", "cannot tell its compiler"),
    (DEBIAN, CONFIG, None, "version is unknown"),
])
def test_kernels_the_lab_cannot_build_for_say_why(tmp_path: Path, spec: KernelSpec,
                                                   config: str, version: str | None,
                                                   reason: str) -> None:
    with pytest.raises(ModuleUnavailable, match=reason):
        modules.build_root_recipe(spec, kernel(tmp_path, config, version))


def test_unknown_module_is_an_error() -> None:
    with pytest.raises(ModuleError, match="no such test module"):
        modules.sources("no_such_module")


def test_source_hash_follows_the_sources(tmp_path: Path) -> None:
    (tmp_path / "Kbuild").write_text("obj-m := x.o\n")
    (tmp_path / "x.c").write_text("int x;\n")
    first = modules.source_hash(tmp_path)
    assert modules.source_hash(tmp_path) == first
    (tmp_path / "x.c").write_text("int y;\n")
    assert modules.source_hash(tmp_path) != first
    assert modules.source_hash(modules.sources("ringlab_aux"))


def test_first_error_of_a_failed_build() -> None:
    log = ("make: Entering directory '/usr/src/linux-headers-6.12'\n"
           "  CC [M]  /build/x/x.o\n"
           "/build/x/x.c:3:1: error: unknown type name 'foo'\n"
           "make[2]: *** [scripts/Makefile.build:229: /build/x/x.o] Error 1\n")
    assert modules.first_error(log) == "/build/x/x.c:3:1: error: unknown type name 'foo'"
    assert modules.first_error("something odd\n") == "something odd"


def test_an_arm64_kernels_build_root_is_an_arm64_root(tmp_path: Path) -> None:
    """Its gcc and the headers' fixdep/modpost are arm64 binaries (run through qemu-user); the
    x86 recipe has no architecture key, so the build roots made before arches keep their names."""
    import dataclasses
    x86 = modules.build_root_recipe(DEBIAN, kernel(tmp_path, CONFIG))
    assert "architecture" not in x86
    k = dataclasses.replace(kernel(tmp_path, CONFIG.replace("x86_64", "aarch64")),
                            release="6.12.107+deb13-arm64", arch="arm64")
    spec = KernelSpec("k", DebianKernel("trixie", "arm64", "arm64"), arch="arm64")
    r = modules.build_root_recipe(spec, k)
    assert r["architecture"] == "arm64"
    assert r["packages"] == ["gcc-14", "linux-headers-6.12.107+deb13-arm64=6.12.107-1", "make"]


def test_two_workers_asking_for_one_new_module_build_it_once(tmp_path: Path) -> None:
    # ./lab run -j 2 on a newly built kernel: both workers' test_pmu fixtures asked for
    # ringlab_aux at once, and each removed the other's M= folder mid-make.
    import threading
    src = tmp_path / "src"
    src.mkdir()
    (src / "m.c").write_text("/* the module */\n")
    runs = tmp_path / "runs"
    work = tmp_path / "cache" / "modules" / ".work-m-k1"
    make = ["sh", "-c", f'echo run >> {runs}; sleep 0.3; test -f "{work}/m.c" && '
            f': > "{work}/m.ko"']
    k = kernel(tmp_path, CONFIG)
    got: list[object] = []

    def build() -> None:
        try:
            got.append(modules._make_ko("m", src, k, tmp_path / "cache", "k1", work, make, {}))
        except Exception as e:  # noqa: BLE001 - the test reports what either worker saw
            got.append(e)

    workers = [threading.Thread(target=build) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    ko = tmp_path / "cache" / "modules" / "m-k1" / "m.ko"
    assert got == [ko, ko]
    assert runs.read_text() == "run\n"
