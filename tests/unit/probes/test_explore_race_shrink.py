"""A race's shrink in the guest (probes/probe_explore.py shrink_race): the schedule (loads,
actors) and the steps made smaller where one of RACE_TRIES replays still fails the same way."""
from __future__ import annotations

import itertools

import pytest

import probe_explore


def _steps() -> list[dict]:
    return [{"id": i + 1000 * a, "op": "x", "args": {}, "actor": a}
            for a in (0, 1) for i in range(5)]


def _explorer(monkeypatch: pytest.MonkeyPatch, needs: set[int], load: str,
              every: int = 1) -> tuple[probe_explore.Explorer, list[int]]:
    """An explorer whose 'kernel' fails when the steps hold `needs` and the load `load` runs,
    one replay in `every` (a race: some schedules only)."""
    e = probe_explore.Explorer.__new__(probe_explore.Explorer)
    e.as_run = {}
    replays: list[int] = []
    tick = itertools.count()

    def fails_same(setup: dict, steps: list[dict], check: str, known: object = None) -> bool:
        replays.append(1)
        hit = next(tick) % every == every - 1
        return hit and needs <= {s["id"] for s in steps} and \
            any(x[0] == load for x in setup.get("load", []))
    monkeypatch.setattr(e, "fails_same", fails_same)
    return e, replays


