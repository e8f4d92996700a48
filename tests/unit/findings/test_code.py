"""Quoting a C function from a kernel tree for a report (harness/findings/code.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import LabError
from harness.findings import code

SOURCE = """\
#include <linux/perf_event.h>

static int perf_mmap_rb(struct vm_area_struct *vma, struct perf_event *event,
			unsigned long nr_pages);

static void
__rb_free_aux(struct perf_buffer *rb)
{
	if (rb->aux_priv) {
		rb->free_aux(rb->aux_priv);
	}
}

static int perf_mmap_rb(struct vm_area_struct *vma, struct perf_event *event,
			unsigned long nr_pages)
{
	perf_mmap_account(vma, user_extra, extra);
	return 0;
}
"""


def test_a_definition_is_found_past_its_declaration_with_its_return_type() -> None:
    first, lines = code.function(SOURCE, "perf_mmap_rb")  # type: ignore[misc]
    assert first == 14 and lines[0].startswith("static int perf_mmap_rb(")
    assert lines[-1] == "}" and "perf_mmap_account" in lines[2 + 1]
    first, lines = code.function(SOURCE, "__rb_free_aux")  # type: ignore[misc]
    assert (first, lines[0], lines[1]) == (6, "static void", "__rb_free_aux(struct perf_buffer *rb)")


def test_a_call_is_not_a_definition() -> None:
    assert code.function(SOURCE, "perf_mmap_account") is None


def test_a_quote_numbers_its_lines_and_a_missing_function_names_itself(tmp_path: Path) -> None:
    (tmp_path / "kernel").mkdir()
    (tmp_path / "kernel" / "ring_buffer.c").write_text(SOURCE)
    q = code.quote(tmp_path, "kernel/ring_buffer.c:__rb_free_aux")
    assert q.text().splitlines()[0] == " 6  static void"
    with pytest.raises(LabError, match=r"no definition of rb_alloc_aux\(\) in .*ring_buffer.c"):
        code.quote(tmp_path, "kernel/ring_buffer.c:rb_alloc_aux")
    with pytest.raises(LabError, match="cannot quote kernel/core.c:f: .*core.c"):
        code.quote(tmp_path, "kernel/core.c:f")
