"""harness/results/review.py on summaries (the bisect's tests are in tests/unit/bisect/)."""
from __future__ import annotations

from harness.results import review


def _summary(outcomes: dict[str, str], splats: dict[str, list[str]] | None = None) -> dict:
    results = []
    for test, outcome in outcomes.items():
        entry = {"test": test, "outcome": outcome, "reason": ""}
        if splats and test in splats:
            entry["splats"] = [{"title": t} for t in splats[test]]
        results.append(entry)
    return {"kernel": "k", "kernel_description": "k", "results": results}

def test_a_known_issue_the_series_fixes_is_not_seen_and_one_it_brings_is_a_regression() -> None:
    why = "known kernel issue perf-mmap-second-mapping-charged: a perf buffer mapped again"
    base = _summary({"charged": "xfailed", "other": "passed"})
    base["results"][0]["reason"] = why
    patched = _summary({"charged": "passed", "other": "passed"})
    r = review.compare(base, patched)
    assert r.known_not_seen == ["charged"] and not r.regressed
    assert "NOT SEEN       charged (xfailed -> passed: known issue " \
        "perf-mmap-second-mapping-charged)" in "\n".join(r.lines())
    back = review.compare(patched, base)
    assert back.newly_known == ["charged"] and back.regressed
    assert "NEWLY KNOWN    charged (passed -> xfailed: known issue " \
        "perf-mmap-second-mapping-charged)" in "\n".join(back.lines())

def test_review_classifies_every_change() -> None:
    base = _summary({"a": "passed", "b": "failed", "c": "passed", "d": "skipped", "e": "passed",
                     "gone": "passed"},
                    {"a": ["WARNING at kernel/trace/trace.c:8274 f+0x51/0x70"]})
    patched = _summary({"a": "passed", "b": "passed", "c": "failed", "d": "passed",
                        "e": "skipped", "new": "passed"},
                       {"a": ["WARNING at kernel/trace/trace.c:8280 f+0x55/0x70"],
                        "b": ["BUG: KASAN: use-after-free in perf_mmap+0x1/0x2"]})
    r = review.compare(base, patched)
    assert r.newly_failing == ["c"] and r.newly_passing == ["b", "d"]
    assert r.newly_skipped == ["e"] and r.new_tests == ["new"] and r.gone_tests == ["gone"]
    # The moved WARNING (other line, other offset) is not new; the KASAN report is.
    assert r.new_warnings == ["b: BUG: KASAN: use-after-free in perf_mmap"]
    assert r.regressed
    text = "\n".join(r.lines())
    assert "NEWLY FAILING  c (passed -> failed)" in text and "REGRESSION" in text

def test_a_series_that_only_adds_passing_tests_does_not_regress() -> None:
    base = _summary({"a": "passed", "inpage": "skipped", "known": "xfailed"})
    patched = _summary({"a": "passed", "inpage": "passed", "known": "xfailed"})
    r = review.compare(base, patched)
    assert not r.regressed and r.newly_passing == ["inpage"]

def test_bench_pairs_judge_only_a_touched_path() -> None:
    pairs = [{"base": {"perf rate": b, "tracefs rate": t},
              "patched": {"perf rate": b * 0.8, "tracefs rate": t * 1.01}}
             for b, t in ((100.0, 50.0), (104.0, 52.0), (98.0, 51.0))]
    r = review.compare(_summary({}), _summary({}), pairs, {"perf"})
    assert [b.figure for b in r.bench_regressions] == ["perf rate"] and r.regressed
    assert next(b for b in r.bench if b.figure == "tracefs rate").status == "control"

def test_a_newly_flaky_test_is_a_regression() -> None:
    base = _summary({"a": "passed"})
    patched = {"kernel": "k", "results": [{"test": "a", "outcome": "rerun", "reason": ""},
                                          {"test": "a", "outcome": "passed", "reason": ""}]}
    r = review.compare(base, patched)
    assert r.newly_flaky == ["a"] and r.verdict == "REGRESSION" and r.exit_status == 1
    assert "NEWLY FLAKY    a (passed -> flaky)" in "\n".join(r.lines())
