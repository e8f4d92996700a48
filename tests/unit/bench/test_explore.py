"""The explorer bench's figures: per path, judged on the median steps/s."""
from __future__ import annotations

from harness.bench import explore
from harness.explore.bench import TARGET_STEPS_PER_S, Sample


def test_paths_are_judged_on_median_steps_and_a_missing_path_is_said() -> None:
    fast = [Sample("pinning", seed, int(TARGET_STEPS_PER_S * 20) + 20, 30, 20.0)
            for seed in range(3)]
    slow = [Sample("aux", 0, 100, 5, 20.0)]
    results, lines, missed = explore.figures(fast + slow, ("pinning", "aux", "trace-mmap"))
    assert missed == ["aux"]
    assert results["pinning"]["sequences_per_min"]["median"] == 90.0
    assert lines[0].endswith("met") and lines[1].endswith("MISSED")
    assert lines[2] == f"{'trace-mmap':12s} skipped: the kernel lacks it"
