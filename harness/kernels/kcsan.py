"""KCSAN on the ring-buffer files only (the race variant, issue 43).

KCSAN instruments every object by default; on a whole defconfig kernel it reports data races
in the scheduler, mm and the block layer, none of them the lab's to judge, and it slows every
access under TCG. A build kernel's `kcsan_only` files are instrumented and nothing else:
`KCSAN_SANITIZE=n` on make's command line (it overrides every directory Makefile, and make
passes it to each sub-make) turns the default off, and `KCSAN_SANITIZE_<obj>.o := y` in a copy
of each file's directory Makefile turns it back on for that object (scripts/Makefile.lib reads
`$(KCSAN_SANITIZE_<obj>.o)$(KCSAN_SANITIZE)$(is-kernel-object)`: the first letter decides).
A race is still seen when only one side is instrumented: KCSAN's watchpoint notices the value
change of an uninstrumented writer ("race at unknown origin")."""
from __future__ import annotations

from pathlib import Path

from harness.kernels import objlines

MARK = "# ringlab KCSAN scope (harness/kernels/kcsan.py)"
# make's command line for a tree whose instrumentation is scoped.
MAKE_VARS: tuple[str, ...] = ("KCSAN_SANITIZE=n",)


def instrument(tree: Path, files: tuple[str, ...]) -> list[str]:
    """Turn KCSAN back on for `files` in `tree`, a hard-link copy. The Makefiles changed."""
    return objlines.add(tree, files, "KCSAN_SANITIZE", MARK, what="KCSAN")
