"""harness/results/review.py on summaries, and harness/commands/bisect.py's revision checks on a small git
history made here (the end-to-end bisect is in tests/e2e/test_kbuild.py)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.commands import bisect
from harness.runs import child_run
from harness.results import review
from harness.errors import BisectError


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


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, list[str]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    shas = []
    for i in range(3):
        (repo / "f").write_text(f"{i}\n")
        subprocess.run([*git, "add", "f"], check=True)
        subprocess.run([*git, "commit", "-qm", f"c{i}"], check=True)
        shas.append(subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                                   check=True).stdout.strip())
    return repo, shas


def test_bisect_revisions_are_checked(history: tuple[Path, list[str]]) -> None:
    repo, (c0, c1, c2) = history
    assert bisect.check_revisions(repo, c0, c2) == (c0, c2)
    with pytest.raises(BisectError, match="--good .* is newer than --bad"):
        bisect.check_revisions(repo, c2, c0)
    with pytest.raises(BisectError, match="--good nope: not a commit"):
        bisect.check_revisions(repo, "nope", c2)
    with pytest.raises(BisectError, match="are the same commit"):
        bisect.check_revisions(repo, c1, c1)


def test_the_bisect_worktree_leaves_the_users_checkout_alone(
        history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, (c0, c1, c2) = history
    wt = bisect.worktree(repo, tmp_path / "cache", c1)
    assert (wt / "f").read_text() == "1\n" and (repo / "f").read_text() == "2\n"
    again = bisect.worktree(repo, tmp_path / "cache", c0)
    assert again == wt and (wt / "f").read_text() == "0\n"


def step_status(code: int, failing: set[str], no_guest: set[str], on_boot_failure: str) -> int:
    """bisect.step_status of a run with exit `code`, whose `failing` tests (those of them in
    `no_guest` for want of a guest) are given as 'file-stem::name'."""
    run = child_run.ChildRun(Path("run"), code, {}, {}, frozenset(failing), frozenset(no_guest),
                             None)
    return bisect.step_status(run, on_boot_failure)


@pytest.mark.parametrize("on_boot_failure, status", [("skip", 125), ("bad", 1), ("abort", 255)])
def test_a_kernel_that_does_not_boot_is_what_on_boot_failure_says(on_boot_failure: str,
                                                                  status: int) -> None:
    no_guest = {"test_a::test_one", "test_a::test_two"}
    assert step_status(1, no_guest, no_guest, on_boot_failure) == status


def test_a_test_failing_on_a_booted_guest_is_bad_whatever_on_boot_failure_says() -> None:
    for on_boot_failure in bisect.BOOT_FAILURE:
        assert step_status(1, {"test_a::test_one", "test_b::test_x"},
                           {"test_a::test_one"}, on_boot_failure) == bisect.BAD
        assert step_status(0, set(), set(), on_boot_failure) == bisect.GOOD
        assert step_status(2, set(), set(), on_boot_failure) == bisect.ABORT
        # A failed run we know nothing more of is still bad, as before.
        assert step_status(1, set(), set(), on_boot_failure) == bisect.BAD


def test_on_boot_failure_defaults_to_skip_on_both_commands() -> None:
    from harness import cli

    parser = cli.build_parser()
    assert parser.parse_args(["bisect", "--good", "a", "--bad", "b"]).on_boot_failure == "skip"
    assert parser.parse_args(["bisect-step"]).on_boot_failure == "skip"
    assert parser.parse_args(["bisect-step", "--on-boot-failure", "bad"]).on_boot_failure == "bad"
