"""harness/kernels/kbuild.py: its reading of make output (the first compiler error of a failed
build), and when the config step may be skipped."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import arch as arches
from harness.config import BuildKernel, KernelSpec, PathKernel
from harness.kernels import kbuild, kconfig

FAILED = """\
  CC      kernel/events/core.o
  CC      kernel/events/ring_buffer.o
../kernel/events/ring_buffer.c: In function 'perf_output_begin_forward':
../kernel/events/ring_buffer.c:270:9: error: implicit declaration of function 'nope' [-Werror=implicit-function-declaration]
  270 |         nope();
      |         ^~~~
../kernel/events/ring_buffer.c:271:1: error: expected ';' before '}' token
make[4]: *** [../scripts/Makefile.build:229: kernel/events/ring_buffer.o] Error 1
make[3]: *** [../scripts/Makefile.build:478: kernel/events] Error 2
"""


def test_the_first_compiler_error_is_the_one_shown() -> None:
    assert kbuild.first_error(FAILED) == (
        "../kernel/events/ring_buffer.c:270:9: error: implicit declaration of function 'nope' "
        "[-Werror=implicit-function-declaration]")


def test_a_make_error_without_compiler_error() -> None:
    text = "  LD      vmlinux\nmake[2]: *** [Makefile:1234: vmlinux] Error 1\nmake: done\n"
    assert kbuild.first_error(text) == "make[2]: *** [Makefile:1234: vmlinux] Error 1"


def test_compiled_lines_count_progress() -> None:
    lines = [line for line in FAILED.splitlines() if kbuild._COMPILED.match(line)]
    assert len(lines) == 2


# --- the config step is skipped when its inputs did not change ---------------------------

def test_a_config_stamp_is_current_only_for_its_key_and_its_intact_config(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    stamp = kbuild.ConfigStamp("key-1")
    assert not stamp.is_current(out)                     # nothing configured yet
    (out / ".config").write_text("CONFIG_A=y\n")
    assert not stamp.is_current(out)                     # a .config without a stamp
    stamp.write(out)
    assert stamp.is_current(out)
    assert not kbuild.ConfigStamp("key-2").is_current(out)  # other fragments, Kconfig, gcc
    (out / ".config").write_text("CONFIG_A=n\n")
    assert not stamp.is_current(out)                     # edited by hand, or by make
    (out / ".config").write_text("CONFIG_A=y\n")
    (out / kbuild.CONFIG_STAMP).write_text("{not json")
    assert not stamp.is_current(out)


def test_configure_runs_make_once_then_skips_until_a_kconfig_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "Kconfig").write_text("config A\n\tbool \"a\"\nconfig B\n\tbool \"b\"\n")
    made: list[list[str]] = []

    def fake_make(self, src, out, args, logf, what, status=None, report=None,
                  arch="x86_64") -> None:
        made.append(args)
        config = out / ".config"
        config.write_text("CONFIG_A=y\n" if args == ["defconfig"] else config.read_text())

    monkeypatch.setattr(kbuild.Builder, "_run_make", fake_make)
    monkeypatch.setattr(kbuild, "_toolchain", lambda a: "gcc 12")
    builder = kbuild.Builder(tmp_path / "cache", lambda: None, lambda name: None, jobs=1)
    spec = KernelSpec("k", PathKernel(Path("/unused")))
    options = kconfig.parse("CONFIG_B=y\n", "f.config")

    def configure() -> kbuild.BuildReport:
        report = kbuild.BuildReport("k", log=tmp_path / "build.log")
        builder._configure(spec, source, tmp_path / "out", None, "defconfig", options, report,
                           "key")
        return report

    configure()
    assert made == [["defconfig"], ["olddefconfig"]]
    assert configure().dropped == [] and len(made) == 2  # same key, same Kconfig: skipped
    (source / "Kconfig").write_text("config A\n\tbool \"a\"\nconfig B\n\tbool \"B\"\n")
    configure()
    assert len(made) == 4


# --- a kernel of another arch is cross-built ---------------------------------------------

def _recorded_make(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `make` (and `ccache`) on PATH that record their command line, as the real ones get it."""
    bin_dir, argv_file = tmp_path / "bin", tmp_path / "argv"
    bin_dir.mkdir()
    for tool in ("make", "ccache"):
        (bin_dir / tool).write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {argv_file}\n')
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return argv_file