def test_a_race_keeps_the_load_and_the_steps_it_needs_and_drops_the_rest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    e, replays = _explorer(monkeypatch, {2, 1003}, "resize", every=2)
    setup = {"buffer_kb": 8, "load": [["marker", 1], ["resize", 1], ["events", 1]]}
    small_setup, small, needed = e.shrink_race(setup, _steps(), "splat:x", None,
                                               float("inf"))
    assert small_setup == {"buffer_kb": 8, "load": [["resize", 1]]}
    assert needed == ["resize"], "seen to need it: without it, no replay failed"
    assert {s["id"] for s in small} == {2, 1003}
    assert all(s["actor"] == s["id"] // 1000 for s in small), "each step keeps its actor"
    assert len(replays) > 0


def test_a_race_of_one_actor_with_a_load_drops_the_other_actor_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    e, _ = _explorer(monkeypatch, {1001}, "marker")
    setup = {"load": [["marker", 1]]}
    small_setup, small, _ = e.shrink_race(setup, _steps(), "state", None, float("inf"))
    assert small_setup == setup, "the one load it needs stays"
    assert [s["id"] for s in small] == [1001]


def test_a_race_past_its_deadline_is_kept_as_it_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    e, replays = _explorer(monkeypatch, {2}, "marker")
    setup = {"load": [["marker", 1]]}
    assert e.shrink_race(setup, _steps(), "state", None, 0.0) == (setup, _steps(), [])
    assert replays == []


def test_every_sequence_starts_with_the_warn_once_flags_rearmed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    """A WARN_ONCE that fired in an earlier sequence would hide the same bug in every later
    one, and a replay in the same guest could never show it again."""
    from pathlib import Path
    knob = Path(str(tmp_path)) / "clear_warn_once"
    monkeypatch.setattr(probe_explore, "CLEAR_WARN_ONCE", str(knob))
    probe_explore.clear_warn_once()
    assert knob.read_text() == "1"
    monkeypatch.setattr(probe_explore, "CLEAR_WARN_ONCE", str(knob / "none"))
    probe_explore.clear_warn_once()     # no debugfs: nothing to do, no error


def test_a_load_the_race_needs_lends_its_traits_to_the_failure(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The subbuf load flips the sub-buffer size: a race that needs it did what the known
    issue of that flip names (subbuf-changed-with-events), though no step of it did."""
    e = probe_explore.Explorer.__new__(probe_explore.Explorer)
    e.path, e.actors, e.excuses, e.as_run = "trace-mmap", 2, [], {}
    e.world_cls = probe_explore.world_of("trace-mmap")
    setup = {"buffer_kb": 8, "subbuf_kb": 4, "load": [["marker", 1], ["subbuf", 1]]}
    monkeypatch.setattr(e, "shrink_race", lambda *a: (setup, [], ["subbuf"]))
    out = {"steps": [], "env": {"ncpus": 1, "instance": "x", "has_snapshot": True,
                                "has_subbuf": True},
           "failure": {"check": "splat:WARNING", "at": "kernel log", "expected": "no splat",
                       "got": "x"}}
    record = e._kept(7, setup, out, False, 10.0)
    assert record["traits"] == ["subbuf-changed-with-events"]
    # the shrink's deadline came before it tried the subbuf load: it ran beside the race,
    # and may be what it needs (races round 5's nr_dirty_pages WARN from kcompactd)
    monkeypatch.setattr(e, "shrink_race", lambda *a: (setup, [], []))
    assert e._kept(7, setup, out, False, 10.0)["traits"] == ["subbuf-changed-with-events"]
    # dropped, the race still failed: not its flip
    marker_only = {"buffer_kb": 8, "subbuf_kb": 4, "load": [["marker", 1]]}
    monkeypatch.setattr(e, "shrink_race", lambda *a: (marker_only, [], ["marker"]))
    record = e._kept(7, setup, out, False, 10.0)
    assert record["traits"] == []
    assert record["traits_as_run"] == ["subbuf-changed-with-events"], \
        "as run, the subbuf load was there: a second splat of the log goes with that"


def test_a_splat_a_shrinks_replay_showed_beside_its_own_is_a_failure_of_its_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Race mutant 065, round 4: its `rb_advance_reader / rb_update_meta_page` race came up
    once, in a replay of another failure's shrink, and was dropped with that replay."""
    e = probe_explore.Explorer.__new__(probe_explore.Explorer)
    e.splats_had, e.in_replays, e.excuses, e.actors, e.path = set(), [], [], 2, "trace-mmap"
    e.as_run = {}
    own = "WARNING: CPU: 0 PID: 7 at kernel/trace/ring_buffer.c:842 ring_buffer_nr_dirty_pages+0x1/0x2"
    new = "BUG: KCSAN: data-race in rb_advance_reader / rb_update_meta_page"
    e.splats_had.add(probe_explore.splat_key([own]))
    runs = iter([[own, "x", new], [own], [new]])

    def one(setup: dict, steps: list[dict] | None = None, **kw: object) -> dict:
        kmsg = next(runs)
        return {"steps": steps or [], "env": {}, "kmsg": kmsg,
                "failure": probe_explore.failure(probe_explore.splat_key(kmsg), "kernel log",
                                                 "no splat", kmsg[0])}
    monkeypatch.setattr(e, "one", one)
    monkeypatch.setattr(e, "_kept", lambda k, setup, out, known, shrink_s: {
        "sequence": k, "failure": out["failure"], "shrink_s": shrink_s})
    setup = {"load": [["reader", 1]]}
    check = probe_explore.splat_key([own])
    assert [e.fails_same(setup, _steps(), check) for _ in range(3)] == [True, True, False]
    seen: dict[str, int] = {check: 1}
    [kept] = e.kept_in_replays(4, seen)
    assert kept["failure"]["check"] == probe_explore.splat_key([new])
    assert kept["failure"]["got"] == new and kept["failure"]["at"] == "kernel log, in a replay"
    assert (kept["sequence"], kept["shrink_s"]) == (4, 0.0)
    assert e.in_replays == [] and e.kept_in_replays(5, seen) == [], "each splat once"


def _moved_after_a_refused_arm() -> list[dict]:
    """A snapshot trigger refused as run, then the meta page mapped and moved: as run."""
    return [{"id": 0, "op": "trigger", "args": {"action": "arm"}, "result": "EBUSY"},
            {"id": 1, "op": "open", "args": {"cpu": 0, "mode": "r"}, "result": "ok"},
            {"id": 2, "op": "mmap", "args": {"fd": "@1", "prot": "r", "share": "shared",
                                             "what": "meta"}, "result": "ok"},
            {"id": 3, "op": "mremap", "args": {"how": "move", "vma": "@2"}, "result": "ok"}]


def test_a_race_is_named_by_what_its_steps_did_as_they_ran() -> None:
    """Races round 6: actor 0 armed a snapshot trigger (refused as run: another actor's
    mapping was live), then mapped and moved the meta page. The model's own answers refuse
    the mmap() after an arm, so `moved` went unnamed and the moved mapping's
    put_snapshot_map WARN (trace-mmap-dofork-mapped-count) stood unbound. One actor's steps
    keep the model's answers only: a kernel's wrong answer lends no trait."""
    world = probe_explore.world_of("trace-mmap")
    env = {"ncpus": 2, "instance": "x", "has_snapshot": True, "has_subbuf": True,
           "has_trigger": True, "buffer_kb": 128, "subbuf_kb": 4}
    steps = _moved_after_a_refused_arm()
    actor = [dict(s, actor=0) for s in steps]
    assert "moved" in probe_explore.traits(world, "trace-mmap", env, actor)
    assert "moved" not in probe_explore.traits(world, "trace-mmap", env, steps), \
        "one actor alone: the model's answers"
    bare = [{k: v for k, v in s.items() if k != "result"} for s in actor]
    assert "moved" not in probe_explore.traits(world, "trace-mmap", env, bare)


def test_a_refused_mapping_the_kernel_accepted_is_named_as_run_and_nothing_else_is() -> None:
    """trace-mmap-first-map-error-dropped's symptom: a MAP_PRIVATE mapping (refused whatever
    came before) answered "ok". One actor's steps as run lend that trait only; actors' steps
    never do (race mutant 067's WARN, round 6, was excused by a refused first map the kernel
    had refused, then by GET_READERs and mmaps the actor's own model refused and the other
    actor's mapping let through)."""
    world = probe_explore.world_of("trace-mmap")
    env = {"ncpus": 2, "instance": "x", "has_snapshot": True, "has_subbuf": True,
           "has_trigger": True, "buffer_kb": 128, "subbuf_kb": 4}
    private = {"id": 1, "op": "mmap", "args": {"fd": "@0", "prot": "r", "share": "private",
                                               "what": "all"}}
    opened = {"id": 0, "op": "open", "args": {"cpu": 0, "mode": "r"}, "result": "ok"}
    accepted = probe_explore.traits(world, "trace-mmap", env, [opened, dict(private, result="ok")])
    assert "refused-mmap-accepted" in accepted
    refused = probe_explore.traits(world, "trace-mmap", env, [
        dict(opened, actor=0), dict(private, result="EINVAL", actor=0)])
    assert "refused-mmap-accepted" not in refused and "refused-first-map" in refused
    # an actor's "ok" where its own model refuses may be the other actor's doing: never named
    raced = probe_explore.traits(world, "trace-mmap", env, [
        dict(opened, actor=0), dict(private, result="ok", actor=0)])
    assert not {t for t in raced if t.endswith("-accepted")}


def test_a_race_kept_unshrunk_takes_its_traits_from_its_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A splat kept from another failure's replay is not shrunk (races round 6: the moved
    mapping's tracing_buffers_mmap_close WARN, 'in a replay', stood unbound): its traits are
    those of the run it came from, results and all."""
    e = probe_explore.Explorer.__new__(probe_explore.Explorer)
    e.path, e.actors, e.excuses, e.as_run = "trace-mmap", 2, [], {}
    e.world_cls = probe_explore.world_of("trace-mmap")
    setup = {"buffer_kb": 128, "subbuf_kb": 4, "load": [["snapshot", 1]]}
    ran = [dict(s, actor=0) for s in _moved_after_a_refused_arm()]
    bare = [{k: v for k, v in s.items() if k != "result"} for s in ran]
    monkeypatch.setattr(e, "shrink_race", lambda *a: (setup, bare, []))
    out = {"steps": ran, "env": {"ncpus": 2, "instance": "x", "has_snapshot": True,
                                 "has_subbuf": True, "has_trigger": True},
           "failure": {"check": "splat:WARNING", "at": "kernel log, in a replay",
                       "expected": "no splat", "got": "x"}}
    assert "moved" in e._kept(7, setup, out, False, 0.0)["traits"]


def test_a_races_splat_is_its_failure_before_a_failed_end_state() -> None:
    """Race mutant 070, round 6: its KCSAN report rode on a known issue's allowance failure
    at the end state (judged after every step), was shrunk as that failure, lost the loads
    it needs, and never replayed. With actors or loads, the splat is the failure; one
    actor's failed step stays the failure, the splat kept beside it."""
    splat = ["BUG: KCSAN: data-race in perf_output_begin_forward+0x23f/0x710"]
    end = {"steps": [], "failure": probe_explore.failure("allowance", "end", "ok", "EPERM")}
    out = probe_explore.with_splat(dict(end), splat, concurrent=True)
    assert out["failure"]["check"] == probe_explore.splat_key(splat) and out["kmsg"] == splat
    alone = probe_explore.with_splat(dict(end), splat, concurrent=False)
    assert alone["failure"]["check"] == "allowance" and alone["kmsg"] == splat
    step = {"steps": [], "failure": probe_explore.failure("result:mmap", "step 3", "EINVAL", "ok")}
    assert probe_explore.with_splat(step, splat, concurrent=True)["failure"]["check"] == \
        "result:mmap"
    clean = probe_explore.with_splat({"steps": [], "failure": None}, [], concurrent=True)
    assert clean["failure"] is None and "kmsg" not in clean
