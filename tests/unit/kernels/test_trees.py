"""kernels/series/inpage (seed 001) on every Debian tree the lab builds: the one series applies,
through the lab's own loader, to each linux-source tree unpacked in the cache (6.12.107 and
7.2.13: __perf_output_begin() did not change between them, so 7.2 takes the 6.12 patches
with line offsets only). Skipped when no tree is cached; the tree is never written: the files
the series touches are copied first."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from harness import paths
from harness import cache
from harness.kernels import series

INPAGE = paths.KERNEL_FILES / "series" / "inpage"


def _cached_trees() -> list[Path]:
    return sorted(cache.Layout(cache.cache_root()).trees().glob("linux-source-*_*/linux-source-*"))


@pytest.mark.parametrize("tree", _cached_trees() or [None], ids=lambda t: t.parent.name if t
                         else "no-cached-tree")
def test_the_inpage_series_applies_to_each_cached_tree(tree: Path | None,
                                                        tmp_path: Path) -> None:
    if tree is None:
        pytest.skip("no linux-source tree unpacked in the cache")
    patches = series.read(INPAGE)
    touched = sorted({m.group(1) for p in patches
                      for m in re.finditer(r"^diff --git a/\S+ b/(\S+)", p.text, re.M)})
    assert touched == ["include/linux/perf_event.h", "kernel/events/ring_buffer.c"]
    for rel in touched:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tree / rel, tmp_path / rel)
    applied = series.apply((INPAGE,), tmp_path)
    assert [p.name for p in applied] == [p.name for p in patches]
    rb = (tmp_path / "kernel/events/ring_buffer.c").read_text()
    for symbol in ("perf_output_begin_forward_in_page", "perf_output_copy", "perf_output_end"):
        assert rb.count(f"EXPORT_SYMBOL_GPL({symbol});") == 1, symbol
    assert "bool backward, bool stay_in_page)" in rb
    assert "perf_output_begin_forward_in_page(struct perf_output_handle *handle," in (
        tmp_path / "include/linux/perf_event.h").read_text()
