"""The perf ring bench's rates."""
from __future__ import annotations

from harness.bench import perf_ring


def test_rates_summarize_both_paths_of_every_answer() -> None:
    got = perf_ring.rates([{"mmap_records_per_s": 1e6, "read_calls_per_s": 2e5},
                           {"mmap_records_per_s": 3e6, "read_calls_per_s": 1e5}])
    assert got["mmap_records_per_s"]["median"] == 2e6
    assert got["read_calls_per_s"] == {"min": 1e5, "median": 1.5e5, "max": 2e5, "n": 2}
