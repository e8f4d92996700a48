"""Mutants judged by the explorer (harness/mutate/by_explore.py): each kernel file maps to the
explorer's paths it serves, and the unmutated kernel is explored on each path once; with
--selftests the kernel's own run on each mutant's build too."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness import config
from harness.kernels.mutants import KERNEL_FILES, Mutant, watchers_of_folder
from harness.mutate import build, by_explore, by_suite
from harness.mutate.by_explore import EXPLORE_PATHS, Found, explore_paths, paths_of
from harness.mutate.outcomes import KILLED, SURVIVED
from harness.mutate.plan import Plan
from harness.runs import child_run


def _mutant(file: str) -> Mutant:
    return Mutant(f"00x-{Path(file).stem}", Path("x.patch"), file, "r", None, None, "")


def _plan(tmp_path: Path, files: tuple[str, ...], selftests: bool = False) -> Plan:
    """A plan of mutants of `files` on a build kernel of a lab.yaml in tmp_path, 1 s a path."""
    (tmp_path / "linux").mkdir()
    (tmp_path / "lab.yaml").write_text(f"default_kernel: mine\nkernels:\n  mine:\n    build:\n"
                                       f"      tree: {tmp_path / 'linux'}\n")
    cfg = config.load(tmp_path / "lab.yaml")
    spec = cfg.kernel(None)
    return Plan(cfg.with_kernel(spec), spec, tuple(_mutant(f) for f in files), None, (),
                tmp_path, explore_s=1, selftests=selftests)


def test_explorer_paths_are_named_only_for_files_of_the_catalog() -> None:
    assert set(EXPLORE_PATHS) <= set(KERNEL_FILES)


def test_a_file_is_named_only_where_its_folder_would_say_otherwise() -> None:
    # One home: a row that repeats WATCHERS_OF_FOLDER would drift from it.
    for file, paths in EXPLORE_PATHS.items():
        folder = watchers_of_folder(file)
        assert folder is None or folder.explore_paths != paths, file


@pytest.mark.parametrize("file, want", [
    ("kernel/events/ring_buffer.c", ("perf-ring", "perf-aux")),      # named
    ("kernel/trace/trace_snapshot.c", ("trace-mmap", "trace-remote")),  # its folder's
    ("kernel/trace/trace_remote.c", ("trace-mmap", "trace-remote")),
    ("kernel/events/uprobes.c", ("pinning", "perf-ring", "perf-aux")),
    # anywhere: every path the probes have (a new explore_*.py file is one more)
    ("mm/mmap.c", ("perf-ring", "perf-aux", "pinning", "trace-remote", "trace-mmap")),
])
def test_a_mutant_of_any_file_is_explored_on_the_paths_that_can_see_it(
        file: str, want: tuple[str, ...]) -> None:
    assert explore_paths(file) == want


def test_the_paths_of_several_mutants_are_each_named_once_in_order() -> None:
    ms = (_mutant("kernel/events/ring_buffer.c"), _mutant("kernel/trace/trace.c"),
          _mutant("kernel/events/core.c"), _mutant("kernel/trace/ring_buffer.c"))
    assert paths_of(ms) == ("perf-ring", "perf-aux", "trace-mmap", "trace-remote", "pinning")
    assert paths_of(()) == ()


def test_with_selftests_each_mutant_build_also_runs_the_kernels_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # One build per mutant gives both columns: the explorer's verdict and the selftests'.
    st = "kselftest/test_kselftest.py::test_case[perf_events/mmap/map.default]"
    plan = _plan(tmp_path, ("kernel/events/core.c", "kernel/trace/trace.c"), selftests=True)
    asked: list[str | None] = []

    def run_tests(plan: Plan, tree: Path, selection: str | None, run_dir: Path,
                  selftests: str = "kselftest", left_out: tuple[str, ...] = ()
                  ) -> tuple[child_run.ChildRun, float]:
        assert selftests == selection
        asked.append(selection)
        outcome = "failed" if len(asked) == 2 else "passed"   # the first mutant breaks it
        return child_run.of({"boots": [{"cpus": 1}], "results": [
            {"test": st, "outcome": outcome, "reason": ""}]}, int(outcome == "failed")), 1.0

    @contextlib.contextmanager
    def built(*a: Any) -> Iterator[bool]:
        yield True

    monkeypatch.setattr(by_suite, "run_tests", run_tests)
    monkeypatch.setattr(build, "mutant_built", built)
    monkeypatch.setattr(by_explore, "explore", lambda *a, **k: (Found(), 2.0))
    ws: Any = SimpleNamespace(src=tmp_path / "ws")
    judged = by_explore.judge_all(plan, ws, "7.3", [], tmp_path / "base", 0.0)
    # the unmutated kernel: every target some mutant's file needs
    assert asked == ["kselftest and (perf_events or ring-buffer or ftrace)",
                     "kselftest and (perf_events)",
                     "kselftest and (ring-buffer or ftrace)"]
    assert [r.selftest_killers for r in judged.results] == [[st], []]
    assert [r.outcome for r in judged.results] == [SURVIVED, SURVIVED]


def test_a_known_issue_the_unmutated_kernel_did_not_show_kills_as_newly_known(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mutant that brings a known bug back (its failures bound to the known issue) is a
    kill, labelled; a known issue the unmutated kernel shows too kills nothing."""
    plan = _plan(tmp_path, ("kernel/trace/trace.c", "kernel/trace/ring_buffer.c"))
    seen = {"known:dofork": "newly known dofork: trace-mmap:splat: WARNING"}
    back = {"known:first-map": "newly known first-map: trace-mmap:result:mmap: ok"}
    answers = iter([Found(seen), Found({**seen, **back}), Found(dict(seen))])   # the unmutated kernel, then each

    @contextlib.contextmanager
    def built(*a: Any) -> Iterator[bool]:
        yield True

    monkeypatch.setattr(build, "mutant_built", built)
    monkeypatch.setattr(by_explore, "explore", lambda *a, **k: (next(answers), 2.0))
    ws: Any = SimpleNamespace(src=tmp_path / "ws")
    judged = by_explore.judge_all(plan, ws, "7.2", [], tmp_path / "base", 0.0)
    assert [r.outcome for r in judged.results] == [KILLED, SURVIVED]
    assert judged.results[0].why.startswith("newly known first-map")


