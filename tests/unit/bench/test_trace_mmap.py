"""The tracefs bench: answers gathered per method, mode and size; the mapping's ratios."""
from __future__ import annotations

import pytest

from harness.bench import trace_mmap
from harness.errors import LabError


def answer(mmap: float, read: float) -> dict:
    return {"mmap_transport": {"events_per_s": mmap, "us_per_event_in_kernel": 0.5,
                               "setup_s": 0.002},
            "read_transport": {"events_per_s": read, "us_per_event_in_kernel": 1.0},
            "splice_transport": {"events_per_s": 0},  # no figure: not counted
            "events": 20000}


def test_answers_are_kept_per_method_mode_and_size_and_ratios_are_medians() -> None:
    s = trace_mmap.Samples()
    s.add(answer(4e6, 1e6), 4)
    s.add(answer(6e6, 1e6), 4)
    assert sorted(s.events_per_s) == ["mmap_transport_4k", "read_transport_4k"]
    assert s.setup_ms == {"4k": [2.0, 2.0]}
    results = {k: {"median": sum(v) / len(v)} for k, v in s.events_per_s.items()}
    assert trace_mmap.ratios(results, (4,)) == {"mmap/read transport 4 KiB": 5.0}
    lines = trace_mmap.table(s, (4, 64))
    assert any("4 KiB mmap   transport events/s" in line for line in lines)
    assert lines[-1].strip().startswith("ratio mmap/read transport 4 KiB")


def test_a_kernel_without_the_mapping_stops_the_bench() -> None:
    with pytest.raises(LabError, match="cannot run: no GET_READER"):
        trace_mmap.Samples().add({"skip": "no GET_READER"}, 4)
