"""harness/kernels/kbuild.py: its reading of make output (the first compiler error of a failed
build), and when the config step may be skipped."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import KernelSpec, PathKernel
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

    def fake_make(self, src, out, args, logf, what, status=None, report=None) -> None:
        made.append(args)
        config = out / ".config"
        config.write_text("CONFIG_A=y\n" if args == ["defconfig"] else config.read_text())

    monkeypatch.setattr(kbuild.Builder, "_run_make", fake_make)
    monkeypatch.setattr(kbuild, "_toolchain", lambda: "gcc 12")
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
