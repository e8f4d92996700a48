"""The figures a review compares, as named from the probes' answers."""
from __future__ import annotations

from harness.bench import review_figures
from harness.results import review


def test_each_figure_is_named_after_the_path_it_measures() -> None:
    got = review_figures.figures(
        {"mmap_records_per_s": 2e6},
        {"mmap_transport": {"events_per_s": 5e6}, "read_transport": {"events_per_s": 1e6},
         "splice_transport": {"events_per_s": 9e5}})
    assert got == {"perf mmap records/s": 2e6, "tracefs mmap transport events/s": 5e6,
                   "tracefs read transport events/s": 1e6}
    assert {review.figure_path(f) for f in got} == {"perf", "tracefs"}


def test_a_path_the_kernel_lacks_gives_no_figure() -> None:
    assert review_figures.figures({"skip": "no perf"}, {"skip": "no tracefs"}) == {}
    assert review_figures.figures({}, {"mmap_transport": {"events_per_s": 0}}) == {}
