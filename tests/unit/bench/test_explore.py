"""The explorer bench's figures: per path, judged on the median steps/s."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.bench import explore
from harness.errors import LabError
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


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, samples: list[Sample],
         paths: tuple[str, ...], config: dict[str, str] | None = None) -> int:
    """explore.run with the guest's samples given, the kernel's .config options `config`, and
    the report folder in tmp_path."""
    out = tmp_path / "out"
    out.mkdir()
    kernel = SimpleNamespace(config_option=(config or {}).get)
    monkeypatch.setattr(explore, "Lab", lambda cfg: SimpleNamespace(kernel=lambda name: kernel))
    monkeypatch.setattr(explore.report, "folder", lambda cfg, kind, kernel: out)
    monkeypatch.setattr(explore.samples_of, "measure",
                        lambda lab, name, paths, runs, seconds, out, actors, load:
                        ("6.12.1-test", samples))
    return explore.run(SimpleNamespace(), SimpleNamespace(name="k"),  # type: ignore[arg-type]
                       runs=3, seconds=10.0, paths=paths)


def test_targets_met_pass_and_the_figures_are_saved(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    samples = [Sample("pinning", seed, steps, seqs, 10.0)
               for seed, (steps, seqs) in enumerate([(600, 10), (800, 20), (1000, 30)])]
    assert _run(tmp_path, monkeypatch, samples, ("pinning", "trace-mmap")) == 0
    doc = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert doc["kernel"] == "6.12.1-test" and set(doc["results"]) == {"pinning"}
    assert doc["results"]["pinning"]["steps_per_s"] == {"min": 60.0, "median": 80.0,
                                                        "max": 100.0, "n": 3}
    assert doc["results"]["pinning"]["sequences_per_min"]["median"] == 120.0
    assert "trace-mmap   skipped" in (tmp_path / "out" / "bench.txt").read_text()


def test_a_median_under_the_target_fails_the_bench(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    samples = [Sample("pinning", 0, steps, 1, 10.0) for steps in (490, 499, 2000)]  # 49.9
    assert _run(tmp_path, monkeypatch, samples, ("pinning",)) == 1


def test_a_debug_kernel_is_held_to_20_steps_per_s_as_its_config_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    samples = [Sample("pinning", 0, steps, 1, 10.0) for steps in (210, 250, 300)]  # 25/s
    assert _run(tmp_path, monkeypatch, samples, ("pinning",), {"KASAN": "y"}) == 0
    text = (tmp_path / "out" / "bench.txt").read_text()
    assert "target 20 steps/s: a debug kernel (CONFIG_KASAN)" in text and "MISSED" not in text
    assert json.loads((tmp_path / "out" / "bench.json").read_text())["target"] == 20.0


def test_the_same_figures_miss_on_a_kernel_without_debug_options(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    samples = [Sample("pinning", 0, steps, 1, 10.0) for steps in (210, 250, 300)]
    assert _run(tmp_path, monkeypatch, samples, ("pinning",), {"KASAN": "n"}) == 1


def test_a_kernel_with_none_of_the_paths_is_an_error(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(LabError, match="none of the explorer's paths"):
        _run(tmp_path, monkeypatch, [], ("pinning",))
    assert not list((tmp_path / "out").iterdir())