def test_each_seed_and_mode_is_judged_against_the_unmutated_kernels_same_explore(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Steered against blind (issue 42): every kernel is explored once per (seed, mode), the
    modes taking turns per seed, and a failure kills only where the unmutated kernel's
    explore of the same seed and mode did not have it."""
    plan = replace(_plan(tmp_path, ("kernel/trace/ring_buffer.c",)), seeds=(0, 1),
                   modes=(False, True))
    assert by_explore.runs_of(plan) == [(0, False), (0, True), (1, False), (1, True)]
    meta = {"trace-mmap:meta": "trace-mmap:meta: {'read': 0}"}
    base = {(0, False): Found(), (0, True): Found(dict(meta), frozenset(meta)),
            (1, False): Found(), (1, True): Found()}
    mutant = {(0, False): Found(), (0, True): Found(dict(meta)), (1, False): Found(),
              (1, True): Found(dict(meta))}
    asked: list[tuple[int, bool, Path]] = []

    def explore(plan: Plan, tree: Path, paths: tuple[str, ...], out: Path, seed: int,
                steer: bool, stop_at_new: bool = True, baseline: tuple[str, ...] = ()
                ) -> tuple[Found, float]:
        asked.append((seed, steer, out))
        # a mutant's explore knows what the unmutated one with its seed and mode had
        assert not stop_at_new or baseline == base[(seed, steer)].baseline()
        return (base if not stop_at_new else mutant)[(seed, steer)], 10.0 + seed

    @contextlib.contextmanager
    def built(*a: Any) -> Iterator[bool]:
        yield True

    monkeypatch.setattr(build, "mutant_built", built)
    monkeypatch.setattr(by_explore, "explore", explore)
    ws: Any = SimpleNamespace(src=tmp_path / "ws")
    judged = by_explore.judge_all(plan, ws, "7.2", [], tmp_path / "base", 0.0)
    [r] = judged.results
    # seed 0 steered: the unmutated kernel had it too; seed 1 steered: new, a kill
    assert [(e.seed, e.steered, e.killed) for e in r.explored or []] == [
        (0, False, False), (0, True, False), (1, False, False), (1, True, True)]
    assert r.outcome == KILLED and r.why == meta["trace-mmap:meta"]
    assert {a[2].name for a in asked} == {"seed0-blind", "seed0-steered", "seed1-blind",
                                          "seed1-steered"}
    assert judged.selection.endswith("--seed 0,1, blind and --steer")
    assert judged.base_counts == {"failures no known issue explains": 1}


@pytest.mark.parametrize("stop_at_new, sites", [(False, True), (True, False)])
def test_the_unmutated_kernels_known_failures_give_their_sites_to_the_baseline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_at_new: bool,
        sites: bool) -> None:
    """Race mutants 063, 064, 066 and 067 were 'killed' by the put_snapshot_map WARN the
    unmutated kernel showed too, bound there to its known issue (a moved mapping) and
    unbound in the mutants' runs: the site of a known failure of the unmutated kernel is
    in its baseline, and kills nothing."""
    from harness.explore.session import Failure, PathResult
    warn = "WARNING at kernel/trace/trace_snapshot.c:831 put_snapshot_map"
    f = Failure(path="trace-mmap", check="splat", expected="no splat", got="x", at="log",
                seed=0, sequence=1, setup={}, env={}, steps=[], shrunk=True, traits=["moved"],
                splat=warn, known_issue="trace-mmap-dofork-mapped-count", confirmed=True)
    asked: list[Any] = []

    class FakeExplore:
        def __init__(self, lab: Any, req: Any, out: Path, say: Any) -> None:
            self.req, self.kernel = req, SimpleNamespace(release="7.2.13")
            asked.append(req)
            self.results = [PathResult("trace-mmap", failures={f.slot: f})]

        def run_all(self) -> None:
            pass

        def stop_guest(self) -> None:
            pass
    monkeypatch.setattr(by_explore, "Explore", FakeExplore)
    monkeypatch.setattr(by_explore, "Lab", lambda cfg: None)
    monkeypatch.setattr(by_explore, "with_build", lambda *a, **k: None)
    monkeypatch.setattr(by_explore.report, "write", lambda *a, **k: None)
    plan = _plan(tmp_path, ("kernel/trace/ring_buffer.c",))
    found, _ = by_explore.explore(plan, tmp_path, ("trace-mmap",), tmp_path / "x", 0, False,
                                  stop_at_new=stop_at_new)
    assert "known:trace-mmap-dofork-mapped-count" in found.failures
    assert asked[0].confirm is stop_at_new, "the unmutated kernel's failures are not replayed"
    site = "trace-mmap:WARNING at kernel/trace/trace_snapshot.c put_snapshot_map"
    assert (site in found.sites) is sites
    unbound = Found({site: "the same WARN, no trait of the issue"})
    assert found.new_in(unbound) == ([] if sites else [unbound.failures[site]])


def test_paths_narrow_each_mutants_paths_and_a_path_none_serves_is_one_clear_error() -> None:
    """--paths trace-mmap: a ring_buffer.c race mutant is not explored on trace-remote; a
    mutant left with no path, or a path the explorer has not, is named."""
    from harness.errors import LabError
    from harness.mutate.by_explore import check_paths, mutant_paths
    trace, perf = _mutant("kernel/trace/ring_buffer.c"), _mutant("kernel/events/core.c")
    assert mutant_paths(trace, ("trace-mmap",)) == ("trace-mmap",)
    assert mutant_paths(trace) == ("trace-mmap", "trace-remote")
    assert paths_of((trace, perf), ("trace-mmap", "perf-ring")) == ("trace-mmap", "perf-ring")
    check_paths((trace, perf), ("trace-mmap", "perf-ring"))
    with pytest.raises(LabError, match=r"mutant .* \(kernel/events/core.c\) is explored on"):
        check_paths((trace, perf), ("trace-mmap",))
    with pytest.raises(LabError, match="--paths nope: not a path the explorer models"):
        check_paths((trace,), ("nope",))