@pytest.mark.parametrize("arch", ["x86_64", "arm64"])
def test_make_gets_arch_and_cross_compiler_only_for_a_foreign_arch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arch: str) -> None:
    monkeypatch.setattr(arches, "host", lambda: arches.X86_64)
    argv_file = _recorded_make(tmp_path, monkeypatch)
    builder = kbuild.Builder(tmp_path / "cache", lambda: None, lambda name: None, jobs=2)
    with (tmp_path / "build.log").open("w") as logf:
        builder._run_make(tmp_path / "src", tmp_path / "out", ["Image"], logf, "make",
                          arch=arch)
    argv = argv_file.read_text().splitlines()
    if arch == "arm64":
        assert argv[-4:] == ["ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-", "Image",
                             "CC=ccache aarch64-linux-gnu-gcc"], argv
    else:  # a native build's command line is what it always was
        assert not any(a.startswith(("ARCH=", "CROSS_COMPILE=")) for a in argv), argv
        assert argv[-2:] == ["Image", "CC=ccache gcc"], argv


def test_an_arm64_build_has_its_own_config_key_and_x86_keeps_its_own(tmp_path: Path) -> None:
    builder = kbuild.Builder(tmp_path / "cache", lambda: None, lambda name: None, jobs=1)
    src = BuildKernel(tree=tmp_path, base="tinyconfig", fragments=(), series=())
    x86 = builder.keys(KernelSpec("k", src), src)
    arm = builder.keys(KernelSpec("k", src, arch="arm64"), src)
    assert x86 != arm
    # The x86 key is the one older labs made (no arch in it): its caches stay valid.
    assert x86[0] == kbuild._digest("tinyconfig", str(kbuild.RECIPE))


def _fake_make(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    """`make` on PATH as a shell script; the build log it may remove at $RINGLAB_LOG."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    make = bin_dir / "make"
    make.write_text(f"#!/bin/sh\n{body}\n")
    make.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    log = tmp_path / "build.log"
    monkeypatch.setenv("RINGLAB_LOG", str(log))
    return log


def _builder(tmp_path: Path) -> kbuild.Builder:
    return kbuild.Builder(tmp_path, lambda: None, lambda name: None,  # type: ignore[arg-type]
                          jobs=1, ccache=False)


def test_a_make_stopped_by_ctrl_c_is_an_interrupt_and_not_a_missing_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 44: a SIGINT'd `./lab run` printed a traceback reading a build.log removed under it
    log = _fake_make(tmp_path, monkeypatch, 'rm -f "$RINGLAB_LOG"; kill -INT $$')
    with log.open("w") as logf, pytest.raises(KeyboardInterrupt):
        _builder(tmp_path)._run_make(tmp_path, tmp_path / "out", [], logf, "make")


def test_a_failed_make_whose_log_is_gone_is_still_one_build_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.errors import BuildError
    log = _fake_make(tmp_path, monkeypatch, 'rm -f "$RINGLAB_LOG"; exit 2')
    with log.open("w") as logf, pytest.raises(BuildError, match="make exited 2; its log"):
        _builder(tmp_path)._run_make(tmp_path, tmp_path / "out", [], logf, "make")


def test_a_build_folder_made_again_for_another_kernel_is_not_the_stored_ones(
        tmp_path: Path) -> None:
    """./lab mutate builds each mutant in the unmutated kernel's folder and reverts its
    source: the unmutated kernel is then found in the cache by its tree's state, but the
    folder's vmlinux is the last mutant's (races round 5 decoded the unmutated kernel's
    splats two lines off). A folder whose image is not the stored one is made again."""
    from harness.kernels.kernel import BootableKernel
    out = tmp_path / "out"
    image = out / arches.get(arches.DEFAULT).image
    image.parent.mkdir(parents=True)
    image.write_bytes(b"bzImage #1")
    stored = tmp_path / "entry" / "vmlinuz"
    stored.parent.mkdir()
    stored.write_bytes(b"bzImage #1")
    k = BootableKernel("k", "7.2.13", stored, tmp_path / "initrd", None, None, "built",
                       build_dir=out)
    assert not kbuild._made_again(k, arches.DEFAULT)
    image.write_bytes(b"bzImage #2")          # a mutant linked since
    assert kbuild._made_again(k, arches.DEFAULT)
    image.unlink()
    assert kbuild._made_again(k, arches.DEFAULT)
