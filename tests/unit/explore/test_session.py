"""./lab explore on the host: the command line checked, a failure bound to its known issue
and to nothing else, reproducers that compile, the report written whole."""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.commands import explore as verb
from harness.errors import LabError
from harness.probe_modules import probe_module
from harness.explore import report, reproducer
from harness.explore.session import ExploreRequest, Failure, PathResult, parse_budget
from harness.results import known_issues

DOUBLE_CHARGE = [{"id": 0, "op": "open", "args": ["dummy"]},
                 {"id": 1, "op": "mmap", "args": ["@0", 9, "rw", "shared"]},
                 {"id": 2, "op": "mmap", "args": ["@0", 9, "rw", "shared"]}]
MOVED = [{"id": 0, "op": "open", "args": [0]},
         {"id": 1, "op": "mmap", "args": ["@0", "all", "r", "shared"]},
         {"id": 2, "op": "mremap", "args": ["@1", "move"]}]
PERF_ENV = {"page_size": 4096, "ncpus": 1, "mlock_kb": 36, "has_pmu": False, "has_tp": True}


def failure(path: str = "pinning", check: str = "allowance", steps: list | None = None,
            traits: tuple = ("mapped-again",), splat: str | None = None) -> Failure:
    trace = path == "trace-mmap"
    if path == "trace-remote":     # 057: buffer_size_kb taken while loaded
        return Failure(path=path, check="result:size", expected=["EBUSY"], got="ok", at=1,
                       seed=1, sequence=0, setup={"size_kb": 7}, env={"ncpus": 1},
                       steps=[{"id": 0, "op": "on", "args": {"value": 1}},
                              {"id": 1, "op": "size", "args": {"kb": 16}}],
                       shrunk=True, traits=[], splat=splat)
    return Failure(path=path, check=check, expected="ok", got="EPERM", at="end", seed=1,
                   sequence=0, setup={"buffer_kb": 8, "subbuf_kb": 4} if trace else
                   {"mlock_pages": 9, "rlimit_pages": 8, "who": "user"},
                   env={"ncpus": 1, "instance": "x", "has_snapshot": True,
                        "has_subbuf": True} if trace else PERF_ENV,
                   steps=steps if steps is not None else (MOVED if trace else DOUBLE_CHARGE),
                   shrunk=True, traits=list(traits), splat=splat)


def args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers()
    verb.register(sub)
    return p.parse_args(["explore", *argv])


@pytest.mark.parametrize("argv, culprit", [(["nope"], "unknown path 'nope'"),
                                           (["--budget", "0"], "more than 0"),
                                           (["--budget", "ten"], "--budget 'ten'"),
                                           (["--seed", "x"], "--seed 'x'"),
                                           (["--actors", "5"], "--actors '5'"),
                                           (["--confirm", "0"], "--confirm '0'"),
                                           (["--load", "marker,x"], "--load 'x'")])
def test_bad_input_is_one_error_naming_the_culprit(argv: list[str], culprit: str) -> None:
    with pytest.raises(LabError, match=culprit):
        verb.request(args(*argv), "k")


def test_a_request_from_the_command_line() -> None:
    r = verb.request(args("trace-mmap", "pinning", "trace-mmap", "--budget", "2m", "--seed",
                          "7"), "k")
    assert r == ExploreRequest(kernel="k", paths=("trace-mmap", "pinning"), budget_s=120.0,
                               seed=7)
    assert parse_budget("90s") == 90 and parse_budget("1h") == 3600


def test_the_double_charge_binds_to_its_known_issue_and_only_there() -> None:
    issues = {i.id: i for i in known_issues.load()}
    charged = issues["perf-mmap-second-mapping-charged"]
    assert charged.explains_explore("pinning", "allowance", ["mapped-again"])
    assert not charged.explains_explore("pinning", "allowance", ["moved"]), \
        "a leak without a second mapping is not this issue"
    assert not charged.explains_explore("pinning", "result:munmap", ["mapped-again"])
    assert not issues["trace-mmap-dofork-mapped-count"].explains_explore(
        "pinning", "allowance", ["mapped-again"])


def test_a_splat_binds_by_its_title() -> None:
    issue = {i.id: i for i in known_issues.load()}["trace-mmap-dofork-mapped-count"]
    assert issue.explains_explore("trace-mmap", "splat", ["moved"],
                                  "WARNING at kernel/trace/trace_snapshot.c:831 put_snapshot_map")
    assert not issue.explains_explore("trace-mmap", "splat", ["moved"],
                                      "BUG at mm/page_alloc.c:1 free_pages")


def test_two_known_issues_at_once_bind_as_both_and_not_one_alone() -> None:
    """A fork's closed reader (read EOF) and a moved mapping's WARN in one sequence (7.2.13,
    round 10): each issue explains its own symptom only."""
    from harness.explore.session import Explore
    run = Explore.__new__(Explore)
    warn = "WARNING at kernel/trace/trace_snapshot.c:831 put_snapshot_map"
    f = failure("trace-mmap", check="result:read", traits=("forked", "moved"), splat=warn)
    run.bind(f, known_issues.load())
    assert f.known_issue == "trace-pipe-raw-closed-by-another-close+trace-mmap-dofork-mapped-count"
    alone = failure("trace-mmap", check="result:read", traits=("forked",), splat=warn)
    run.bind(alone, known_issues.load())
    assert alone.known_issue is None, "no moved mapping: the WARN is not that issue's"


