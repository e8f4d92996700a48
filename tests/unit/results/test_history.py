"""harness/results/history.py: runs kept by kernel line and compared with the previous one."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.results import history
from harness.errors import ConfigError


def summary(kernel: str, release: str, **outcomes: str) -> dict:
    results = []
    for test, outcome in outcomes.items():
        if outcome == "flaky":   # died once, passed on its rerun in a fresh guest
            results += [{"test": test, "outcome": "rerun"}, {"test": test, "outcome": "passed"}]
        else:
            results.append({"test": test, "outcome": outcome})
    return {"kernel": kernel, "release": release, "results": results}


def test_new_failures_fixed_flaky_new_and_gone() -> None:
    before = summary("k", "6.12.106", a="passed", b="failed", c="failed", d="passed",
                     gone="passed", e="failed")
    now = summary("k", "6.12.107", a="failed", b="passed", c="failed", d="flaky",
                  new="passed", e="xfailed")
    c = history.compare(before, now, "earlier.json")
    assert c.new_failures == ["a"] and c.fixed == ["b"] and c.still_failing == ["c"]
    assert c.flaky == ["d"] and c.new_tests == ["new"] and c.gone_tests == ["gone"]
    # e went from failing to a known issue: not fixed, not failing.
    assert "e" not in c.fixed + c.new_failures + c.still_failing
    text = "\n".join(c.lines())
    assert "compared with earlier.json" in text and "NEW FAILURE   a" in text


def test_runs_are_kept_per_kernel_line_and_compared_with_the_last(tmp_path: Path) -> None:
    hist = tmp_path / "history"
    run = tmp_path / "summary.json"
    run.write_text(json.dumps(summary("trixie-cloud", "6.12.106", a="passed")))
    kept, first = history.record(hist, run)
    assert kept.parent == hist / "trixie-cloud" and first.previous is None
    assert "first run" in first.lines()[0]
    other = tmp_path / "other.json"
    other.write_text(json.dumps(summary("trixie-generic", "6.12.107", a="failed")))
    history.record(hist, other)   # another line: not compared with trixie-cloud
    kept.rename(kept.with_name("20260101-000000-6.12.106.json"))  # an earlier night
    run.write_text(json.dumps(summary("trixie-cloud", "6.12.107", a="failed")))
    _, second = history.record(hist, run)
    assert second.previous == "20260101-000000-6.12.106.json" and second.new_failures == ["a"]


def test_an_unwritable_history_dir_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    run = tmp_path / "summary.json"
    run.write_text(json.dumps(summary("k", "1", a="passed")))
    with pytest.raises(ConfigError, match="--history"):
        history.record(blocker / "sub", run)


def test_a_rerun_after_the_emulator_broke_is_a_pass_and_any_other_is_flaky() -> None:
    def run(cause: str | None) -> dict:
        rerun = {"test": "t", "outcome": "rerun", "reason": "x"}
        if cause:
            rerun["broke"] = [cause, "QEMU exited"]
        return {"results": [rerun, {"test": "t", "outcome": "passed"}]}
    assert history.outcomes(run("emulator")) == {"t": "passed"}
    assert history.outcomes(run("kernel")) == {"t": "flaky"}   # died with a kernel splat
    assert history.outcomes(run(None)) == {"t": "flaky"}       # --reruns: an assertion


def test_a_named_line_keeps_runs_of_one_kernel_apart(tmp_path: Path) -> None:
    """A nightly's cells of one kernel with other selections are lines of their own."""
    hist = tmp_path / "history"
    run = tmp_path / "summary.json"
    run.write_text(json.dumps(summary("trixie-cloud", "6.12.107", a="passed")))
    kept, c = history.record(hist, run, line="trixie-cloud.perf")
    assert kept.parent == hist / "trixie-cloud.perf" and c.kernel == "trixie-cloud.perf"
    assert "first run of kernel line trixie-cloud.perf" in c.lines()[0]
    _, other = history.record(hist, run, line="trixie-cloud.trace")
    assert other.previous is None


def test_runs_in_one_second_are_compared_in_the_order_they_ran(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A plain sort put "STEM-2.json" before "STEM.json": the third run was compared with the
    # first, not the second.
    monkeypatch.setattr(history.time, "strftime", lambda fmt: fmt.replace("%Y%m%d-%H%M%S",
                                                                           "20261129-020000"))
    hist, run = tmp_path / "history", tmp_path / "summary.json"
    for n, outcome in enumerate(("passed", "failed", "passed")):
        run.write_text(json.dumps(summary("k", "6.12.1", a=outcome)))
        kept, c = history.record(hist, run)
        assert c.new_failures == (["a"] if n == 1 else []), (n, kept)
        assert c.fixed == (["a"] if n == 2 else []), (n, kept)
    assert sorted(p.name for p in (hist / "k").iterdir()) == [
        "20261129-020000-6.12.1.json", "20261129-020000-6.12.1~2.json",
        "20261129-020000-6.12.1~3.json"]
