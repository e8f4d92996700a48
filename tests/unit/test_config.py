"""lab.yaml validation: every mistake names the file, the key and what was expected."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import paths
from harness import config
from harness.errors import ConfigError

REPO = paths.REPO


def load_text(tmp_path: Path, text: str) -> config.LabConfig:
    p = tmp_path / "lab.yaml"
    p.write_text(text)
    return config.load(p)


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as e:
        load_text(tmp_path, text)
    return str(e.value)


def test_shipped_lab_yaml_is_valid() -> None:
    cfg = config.load(REPO / "lab.yaml")
    assert cfg.default_kernel in cfg.kernels
    k = cfg.kernel(None)
    assert isinstance(k.source, config.DebianKernel)
    assert k.source.suite == "trixie" and k.source.flavour == "cloud-amd64"
    assert cfg.machine.accel == "auto"


def test_minimal_config_gets_defaults(tmp_path: Path) -> None:
    cfg = load_text(tmp_path, "kernels: {k: {debian: {suite: trixie, flavour: amd64}}}\n")
    assert cfg.default_kernel == "k"
    assert cfg.machine == config.MachineSpec()
    assert cfg.rootfs.suite == "trixie"
    assert cfg.reports_dir == tmp_path / "reports"
    assert cfg.mirror is None


def test_unknown_top_level_key(tmp_path: Path) -> None:
    msg = error_of(tmp_path, "kernels: {k: {debian: {suite: trixie, flavour: amd64}}}\nmachin: {}\n")
    assert "lab.yaml: machin: unknown key" in msg and "machine" in msg


def test_unknown_nested_key(tmp_path: Path) -> None:
    msg = error_of(tmp_path, "kernels: {k: {debian: {suite: trixie, flavour: amd64, flavor: x}}}\n")
    assert "kernels.k.debian.flavor: unknown key" in msg


def test_wrong_type_names_key_and_expectation(tmp_path: Path) -> None:
    msg = error_of(tmp_path, "kernels: {k: {debian: {suite: trixie, flavour: amd64}}}\n"
                             "machine: {cpus: two}\n")
    assert f"{tmp_path / 'lab.yaml'}: machine.cpus: expected an integer from 1 to 64, got 'two'" == msg


@pytest.mark.parametrize("machine,key", [
    ("{accel: xen}", "machine.accel"),
    ("{memory_mb: 12}", "machine.memory_mb"),
    ("{boot_timeout_s: -1}", "machine.boot_timeout_s"),
    ("{tcg_threads: many}", "machine.tcg_threads"),
    ("{cpus: true}", "machine.cpus"),
    ("{console_log_mb: 0}", "machine.console_log_mb"),
])
def test_bad_machine_values(tmp_path: Path, machine: str, key: str) -> None:
    msg = error_of(tmp_path, "kernels: {k: {debian: {suite: trixie, flavour: amd64}}}\n"
                             f"machine: {machine}\n")
    assert f"{key}: expected" in msg


def test_missing_kernels(tmp_path: Path) -> None:
    assert "kernels: expected this key to be set" in error_of(tmp_path, "machine: {}\n")


def test_two_kernel_sources(tmp_path: Path) -> None:
    msg = error_of(tmp_path, f"kernels: {{k: {{debian: {{suite: a, flavour: b}}, "
                             f"path: {{image: {tmp_path}}}}}}}\n")
    assert "kernels.k: expected exactly one kernel source" in msg


def test_build_kernel_is_parsed(tmp_path: Path) -> None:
    (tmp_path / "linux").mkdir()
    (tmp_path / "frag.config").write_text("CONFIG_PERF_EVENTS=y\n")
    cfg = load_text(tmp_path, "kernels:\n  k: {build: {tree: linux, series: linux, config: "
                              "{base: tinyconfig, fragments: [frag.config]}}}\n")
    src = cfg.kernel("k").source
    assert isinstance(src, config.BuildKernel)
    assert src.tree == tmp_path / "linux" and src.series == (tmp_path / "linux",)
    assert src.base == "tinyconfig" and src.fragments == (tmp_path / "frag.config",)


def test_build_kernel_from_a_debian_source_package(tmp_path: Path) -> None:
    cfg = load_text(tmp_path, "kernels:\n  d: {debian: {suite: trixie, flavour: amd64}}\n"
                              "  k: {build: {debian_source: {suite: trixie, package: "
                              "linux-source-6.12}, config: {base: 'debian:d'}}}\n")
    src = cfg.kernel("k").source
    assert src.tree == config.DebianSource("trixie", "linux-source-6.12") and src.base == "debian:d"


def test_the_race_kernels_scope_kcsan_to_the_files_of_the_four_paths() -> None:
    """The race variant instruments the mapping files only (harness/kernels/kcsan.py), the
    same files the coverage variant profiles."""
    from harness.kernels import gcov, kbuild
    cfg = config.load(REPO / "lab.yaml")
    for name in ("src-7.2-race", "src-7.3-race"):
        src = cfg.kernel(name).source
        assert isinstance(src, config.BuildKernel)
        assert src.kcsan_only == gcov.FILES
        assert [f.name for f in src.fragments][-1] == "race.config"
        assert kbuild.make_vars(src) == ["KCSAN_SANITIZE=n"]
    assert kbuild.make_vars(cfg.kernel("src-7.2-ringbuf").source) == []  # type: ignore[arg-type]


@pytest.mark.parametrize("build,key", [
    ("{tree: nope}", "kernels.k.build.tree"),
    ("{}", "kernels.k.build: expected exactly one of: tree"),
    ("{debian_source: {suite: trixie, package: linux}}", "kernels.k.build.debian_source.package"),
    ("{tree: ., config: {base: nope.config}}", "kernels.k.build.config.base"),
    ("{tree: ., config: {base: 'debian:k'}}", "kernels.k.build.config.base"),
    ("{tree: ., config: {fragments: [missing.config]}}", "kernels.k.build.config.fragments[0]"),
    ("{tree: ., series: 3}", "kernels.k.build.series"),
    ("{tree: ., kcsan_only: kernel/events/core.c}", "kernels.k.build.kcsan_only"),
    ("{tree: ., kcsan_only: [kernel/events/core.h]}", "kernels.k.build.kcsan_only[0]"),
    ("{tree: ., kcsan_only: [../core.c]}", "kernels.k.build.kcsan_only[0]"),
])
def test_bad_build_kernels_name_the_key(tmp_path: Path, build: str, key: str) -> None:
    assert key in error_of(tmp_path, f"kernels: {{k: {{build: {build}}}}}\n")


def test_path_kernel_must_exist(tmp_path: Path) -> None:
    msg = error_of(tmp_path, "kernels: {k: {path: {image: nope/bzImage}}}\n")
    assert "kernels.k.path.image:" in msg and "does not exist" in msg


def test_path_kernel_relative_to_config(tmp_path: Path) -> None:
    (tmp_path / "bzImage").write_bytes(b"x")
    cfg = load_text(tmp_path, "kernels: {k: {path: {image: bzImage}}}\n")
    assert cfg.kernel("k").source.image == tmp_path / "bzImage"


def test_default_kernel_must_exist(tmp_path: Path) -> None:
    msg = error_of(tmp_path, "default_kernel: x\nkernels: {k: {debian: {suite: a, flavour: b}}}\n")
    assert "default_kernel: expected one of the kernels: k, got 'x'" in msg


def test_unknown_kernel_name_lists_the_known_ones(tmp_path: Path) -> None:
    cfg = load_text(tmp_path, "kernels: {a: {debian: {suite: t, flavour: f}}, "
                              "b: {debian: {suite: t, flavour: g}}}\n")
    with pytest.raises(ConfigError, match=r"unknown kernel 'nope'; .* defines: a, b"):
        cfg.kernel("nope")


def test_invalid_yaml_gives_line(tmp_path: Path) -> None:
    msg = error_of(tmp_path, "kernels:\n  k: [unclosed\n")
    assert "not valid YAML" in msg and "line" in msg


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        config.load(tmp_path / "absent.yaml")


def test_mirror_url_must_be_a_url(tmp_path: Path) -> None:
    msg = error_of(tmp_path, "kernels: {k: {debian: {suite: a, flavour: b}}}\n"
                             "mirror: {url: not-a-url}\n")
    assert "mirror.url: expected an http://, https:// or file:// URL" in msg


def test_rootfs_packages_must_be_names(tmp_path: Path) -> None:
    msg = error_of(tmp_path, "kernels: {k: {debian: {suite: a, flavour: b}}}\n"
                             "rootfs: {packages: [strace, 'rm -rf']}\n")
    assert "rootfs.packages[1]: expected a Debian package name" in msg


def test_a_kernel_is_x86_64_unless_told(tmp_path: Path) -> None:
    cfg = load_text(tmp_path, "kernels:\n  x: {debian: {suite: trixie, flavour: cloud-amd64}}\n"
                              "  a: {arch: arm64, debian: {suite: trixie, flavour: arm64-16k}}\n")
    assert cfg.kernel("x").arch == "x86_64" and cfg.kernel("x").source.arch == "amd64"
    assert cfg.kernel("a").arch == "arm64" and cfg.kernel("a").source.arch == "arm64"


def test_shipped_lab_yaml_has_the_arm64_and_rt_kernels() -> None:
    cfg = config.load(REPO / "lab.yaml")
    want = {"trixie-rt": ("x86_64", "rt-amd64"), "trixie-arm64": ("arm64", "arm64"),
            "trixie-arm64-16k": ("arm64", "arm64-16k"), "trixie-rt-arm64": ("arm64", "rt-arm64")}
    for name, (arch, flavour) in want.items():
        k = cfg.kernel(name)
        assert (k.arch, k.source.flavour) == (arch, flavour), name


def test_a_bad_arch_is_one_error_naming_file_key_and_value(tmp_path: Path) -> None:
    msg = error_of(tmp_path, "kernels: {k: {arch: aarch64, debian: {suite: trixie, "
                             "flavour: arm64}}}\n")
    assert msg == (f"{tmp_path / 'lab.yaml'}: kernels.k.arch: expected one of x86_64, arm64, "
                   "got 'aarch64'")
    assert msg.count("\n") == 0


def test_an_arm64_build_kernel_is_cross_built_not_refused(tmp_path: Path) -> None:
    (tmp_path / "lab.yaml").write_text(
        "kernels:\n  k: {arch: arm64, build: {tree: ., config: {base: tinyconfig}}}\n")
    assert config.load(tmp_path / "lab.yaml").kernel("k").arch == "arm64"


@pytest.mark.parametrize("kernel,key,value", [
    # an arm64 flavour left at the default arch would be looked for in binary-amd64
    ("{debian: {suite: trixie, flavour: rt-arm64}}", "kernels.k.debian.flavour", "'rt-arm64'"),
    ("{arch: arm64, debian: {suite: trixie, flavour: cloud-amd64}}", "kernels.k.debian.flavour",
     "'cloud-amd64'"),
    ("{arch: 7, debian: {suite: trixie, flavour: amd64}}", "kernels.k.arch", "7"),
    ("{arch: arm64, path: {image: /boot/Image}}", "kernels.k.arch", "'arm64'"),
])
def test_arch_mistakes_name_the_key_and_value(tmp_path: Path, kernel: str, key: str,
                                               value: str) -> None:
    msg = error_of(tmp_path, f"kernels: {{k: {kernel}}}\n")
    assert msg.startswith(f"{tmp_path / 'lab.yaml'}: {key}: expected ") and msg.endswith(
        f", got {value}"), msg
