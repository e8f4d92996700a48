"""How `./lab review` judges benchmark figures (harness/results/review.py): interleaved pairs,
ratios per pair, at least 3 runs, untouched paths as controls, "too noisy to judge"."""
from __future__ import annotations

import random

from harness import paths
from harness.kernels import series
from harness.results import review

REPO = paths.REPO
PERF, READ, MMAP = "perf mmap records/s", "tracefs read transport events/s", \
    "tracefs mmap transport events/s"


def _summary(outcomes: dict[str, str] | None = None) -> dict:
    return {"kernel": "k", "results": [{"test": t, "outcome": o, "reason": ""}
                                       for t, o in (outcomes or {}).items()]}


def _pairs(ratios: dict[str, list[float]], base: float = 1000.0
           ) -> list[dict[str, dict[str, float]]]:
    """Interleaved pairs whose patched/base ratio per figure is as given."""
    n = len(next(iter(ratios.values())))
    return [{"base": {f: base for f in ratios},
             "patched": {f: base * r[i] for f, r in ratios.items()}} for i in range(n)]


def _status(r: review.Review, figure: str) -> str:
    return next(b.status for b in r.bench if b.figure == figure)


def test_interleave_alternates_base_and_patched() -> None:
    assert review.interleave(3) == [(0, "base"), (0, "patched"), (1, "base"),
                                    (1, "patched"), (2, "base"), (2, "patched")]
    assert review.interleave(0) == []


def test_noise_only_pairs_make_no_regression() -> None:
    # Swings as large as the -51 % / -75 % seen under TCG, in both directions.
    r = review.compare(_summary(), _summary(),
                       _pairs({PERF: [0.49, 1.30, 0.85], READ: [1.6, 0.26, 0.9],
                               MMAP: [0.7, 1.1, 1.05]}), {"perf", "tracefs"})
    assert {b.status for b in r.bench} == {"same"}
    assert r.verdict == "no regression" and r.exit_status == 0


def test_noise_only_rarely_passes_the_pair_rule() -> None:
    # 400 reviews of a series that changes nothing, noise sigma 30 % per sample: the pair rule
    # alone (every ratio < 0.95, median < 0.90) fires for about 2^-3 of them at most.
    rng = random.Random(13)
    fired = 0
    for _ in range(400):
        pairs = [{"base": {PERF: rng.lognormvariate(0, 0.3)},
                  "patched": {PERF: rng.lognormvariate(0, 0.3)}} for _ in range(3)]
        fired += review.compare(_summary(), _summary(), pairs, {"perf"}).regressed
    assert fired / 400 < 1 / 8


def test_fewer_than_three_runs_are_not_judged() -> None:
    # The user's report: one run each, tracefs -50.9 % and -74.5 %, perf -40 %, all touched.
    r = review.compare(_summary(), _summary(),
                       _pairs({PERF: [0.6], READ: [0.491], MMAP: [0.255]}),
                       {"perf", "tracefs"})
    assert {b.status for b in r.bench} == {"not judged"}
    assert r.verdict == "no regression" and not r.bench_regressions
    text = "\n".join(r.lines())
    assert "not judged (fewer than 3 runs per kernel)" in text
    assert "  not judged     tracefs read transport events/s: patched/base per pair 0.49" in text
    # Two consistent pairs are still not enough.
    r = review.compare(_summary(), _summary(), _pairs({PERF: [0.5, 0.5]}), {"perf"})
    assert _status(r, PERF) == "not judged" and not r.regressed


def test_a_control_moving_as_much_is_too_noisy_to_judge() -> None:
    # The series touches perf only; tracefs moved more, so the host did it, not the series.
    r = review.compare(_summary(), _summary(),
                       _pairs({PERF: [0.80, 0.82, 0.78], READ: [0.70, 0.75, 0.72],
                               MMAP: [1.0, 0.98, 1.02]}), {"perf"})
    assert _status(r, PERF) == "too noisy" and _status(r, READ) == "control"
    assert r.verdict == "too noisy to judge" and r.exit_status == 4 and not r.regressed
    assert "BENCH NOISY" in "\n".join(r.lines()) and "REGRESSION" not in "\n".join(r.lines())


