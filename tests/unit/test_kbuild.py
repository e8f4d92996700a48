"""harness/kernels/kbuild.py's reading of make output: the first compiler error of a failed build."""
from __future__ import annotations

from harness.kernels import kbuild

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