def test_a_kept_failures_replay_is_covered_by_its_issue_only() -> None:
    issues = {i.id: i for i in known_issues.load()}
    node = f"{known_issues.EXPLORE_REPLAY}[perf-mmap-second-mapping-charged--pinning-allowance]"
    assert issues["perf-mmap-second-mapping-charged"].covers(node)
    assert not issues["trace-mmap-dofork-mapped-count"].covers(node)
    check = known_issues.CheckFailure("explore:allowance", "", {"path": "pinning",
                                                                "traits": ["mapped-again"]})
    assert issues["perf-mmap-second-mapping-charged"].explains_check(check)


def test_the_model_says_what_each_step_of_a_reproducer_must_give() -> None:
    exp = reproducer.expectations(failure())
    assert [e["allowed"] for e in exp] == [["ok"], ["ok"], ["ok"]]
    assert [e["vm_pin_kb"] for e in exp] == [0, 0, 0]


@pytest.mark.parametrize("path", ["pinning", "trace-mmap", "trace-remote"])
def test_reproducers_compile(tmp_path: Path, path: str) -> None:
    f = failure(path)
    py, c = reproducer.write(tmp_path, f, report.title(f))
    subprocess.run([sys.executable, "-m", "py_compile", str(py)], check=True)
    if shutil.which("gcc") is None:
        pytest.skip("no gcc on this host")
    r = subprocess.run(["gcc", "-Wall", "-Werror", "-pthread", "-o", str(tmp_path / "repro"),
                        str(c)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("path", ["perf-ring", "perf-aux", "pinning", "trace-mmap"])
def test_every_operation_the_models_draw_has_reproducers_that_compile(tmp_path: Path,
                                                                       path: str) -> None:
    """Sequences drawn by the model itself, so a new operation cannot ship without its
    Python and C forms."""
    import random
    explore_perf = probe_module("explore_perf")
    explore_trace = probe_module("explore_trace")
    trace = path == "trace-mmap"
    setup = {"buffer_kb": 8, "subbuf_kb": 4, "ncpus": 2, "has_snapshot": True,
             "has_subbuf": True, "instance": "x"} if trace else \
        dict(PERF_ENV, has_pmu=True, mlock_pages=9, rlimit_pages=8, who="user")
    ops: set[str] = set()
    for seed in range(12):
        m = explore_trace.TraceModel(path, setup) if trace else \
            explore_perf.PerfModel(path, setup)
        rng, steps = random.Random(seed), []
        for i in range(30):
            step = dict(m.choose(rng, i), id=i)
            allowed = m.expect(step)
            m.apply(step, "ok" if "ok" in allowed else min(allowed))
            steps.append(step)
            ops.add(step["op"])
        f = failure(path, steps=steps)
        f.setup = {k: v for k, v in setup.items() if k in ("buffer_kb", "subbuf_kb")} if trace \
            else {"mlock_pages": 9, "rlimit_pages": 8, "who": "user"}
        py, c = reproducer.write(tmp_path / str(seed), f, report.title(f))
        subprocess.run([sys.executable, "-m", "py_compile", str(py)], check=True)
        if shutil.which("gcc"):
            r = subprocess.run(["gcc", "-Wall", "-Werror", "-fsyntax-only", str(c)],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
    new = {"pause"} if path == "perf-ring" else {"mprotect", "ioctl"} if trace else set()
    assert len(ops) >= 8 and new <= ops, ops


def test_the_report_is_written_whole_and_keeps_failures_as_data(tmp_path: Path) -> None:
    res = PathResult("pinning", sequences=10, steps=100, seconds=2.0)
    f = failure()
    f.known_issue, f.confirmed = "perf-mmap-second-mapping-charged", True
    res.failures[f.key] = f
    out = report.write(tmp_path, ExploreRequest(None, (), 60, 1), "sid-cloud", "7.2.13", [res],
                       interrupted=False)
    doc = json.loads(out.read_text())
    assert doc["paths"][0]["steps_per_s"] == 50.0
    assert doc["paths"][0]["failures"][0]["reproducers"] == [
        "failures/pinning-allowance--perf-mmap-second-mapping-charged/repro.py",
        "failures/pinning-allowance--perf-mmap-second-mapping-charged/repro.c"]
    kept = report.keep(f, "7.2.13", tmp_path / "kept")
    assert kept.name == "perf-mmap-second-mapping-charged--pinning-allowance.json"
    assert json.loads(kept.read_text())["steps"] == DOUBLE_CHARGE
    assert any("known issue perf-mmap-second-mapping-charged" in x for x in report.lines([res]))


# --- one slice's failures on the host -------------------------------------------------------------

def _record(k: int, steps: list, traits: list[str], got: str = "EPERM") -> dict:
    return {"sequence": k, "setup": {}, "env": PERF_ENV, "steps": steps, "shrunk": steps,
            "traits": traits, "kmsg": [],
            "failure": {"check": "allowance", "at": "end", "expected": "ok", "got": got}}


def _explore(slices: list[dict], stop_at_new: bool = False, baseline: tuple[str, ...] = (),
             confirm: bool = True) -> tuple[object, list[list[str]]]:
    from harness.explore.session import Explore
    run = Explore.__new__(Explore)
    run.req = ExploreRequest(None, ("pinning",), 60, 1, stop_at_new=stop_at_new,
                             baseline=baseline, confirm=confirm)
    run.say, run.guest = (lambda line: None), None
    run.fresh_guest = lambda: None   # type: ignore[method-assign,assignment,return-value]
    calls: list[list[str]] = []

    def probe(argv: list[str], timeout: float) -> dict:
        calls.append(argv)
        if "--available" in argv:
            return {"path": "pinning", "missing": None}
        return slices[min(len(calls) - 2, len(slices) - 1)]
    run._probe = probe      # type: ignore[method-assign]
    return run, calls


def test_a_new_failure_of_a_check_is_kept_beside_the_known_issue_of_that_check() -> None:
    issues = known_issues.load()
    one = {"next": 3, "sequences": 3, "steps": 30, "seconds": 0.2,
           "failed": {"allowance~known": 2, "allowance": 1},
           "failures": [_record(0, DOUBLE_CHARGE, ["mapped-again"]),
                        _record(2, DOUBLE_CHARGE[:2], [], got="8 kB more")]}
    run, calls = _explore([one], stop_at_new=True)
    res = PathResult("pinning")
    run.run_path("pinning", res, issues)
    assert sorted(res.failures) == ["pinning:allowance",
                                    "pinning:allowance#perf-mmap-second-mapping-charged"]
    assert res.failures["pinning:allowance"].known_issue is None
    assert res.failures["pinning:allowance#perf-mmap-second-mapping-charged"].seen == 2
    assert calls[2][0] == "replay", "the new failure is confirmed at once"
    assert len(calls) == 3, "stop_at_new: no second slice after a confirmed new failure"
    excuses = json.loads(calls[1][calls[1].index("--excuse") + 1])
    assert {"checks": ["allowance", "vm_pin_kb", "result:mmap", "result:aux"],
            "traits": ["mapped-again", "aux-mapped-again"], "splats": []} in excuses


def test_a_mutants_explore_goes_on_past_a_failure_the_unmutated_kernel_had_too() -> None:
    """`./lab mutate --explore` stops a mutant's explore at its first new failure: one the
    unmutated kernel's explore had is no kill and must not end the budget early (race
    mutants 063 and 066 stopped at 15 s of 90 on the unmutated kernel's own WARN)."""
    issues = known_issues.load()
    one = {"next": 3, "sequences": 3, "steps": 30, "seconds": 0.2,
           "failed": {"allowance": 1},
           "failures": [_record(2, DOUBLE_CHARGE[:2], [], got="8 kB more")]}
    run, calls = _explore([one, one, {"path": "pinning", "skip": "gone"}], stop_at_new=True,
                          baseline=("pinning:allowance",))
    run.run_path("pinning", PathResult("pinning"), issues)
    assert len(calls) == 4, "the baseline's failure stopped nothing"
    run, calls = _explore([one, one], stop_at_new=True)
    run.run_path("pinning", PathResult("pinning"), issues)
    assert [c[0] for c in calls] == ["run", "run", "replay"], \
        "a failure the baseline lacks stops at once, confirmed"


def test_a_mutants_explore_goes_on_past_a_new_failure_a_fresh_guest_did_not_show() -> None:
    """A race shows in some schedules: a new failure its fresh guest did not show again
    stops nothing, and the mutant's budget goes on (063, 066 ended at 16 s, issue 43)."""
    one = {"next": 3, "sequences": 3, "steps": 30, "seconds": 0.2,
           "failed": {"allowance": 1},
           "failures": [_record(2, DOUBLE_CHARGE[:2], [], got="8 kB more")]}
    quiet = {"next": 6, "sequences": 3, "steps": 30, "seconds": 0.2, "failures": [],
             "replays": [{"failure": None}]}
    run, calls = _explore([one, quiet, quiet, {"path": "pinning", "skip": "gone"}],
                          stop_at_new=True)
    res = PathResult("pinning")
    run.run_path("pinning", res, known_issues.load())
    assert [c[0] for c in calls] == ["run", "run", "replay", "run", "run"]
    f = res.failures["pinning:allowance"]
    assert (f.confirmed, f.confirm_got) == (False, "no failure")
    assert not run.new_found(res), "refused by its fresh guest: no longer a stop"


def test_a_baseline_explore_replays_nothing_and_keeps_every_failure_it_saw() -> None:
    """`./lab mutate`'s unmutated kernel: a failure seen once is the baseline's, so its
    replays only cost time (21 min for 2 x 4 min, races round 4) and their splats added
    failures of their own; with confirm off no failure is replayed, each stays unconfirmed."""
    one = {"next": 3, "sequences": 3, "steps": 30, "seconds": 0.2,
           "failed": {"allowance": 1},
           "failures": [_record(2, DOUBLE_CHARGE[:2], [], got="8 kB more")]}
    gone = {"path": "pinning", "skip": "gone"}
    run, calls = _explore([one, gone], confirm=False)
    run.results = []
    run.run_all()
    assert [c[0] for c in calls] == ["run", "run", "run"], "no replay"
    f = run.results[0].failures["pinning:allowance"]
    assert f.confirmed is None and "not replayed" in f.confirm_got
    run, calls = _explore([one, gone])
    run.results = []
    run.run_all()
    assert [c[0] for c in calls][-1] == "replay", "a plain explore confirms"


def test_a_mutants_explore_stops_at_a_confirmed_crash_too() -> None:
    """Race mutant 063 hung every sequence (186 s each) for its whole budget, round 5: a
    crash or hang no known issue explains ends a mutant's explore once a fresh guest
    confirms it, as a failed check does."""
    from harness.errors import GuestHang
    run, calls = _explore([{}], stop_at_new=True)

    def probe(argv: list[str], timeout: float) -> dict:
        calls.append(argv)
        if "--available" in argv:
            return {"path": "pinning", "missing": None}
        raise GuestHang("no answer")
    hang = failure("pinning", "hang", splat=None)
    confirmed: list[str] = []

    def crashed(path: str, res: PathResult, first: int, error: Exception) -> int:
        res.failures.setdefault(hang.slot, hang)
        return first + 1

    def confirm(f: Failure) -> None:
        confirmed.append(f.key)
        f.confirmed = True
    run._probe, run._crashed, run.confirm = probe, crashed, confirm  # type: ignore[method-assign]
    run.run_path("pinning", PathResult("pinning"), known_issues.load())
    assert [c[0] for c in calls] == ["run", "run"], "one slice, then it stopped"
    assert confirmed == [hang.key]


WARN_AT = ["WARNING: CPU: 1 PID: 77 at kernel/trace/ring_buffer.c:{} "
           "ring_buffer_map_get_reader+0x1/0x2", "Reader on commit with 3 missed events"]


def test_a_warn_that_moved_lines_is_the_same_site_for_a_mutants_baseline() -> None:
    """A mutant that adds or removes lines above a WARN moves its line (066 found the
    unmutated kernel's WARN at 8011 instead of 8014): compared by site, not by line."""
    at_8014 = failure("trace-mmap", "splat", splat=report_title([WARN_AT[0].format(8014)]))
    at_8011 = failure("trace-mmap", "splat", splat=report_title([WARN_AT[0].format(8011)]))
    assert at_8014.key != at_8011.key
    assert at_8014.site == at_8011.site == \
        "trace-mmap:WARNING at kernel/trace/ring_buffer.c ring_buffer_map_get_reader"
    res = PathResult("trace-mmap", failures={at_8011.key: at_8011})
    assert not run_new_found(res, (at_8014.site,))
    assert run_new_found(res, ())


def run_new_found(res: PathResult, baseline: tuple[str, ...]) -> bool:
    from harness.explore.session import Explore
    return Explore.new_found(res, baseline)


def _race(k: int = 4) -> Failure:
    f = failure("trace-mmap", "splat", splat=report_title([WARN_AT[0].format(8014)]))
    f.setup = dict(f.setup, load="marker@1,resize@1")
    f.steps = [dict(s, actor=i % 2) for i, s in enumerate(MOVED)]
    f.sequence = k
    return f


@pytest.mark.parametrize("stop_at_new, guests, hits", [(False, 3, 1), (True, 2, 1)])
def test_a_race_is_replayed_on_fresh_guests_and_counted_k_of_n(
        stop_at_new: bool, guests: int, hits: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure of actors and loads is a schedule's: one replay proves nothing either way,
    and a WARN_ONCE fires once a boot. Replayed on N fresh guests, it is reported as k of N
    (the race that shows 1 time in N, issue 43), the first hit ending a mutant's search."""
    from types import SimpleNamespace
    from harness.explore.session import CONFIRM_TIMES, Explore
    lab: Any = SimpleNamespace(kernel=lambda name: SimpleNamespace(name=name))
    run = Explore(lab, ExploreRequest("k", ("trace-mmap",), 1, 0, actors=2, load="marker",
                                      stop_at_new=stop_at_new), Path("/nonexistent"),
                  say=lambda s: None)
    f = _race()
    assert f.concurrent
    boots: list[int] = []
    asked: list[list[str]] = []
    quiet = {"failure": None, "kmsg": []}
    warned = {"failure": {"check": "splat:WARNING", "got": "a splat"},
              "kmsg": [WARN_AT[0].format(8014), WARN_AT[1]]}
    # guest 1: nothing in its replays; guest 2: the third replay warns; guest 3: nothing
    answers = iter([[quiet] * 3, [quiet, quiet, warned], [quiet] * 3])

    def probe(args: list[str], timeout: float) -> dict:
        asked.append(args)
        return {"replays": next(answers)}

    monkeypatch.setattr(run, "_probe", probe)
    monkeypatch.setattr(run, "fresh_guest", lambda: boots.append(1))
    from harness.explore import session
    monkeypatch.setattr(session, "RACE_CONFIRM_S", 0.0)     # one probe call a guest
    run.confirm(f)
    assert len(boots) == guests == f.confirm_tries and f.confirm_hits == hits
    assert all(a[0] == "replay" and a[-2:] == ["--times", str(CONFIRM_TIMES)] for a in asked)
    assert f.confirmed is True
    assert f.confirm_got.startswith(f"1 of {guests} fresh guests, {CONFIRM_TIMES * guests} "
                                    "replays")
    from harness.explore.formats import failure_outcome
    outcome, why = failure_outcome(f)
    assert outcome == "failed" and f"(1 of {guests} fresh guests" in why


def test_a_race_no_fresh_guest_showed_again_is_reported_with_its_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace
    from harness.explore.session import Explore
    lab: Any = SimpleNamespace(kernel=lambda name: SimpleNamespace(name=name))
    run = Explore(lab, ExploreRequest("k", ("trace-mmap",), 1, 0, actors=2, confirm_guests=2),
                  Path("/nonexistent"), say=lambda s: None)
    f = _race()
    monkeypatch.setattr(run, "_probe", lambda a, t: {"replays": [{"failure": None}] * 3})
    monkeypatch.setattr(run, "fresh_guest", lambda: None)
    from harness.explore import session
    monkeypatch.setattr(session, "RACE_CONFIRM_S", 0.0)
    run.confirm(f)
    assert (f.confirmed, f.confirm_tries, f.confirm_hits) == (False, 2, 0)
    assert f.confirm_got == "0 of 2 fresh guests, 6 replays: no failure"


def test_a_rare_race_is_replayed_on_one_guest_until_it_shows_and_said_with_its_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Race mutant 066, round 4: its WARN came 5 times in 400 sequences and 3 replays a guest
    never showed it. A guest now replays CONFIRM_TIMES at a time until it shows (or
    RACE_CONFIRM_S is spent), and the count says how rare it was."""
    from types import SimpleNamespace
    from harness.explore import session
    lab: Any = SimpleNamespace(kernel=lambda name: SimpleNamespace(name=name))
    run = session.Explore(lab, ExploreRequest("k", ("trace-mmap",), 1, 0, actors=2,
                                              stop_at_new=True), Path("/nonexistent"),
                          say=lambda s: None)
    f = _race()
    quiet = {"failure": None, "kmsg": []}
    warned = {"failure": {"check": "splat:WARNING", "got": "a splat"},
              "kmsg": [WARN_AT[0].format(8014), WARN_AT[1]]}
    answers = iter([[quiet] * 3] * 4 + [[quiet, warned, quiet]])
    boots: list[int] = []
    monkeypatch.setattr(run, "_probe", lambda a, t: {"replays": next(answers)})
    monkeypatch.setattr(run, "fresh_guest", lambda: boots.append(1))
    monkeypatch.setattr(session, "RACE_CONFIRM_S", 3600.0)
    run.confirm(f)
    assert (f.confirmed, f.confirm_tries, f.confirm_hits, len(boots)) == (True, 1, 1, 1)
    assert f.confirm_got.startswith("1 of 1 fresh guests, 15 replays: ")


def test_a_path_that_goes_away_between_slices_stops_with_its_reason() -> None:
    one = {"next": 3, "sequences": 3, "steps": 30, "seconds": 0.2, "failures": []}
    run, calls = _explore([one, {"path": "pinning", "skip": "the test PMU is gone"}])
    res = PathResult("pinning")
    run.run_path("pinning", res, known_issues.load())
    assert res.sequences == 3 and res.skipped is None
    assert res.stopped == "the test PMU is gone (after 3 sequences)"
    assert "  stopped before its budget: the test PMU is gone (after 3 sequences)" in \
        report.lines([res])
    assert len(calls) == 3


def test_a_probe_stuck_in_the_kernel_is_a_hang_of_the_marked_sequence() -> None:
    from harness.errors import ProbeTimeout

    class Vm:
        console_text = staticmethod(lambda: "ringlab-explore: pinning seed 1 sequence 7\n")

    class G:
        vm = Vm()
        health = staticmethod(lambda: None)
        kmsg = staticmethod(lambda: [])
        stop = staticmethod(lambda: None)
    run, _ = _explore([])
    run.guest = G()
    res = PathResult("pinning")
    err = ProbeTimeout("probe_explore", "no result within its timeout; waiting: python3 9 D "
                       "in exit_mmap\n  python3 9 (D, wchan exit_mmap): exit_mmap <- mmput",
                       stuck=[{"comm": "python3", "tid": 9, "state": "D", "wchan": "exit_mmap",
                               "stack": ["exit_mmap", "mmput"]}])
    assert run._crashed("pinning", res, 0, err) == 8
    f = res.failures["pinning:hang"]
    assert (f.check, f.sequence) == ("hang", 7)
    assert any("exit_mmap" in line for line in f.kmsg)
    # a probe that timed out in user space is the lab's own error, never the kernel's
    run.guest = G()
    with pytest.raises(ProbeTimeout):
        run._crashed("pinning", PathResult("pinning"), 0,
                     ProbeTimeout("probe_explore", "no result", stuck=[
                         {"comm": "python3", "tid": 9, "state": "R", "wchan": "0",
                          "stack": []}]))


def test_the_usual_reports_say_new_known_and_flaky_apart(tmp_path: Path) -> None:
    import junitparser
    from harness.explore import formats
    known = failure()
    known.known_issue, known.confirmed = "perf-mmap-second-mapping-charged", True
    new = failure(check="vm_pin_kb", traits=())
    new.confirmed = True
    flaky = failure(check="result:mmap", traits=())
    flaky.confirmed, flaky.confirm_got = False, "no failure"
    res = PathResult("pinning", sequences=10, steps=100, seconds=2.0,
                     failures={f.slot: f for f in (known, new, flaky)})
    quiet = PathResult("trace-mmap", skipped="no trace_pipe_raw mmap on this kernel")
    formats.write(tmp_path, "sid-cloud", "7.2.13", [res, quiet], started=1.0)
    cases = {c.name: c for suite in junitparser.JUnitXml.fromfile(str(tmp_path / "junit.xml"))
             for c in suite}
    assert isinstance(cases["pinning-allowance--perf-mmap-second-mapping-charged"].result[0],
                      junitparser.Skipped)
    assert "NEW" in cases["pinning-vm-pin-kb"].result[0].message
    assert "NOT confirmed" in cases["pinning-result-mmap"].result[0].message
    assert isinstance(cases["explore"].result[0], (junitparser.Failure, junitparser.Skipped))
    kc = json.loads((tmp_path / "kcidb.json").read_text())
    assert sorted(t["status"] for t in kc["tests"]) == ["FAIL"] * 4 + ["SKIP"]
    assert "NEW: pinning: check vm_pin_kb" in (tmp_path / "report.html").read_text()


def test_two_actors_failure_gets_threaded_reproducers(tmp_path: Path) -> None:
    steps = [dict(s, actor=0) for s in DOUBLE_CHARGE[:2]] + \
        [{"id": 1000, "op": "open", "args": ["dummy"], "actor": 1},
         {"id": 1001, "op": "mmap", "args": ["@1000", 3, "rw", "shared"], "actor": 1}]
    f = failure(steps=steps)
    written = reproducer.write(tmp_path, f, report.title(f))
    assert [p.name for p in written] == ["repro.py", "repro.c"]
    text = written[0].read_text()
    assert "def actor0():" in text and "def actor1():" in text and "t.start()" in text
    assert "step(" not in text.split("def actor0")[1].split("threads =")[0], \
        "no step is judged: the end state is"
    subprocess.run([sys.executable, "-m", "py_compile", str(written[0])], check=True)
    c = written[1].read_text().split("#endif /* RINGLAB_ACTORS_H */")[1]
    assert "static void *actor0(" in c and "static void *actor1(" in c and "\tstep(" not in c
    if shutil.which("gcc") is None:
        pytest.skip("no gcc on this host")
    r = subprocess.run(["gcc", "-Wall", "-Werror", "-pthread", "-o", str(tmp_path / "repro"),
                        str(written[1])], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_actors_run_as_processes_get_a_reproducer_that_forks_them(tmp_path: Path) -> None:
    steps = [dict(s, actor=0) for s in DOUBLE_CHARGE[:2]] + \
        [{"id": 1000, "op": "open", "args": ["dummy"], "actor": 1}]
    f = failure(steps=steps)
    f.setup = dict(f.setup, actors_as="process")
    text = reproducer.python_script(f, report.title(f))
    assert "os.fork()" in text.split("def actor1")[1] and "threading.Thread(target=a)" \
        not in text
    py = tmp_path / "repro.py"
    py.write_text(text)
    subprocess.run([sys.executable, "-m", "py_compile", str(py)], check=True)


def test_processes_need_actors_and_reach_the_probe() -> None:
    with pytest.raises(LabError, match="--processes makes the actors processes"):
        verb.request(args("--processes"), "k")
    r = verb.request(args("--actors", "2", "--processes"), "k")
    assert r.processes and r.actors == 2


def test_what_each_operation_was_answered_is_summed_over_slices_and_said() -> None:
    res = PathResult("pinning")
    res.add_answers({"mmap": {"ok": 3, "EINVAL": 1}, "poll": {"none": 2}})
    res.add_answers({"mmap": {"ok": 2}, "fork": {"ok": 1}})
    assert res.answers == {"mmap": {"ok": 5, "EINVAL": 1}, "poll": {"none": 2},
                           "fork": {"ok": 1}}
    assert report.answers_text(res.answers) == \
        "mmap 6 (ok 5, EINVAL 1); poll 2 (none 2); fork 1 (ok 1)"


WARN = ["------------[ cut here ]------------",
        "WARNING: CPU: 0 PID: 9 at kernel/trace/ring_buffer.c:7301 "
        "ring_buffer_map_get_reader+0x1/0x2", "Reader on commit with 679 missed events"]


@pytest.mark.parametrize("as_run_kmsg, confirmed", [(WARN, True), ([], False)])
def test_a_splat_the_shrink_lost_is_confirmed_by_the_sequence_as_run(
        as_run_kmsg: list[str], confirmed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # A WARN_ONCE fires once a boot: the shrink (in the same guest, judged by the check)
    # keeps `result:read` but cannot keep the splat; the unshrunk sequence must show it.
    from types import SimpleNamespace
    from harness.explore.session import Explore
    lab: Any = SimpleNamespace(kernel=lambda name: SimpleNamespace(name=name))
    run = Explore(lab, ExploreRequest("k", ("trace-mmap",), 1, 52), Path("/nonexistent"),
                  say=lambda s: None)
    title = report_title(WARN)
    f = failure("trace-mmap", "result:read", splat=title)
    f.sequence = 17
    as_run_steps = [dict(s, result="ok") for s in MOVED] + \
        [{"id": 3, "op": "get-reader", "args": ["@0"], "result": "ok"}]
    asked: list[list[str]] = []

    def probe(args: list[str], timeout: float) -> dict:
        asked.append(args)
        read_failed = {"check": "result:read", "got": "0 bytes"}
        if args[0] == "replay":
            return {"replays": [{"failure": read_failed, "kmsg": []}]}
        return {"failures": [{"failure": read_failed, "kmsg": as_run_kmsg,
                              "steps": as_run_steps}]}

    monkeypatch.setattr(run, "_probe", probe)
    monkeypatch.setattr(run, "fresh_guest", lambda: None)
    run.confirm(f)
    assert [a[0] for a in asked] == ["replay", "run"]
    assert asked[1][asked[1].index("--first") + 1] == "17" and "--shrink" in asked[1]
    assert f.confirmed is confirmed
    if confirmed:
        assert (f.confirm_got, f.shrunk, len(f.steps)) == (title, False, 4)
        assert all("result" not in s for s in f.steps)
    else:
        assert f.confirm_got == "0 bytes; the sequence as run: no splat"
        assert f.steps == MOVED and f.shrunk


def report_title(lines: list[str]) -> str:
    from harness.kernellog import splats
    (found, *_) = splats.find(lines)
    return found.title


def test_each_path_takes_the_loads_that_go_with_it_and_a_bad_one_is_named() -> None:
    from harness.explore import session
    assert session.loads_for("marker@0,samples,resize", "trace-mmap") == "marker@0,resize"
    assert session.loads_for("marker@0,samples,resize", "perf-ring") == "samples"
    assert session.loads_for("", "perf-ring") == ""
    with pytest.raises(LabError, match="'nope' is not one of"):
        session.check_loads("marker,nope")
    assert session.guest_cpus(ExploreRequest(None, (), 1, 0)) is None
    assert session.guest_cpus(ExploreRequest(None, (), 1, 0, load="marker")) == 2
    assert session.guest_cpus(ExploreRequest(None, (), 1, 0, actors=3)) == 2


def test_a_path_run_beside_loads_says_their_throughput() -> None:
    res = PathResult("trace-mmap", sequences=3, steps=30, seconds=10.0)
    res.add_load({"marker@1": {"rounds": 800, "ok": 797}})
    res.add_load({"marker@1": {"rounds": 200, "ok": 200}})
    text = "\n".join(report.lines([res]))
    assert "load beside it: marker@1 100 rounds/s (3 refused)" in text


def test_a_load_that_died_in_two_slices_is_counted_and_says_its_first_reason() -> None:
    """A dead load's counts carry its reason (a string): slices add up their numbers and
    keep the first reason (races round 5: the aux load's reason stopped ./lab mutate)."""
    res = PathResult("perf-ring", sequences=2, steps=20, seconds=10.0)
    res.add_load({"aux@1": {"rounds": 0, "ok": 0, "died": 1, "error": "OSError: no PMU"}})
    res.add_load({"aux@1": {"rounds": 0, "ok": 0, "died": 1, "error": "OSError: other"}})
    assert res.load["aux@1"] == {"rounds": 0, "ok": 0, "died": 2, "error": "OSError: no PMU"}
    assert "aux@1 0 rounds/s [LOAD DIED in 2 sequence(s): OSError: no PMU]" in \
        "\n".join(report.lines([res]))


def test_a_shrunk_race_keeps_the_smaller_schedule_it_was_shrunk_to() -> None:
    """The guest's race shrink drops loads and actors: the failure's setup (what its
    replays and reproducers run) is the smaller one, and the shrunk steps keep their actors."""
    from harness.explore.session import _failure
    steps = [{"id": 2, "op": "open", "args": [0], "actor": 0},
             {"id": 1003, "op": "mmap", "args": ["@2", "all", "r", "shared"], "actor": 1}]
    rec = {"sequence": 46, "setup": {"buffer_kb": 8, "load": [["marker", 1], ["resize", 1]]},
           "shrunk_setup": {"buffer_kb": 8, "load": [["resize", 1]]}, "shrunk": steps,
           "steps": steps + [{"id": 3, "op": "close", "args": ["@2"], "actor": 0,
                              "result": "ok"}],
           "env": {}, "traits": [], "kmsg": [],
           "failure": {"check": "state", "at": "end", "expected": 1, "got": 2}}
    f = _failure("trace-mmap", 0, rec)
    assert f.setup == {"buffer_kb": 8, "load": [["resize", 1]]} and f.steps == steps
    assert f.shrunk and f.concurrent


TWO_SPLATS = Path(__file__).parents[1] / "data" / "console-two-splats-063-7.2-race.log"


def _two_splat_record() -> dict:
    return {"failure": {"check": "splat:WARNING", "expected": "no splat", "got": "x",
                        "at": "kernel log"},
            "steps": [], "setup": {}, "sequence": 3,
            "kmsg": TWO_SPLATS.read_text().splitlines()}


def test_each_splat_of_a_sequence_is_a_failure_of_its_own() -> None:
    """Race mutant 063's run: the unmutated kernel's put_snapshot_map WARN came first in the
    log and the failure was judged by it alone (in the baseline: no kill); the mutant's
    rb_advance_reader WARN after it must be a failure too."""
    from harness.explore.session import _failures
    got = _failures("trace-mmap", 1, _two_splat_record())
    assert [f.splat for f in got] == [
        "WARNING at kernel/trace/trace_snapshot.c:831 put_snapshot_map",
        "WARNING at kernel/trace/ring_buffer.c:6067 rb_advance_reader"]
    assert {f.check for f in got} == {"splat"} and got[0].slot != got[1].slot
    one = dict(_two_splat_record(), kmsg=[])
    assert len(_failures("trace-mmap", 1, one)) == 1


def test_a_second_splat_keeps_the_sequence_as_run_and_its_traits() -> None:
    """The shrink is the first splat's: a second splat of the same log goes with the steps
    as run and the traits of everything they and the loads did (races round 5: a moved
    mapping's put_snapshot_map WARN took an nr_dirty_pages WARN's shrunk steps, which had no
    move, and its known issue, bound to the move, could not explain it)."""
    from harness.explore.session import _failures
    run = [{"id": 1, "op": "open", "args": {}, "actor": 0, "result": "ok"},
           {"id": 2, "op": "move", "args": {}, "actor": 1, "result": "ok"}]
    rec = dict(_two_splat_record(), steps=run, shrunk=[{"id": 1, "op": "open", "args": {}}],
               shrunk_setup={"load": [["subbuf", 1]]}, setup={"load": [["subbuf", 1],
                                                                      ["mapper", 0]]},
               traits=["subbuf-changed-with-events"],
               traits_as_run=["moved", "subbuf-changed-with-events"])
    first, second = _failures("trace-mmap", 1, rec)
    assert (len(first.steps), first.traits, first.shrunk) == \
        (1, ["subbuf-changed-with-events"], True)
    assert second.steps == [{k: v for k, v in s.items() if k != "result"} for s in run]
    assert second.traits == ["moved", "subbuf-changed-with-events"] and not second.shrunk
    assert second.setup == rec["setup"]


def test_a_crashs_splat_shown_by_a_living_replay_confirms_it() -> None:
    """063's WARN flood hung one guest (a crash with the WARN as its splat); a replay whose
    guest lived but showed the same WARN is the same bug. A splat failure still needs its
    check and its own splat."""
    from harness.explore.session import Explore
    crash = Failure(path="trace-mmap", check="crash", expected="the guest lives", got="x",
                    at="guest", seed=1, sequence=14, setup={}, env={}, steps=[], shrunk=False,
                    traits=[],
                    splat="WARNING at kernel/trace/ring_buffer.c:6067 rb_advance_reader")
    replay = _two_splat_record()
    assert Explore._same(crash, replay)
    other = dict(replay, kmsg=replay["kmsg"][:43])      # the put_snapshot_map WARN only
    assert not Explore._same(crash, other)
    warn = Failure(path="trace-mmap", check="splat", expected="no splat", got="x",
                   at="kernel log", seed=1, sequence=3, setup={}, env={}, steps=[],
                   shrunk=True, traits=[], splat=crash.splat)
    assert Explore._same(warn, replay) and not Explore._same(warn, other)
    assert not Explore._same(warn, dict(replay, failure={"check": "result:read"}))


def test_a_probe_that_timed_out_after_a_splat_is_the_kernels_hang() -> None:
    """Race mutant 063: a WARN flood, GET_READER spinning in the kernel in R state (no D
    thread): the probe's timeout after the sequence's splat is the kernel's hang, not the
    lab's error that ended the mutant's explore as NOT BOOTED."""
    from harness.errors import ProbeTimeout
    warn = TWO_SPLATS.read_text().splitlines()[43:]     # the rb_advance_reader WARN
    mark = "ringlab-explore: trace-mmap seed 1 sequence 14"

    class Vm:
        console_text = staticmethod(lambda: mark + "\n")

    class G:
        vm = Vm()
        health = staticmethod(lambda: None)
        kmsg = staticmethod(lambda: [mark, *warn])
        stop = staticmethod(lambda: None)
    running = [{"comm": "python3", "tid": 9, "state": "R", "wchan": "0", "stack": []}]
    run, _ = _explore([])
    run.guest = G()
    res = PathResult("trace-mmap")
    assert run._crashed("trace-mmap", res, 0, ProbeTimeout(
        "probe_explore", "no result within its timeout", stuck=running)) == 15
    [f] = res.failures.values()
    assert (f.check, f.sequence) == ("hang", 14)
    assert f.splat == "WARNING at kernel/trace/ring_buffer.c:6067 rb_advance_reader"
    # the same timeout with the splat before the sequence's mark stays the lab's own error
    G.kmsg = staticmethod(lambda: [*warn, mark])
    run.guest = G()
    with pytest.raises(ProbeTimeout):
        run._crashed("trace-mmap", PathResult("trace-mmap"), 0, ProbeTimeout(
            "probe_explore", "no result", stuck=running))


def test_a_guest_too_stuck_to_give_its_kernel_log_is_judged_on_its_console() -> None:
    """Race mutant 063, round 4: 5318 WARNs in 3 s; the probe timed out and the read of the
    kernel log that was to tell the kernel's hang from the lab's raised GuestHang itself,
    ending the explore as NOT BOOTED. The console holds the same mark and WARN."""
    from harness.errors import GuestHang, ProbeTimeout
    warn = TWO_SPLATS.read_text().splitlines()[43:]
    mark = "ringlab-explore: trace-mmap seed 1 sequence 0"

    class Vm:
        console_text = staticmethod(lambda: "\n".join([mark, *warn]) + "\n")

    def stuck() -> list[str]:
        raise GuestHang("the guest's probe runner did not answer in time")

    class G:
        vm = Vm()
        health = staticmethod(lambda: None)
        kmsg = staticmethod(stuck)
        stop = staticmethod(lambda: None)
    run, _ = _explore([])
    run.guest = G()
    res = PathResult("trace-mmap")
    assert run._crashed("trace-mmap", res, 0, ProbeTimeout(
        "probe_explore", "no result within its timeout", stuck=[])) == 1
    f = next(iter(res.failures.values()))
    assert (f.check, f.sequence) == ("hang", 0)
    assert f.splat == "WARNING at kernel/trace/ring_buffer.c:6067 rb_advance_reader"


def test_a_crash_is_a_failure_per_distinct_splat_of_its_sequence() -> None:
    """Race mutant 063's third run: the guest died after the known nr_dirty_pages WARN and
    the mutant's own splat; the crash took the first title only and hid the mutant's."""
    lines = TWO_SPLATS.read_text().splitlines()
    mark = "ringlab-explore: trace-mmap seed 1 sequence 14"

    class Vm:
        console_text = staticmethod(lambda: "\n".join([mark, *lines]))

    class G:
        vm = Vm()
        health = staticmethod(lambda: "the guest is gone")
        kmsg = staticmethod(lambda: [])
        stop = staticmethod(lambda: None)
    run, _ = _explore([])
    run.guest = G()
    res = PathResult("trace-mmap")
    assert run._crashed("trace-mmap", res, 0, LabError("the guest is gone")) == 15
    assert sorted(f.splat or "" for f in res.failures.values()) == [
        "WARNING at kernel/trace/ring_buffer.c:6067 rb_advance_reader",
        "WARNING at kernel/trace/trace_snapshot.c:831 put_snapshot_map"]
    assert {f.check for f in res.failures.values()} == {"crash"}