def test_a_control_that_stayed_put_leaves_a_slowdown_a_regression() -> None:
    r = review.compare(_summary(), _summary(),
                       _pairs({PERF: [0.80, 0.82, 0.78], READ: [0.95, 1.04, 0.97],
                               MMAP: [1.0, 0.9, 1.1]}), {"perf"})
    assert _status(r, PERF) == "worse" and r.verdict == "REGRESSION" and r.exit_status == 1


def test_a_clean_consistent_slowdown_of_a_touched_path_is_a_regression() -> None:
    r = review.compare(_summary(), _summary(), _pairs({PERF: [0.70, 0.72, 0.69, 0.71]}),
                       {"perf"})
    assert [b.figure for b in r.bench_regressions] == [PERF]
    assert r.verdict == "REGRESSION" and r.exit_status == 1
    assert "BENCH WORSE    perf mmap records/s: patched/base per pair 0.70 0.72 0.69 0.71 " \
           "(min 0.69 median 0.70 max 0.72, -29.5%" in "\n".join(r.lines())


def test_one_pair_against_the_trend_keeps_a_figure_same() -> None:
    r = review.compare(_summary(), _summary(), _pairs({PERF: [0.70, 0.72, 0.97]}), {"perf"})
    assert _status(r, PERF) == "same" and not r.regressed


def test_a_consistent_speedup_is_better_not_a_regression() -> None:
    r = review.compare(_summary(), _summary(), _pairs({PERF: [1.3, 1.25, 1.4]}), {"perf"})
    assert _status(r, PERF) == "better" and r.verdict == "no regression"


def test_an_untouched_path_never_regresses_alone() -> None:
    r = review.compare(_summary(), _summary(), _pairs({READ: [0.3, 0.3, 0.3]}), set())
    assert _status(r, READ) == "control" and r.verdict == "no regression"


def test_a_test_regression_is_a_regression_whatever_the_bench_noise() -> None:
    r = review.compare(_summary({"a": "passed"}), _summary({"a": "failed"}),
                       _pairs({PERF: [0.80, 0.82, 0.78], READ: [0.5, 0.5, 0.5]}), {"perf"})
    assert _status(r, PERF) == "too noisy"
    assert r.verdict == "REGRESSION" and r.exit_status == 1


def test_touched_paths_come_from_the_files_the_patches_modify() -> None:
    inpage = [p.text for p in series.read(REPO / "kernels" / "series" / "inpage")]
    files = review.touched_files(inpage)
    assert "kernel/events/ring_buffer.c" in files
    assert review.touched_paths(files) == {"perf"}
    assert review.touched_paths({"kernel/events/core.c"}) == {"perf"}
    assert review.touched_paths({"kernel/trace/ring_buffer.c", "Documentation/x.rst"}) \
        == {"tracefs"}
    assert review.touched_paths({"kernel/trace/trace.c", "kernel/events/core.c"}) \
        == {"perf", "tracefs"}
    assert review.touched_paths({"mm/memory.c"}) == set()
    assert review.touched_files(["--- a/kernel/trace/trace.c\n+++ b/kernel/trace/trace.c\n"]) \
        == {"kernel/trace/trace.c"}
    assert review.figure_path(MMAP) == "tracefs" and review.figure_path(PERF) == "perf"


def test_the_json_says_the_verdict_and_the_ratios() -> None:
    import json
    r = review.compare(_summary(), _summary(),
                       _pairs({PERF: [0.80, 0.82, 0.78], READ: [0.70, 0.75, 0.72]}), {"perf"})
    doc = json.loads(r.as_json())
    assert doc["verdict"] == "too noisy to judge" and doc["exit_status"] == 4
    perf = next(b for b in doc["bench"] if b["figure"] == PERF)
    assert perf["ratios"] == [0.8, 0.82, 0.78] and perf["status"] == "too noisy"
