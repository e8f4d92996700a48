"""The merge of two guests' dumps and the table, on real data: kernel/events/ring_buffer.c's
.gcda and .gcno from the 7.2.13 coverage variant (one guest of one suite test), and gcovr's
JSON of the same run."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import gcov_edges
from harness.coverage import functions, merge
from harness.errors import LabError

DATA = Path(__file__).resolve().parents[1] / "data" / "gcov"

pytestmark = pytest.mark.skipif(shutil.which("gcov-tool") is None,
                                reason="gcov-tool (Debian package gcc) is not installed")


def _dump(tmp_path: Path, name: str, out: Path) -> Path:
    """A guest's dump as harness/guest/gcov.py leaves it: the .gcda under the absolute path of
    the build folder it was compiled in (here `out`, where the .gcno is)."""
    d = tmp_path / "run" / "gcov" / name
    target = d / out.relative_to("/") / "kernel/events/ring_buffer.gcda"
    target.parent.mkdir(parents=True)
    shutil.copy(DATA / "ring_buffer.gcda", target)
    return d


def test_two_guests_are_summed_counter_by_counter_beside_their_notes(tmp_path: Path) -> None:
    out = tmp_path / "build" / "out"
    (out / "kernel/events").mkdir(parents=True)
    shutil.copy(DATA / "ring_buffer.gcno", out / "kernel/events/ring_buffer.gcno")
    _dump(tmp_path, "g1", out)
    _dump(tmp_path, "g2", out)
    (tmp_path / "run" / "gcov" / "g3.lost").write_text("kernel panic: x\n")
    (tmp_path / "run" / "splat-proof" / "gcov" / "p1").mkdir(parents=True)  # not counted
    dumps = merge.find([tmp_path / "run"])
    assert [d.name for d in dumps.folders] == ["g1", "g2"]
    assert dumps.lost == ("g3: kernel panic: x",)
    merged = merge.merge(dumps.folders, tmp_path / "merged")
    gcda = merged / out.relative_to("/") / "kernel/events/ring_buffer.gcda"
    one = gcov_edges.counts_of((DATA / "ring_buffer.gcda").read_bytes())
    both = gcov_edges.counts_of(gcda.read_bytes())
    # gcov-tool writes a function whose counters are all zero as such (no counts): compared
    # where a guest ran something.
    assert {k: n for k, n in both.items() if n} == {k: 2 * n for k, n in one.items() if n}
    assert any(one.values())
    assert gcda.with_suffix(".gcno").resolve() == (out / "kernel/events/ring_buffer.gcno")


def test_merging_nothing_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="no guest"):
        merge.merge((), tmp_path / "m")


def test_the_real_tracefile_gives_the_mapping_page_functions() -> None:
    fs = functions.read(json.loads((DATA / "ring_buffer.coverage.json").read_text()))
    alloc = fs[("kernel/events/ring_buffer.c", "perf_mmap_alloc_page")]
    assert alloc.figures.lines == 4 and alloc.figures.lines_run == 4
    assert functions.is_mapping("perf_mmap_alloc_page") and not functions.is_mapping("rb_irq_work")
