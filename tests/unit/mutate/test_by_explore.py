"""Mutants judged by the explorer (harness/mutate/by_explore.py): each kernel file maps to the
explorer's paths it serves, and the unmutated kernel is explored on each path once."""
from __future__ import annotations

from pathlib import Path

from harness.kernels.mutants import KERNEL_FILES, Mutant
from harness.mutate.by_explore import EXPLORE_PATHS, paths_of


def _mutant(file: str) -> Mutant:
    return Mutant(f"00x-{Path(file).stem}", Path("x.patch"), file, "r", None, None, "")


def test_explorer_paths_are_named_only_for_files_a_mutant_may_patch() -> None:
    # (kernel/trace/simple_ring_buffer.c and trace_remote.c have none yet: their mutants are
    # explored on no path, and so survive --explore.)
    assert set(EXPLORE_PATHS) <= set(KERNEL_FILES)


def test_the_paths_of_several_mutants_are_each_named_once_in_order() -> None:
    ms = (_mutant("kernel/events/ring_buffer.c"), _mutant("kernel/trace/trace.c"),
          _mutant("kernel/events/core.c"), _mutant("kernel/trace/ring_buffer.c"))
    assert paths_of(ms) == ("perf-ring", "perf-aux", "trace-mmap", "pinning")
    assert paths_of(()) == ()
