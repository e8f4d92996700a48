"""Loads beside the explorer's actors (probes/explore_load.py, issue 43): named per path, run
in processes of their own while the actors run, stopped before the end state is judged."""
from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

import explore_load
import probe_explore


@pytest.mark.parametrize("spec,want", [
    ("", []),
    ("marker", [("marker", 1)]),
    ("marker@0, resize", [("marker", 0), ("resize", 1)]),
])
def test_a_load_spec_names_loads_and_their_cpus(spec: str, want: list) -> None:
    assert explore_load.parse(spec, "trace-mmap", 2) == want


@pytest.mark.parametrize("spec,culprit", [
    ("nope", "load 'nope': not one of"),
    ("samples", "goes with perf-ring"),
    ("marker@2", "CPU 2 (the guest has 2)"),
])
def test_a_bad_load_spec_names_the_culprit(spec: str, culprit: str) -> None:
    with pytest.raises(ValueError, match=culprit.replace("(", r"\(").replace(")", r"\)")):
        explore_load.parse(spec, "trace-mmap", 2)


def test_every_load_says_which_paths_it_goes_with() -> None:
    paths = {"perf-ring", "perf-aux", "pinning", "trace-mmap"}
    for load in explore_load.LOADS.values():
        assert load.paths and set(load.paths) <= paths and load.doc, load.name


def _touching(monkeypatch: pytest.MonkeyPatch, where: Path) -> None:
    """A load of the test's own: each round appends a byte to a file."""
    def start(env: dict) -> dict:
        return {"f": open(env["file"], "ab", buffering=0)}

    def one(env: dict, st: dict, n: int) -> bool:
        st["f"].write(b"x")
        return n % 2 == 0
    monkeypatch.setitem(explore_load.LOADS, "touch",
                        explore_load.Load("touch", ("trace-mmap",), "a byte a round", start, one))


def test_a_running_load_counts_its_rounds_and_is_gone_once_stopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _touching(monkeypatch, tmp_path)
    r = explore_load.Running([("touch", 0)], {"file": str(tmp_path / "f")})
    while not (tmp_path / "f").exists() or (tmp_path / "f").stat().st_size < 50:
        pass
    counts = r.stop()
    assert counts["touch@0"]["rounds"] >= 50
    assert counts["touch@0"]["ok"] == counts["touch@0"]["rounds"] // 2
    with pytest.raises(ChildProcessError):
        os.waitpid(r.pids[0], os.WNOHANG)           # reaped: nothing left behind
    size = (tmp_path / "f").stat().st_size
    time.sleep(0.05)
    assert (tmp_path / "f").stat().st_size == size  # and it writes no more


class _World:
    """Three actors' steps land here; the end state says whether a load still ran then."""
    ended_with: list[int] = []

    def __init__(self, path: str, setup: dict, uid: int) -> None:
        self.file = Path(setup["file"])

    @staticmethod
    def model(path: str, setup: dict) -> "_Model":
        return _Model()

    def do(self, step: dict) -> str:
        """A step waits (5 s at most) until the load made a round: they run at once."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (self.file.exists() and
                                                   self.file.stat().st_size > 0):
            time.sleep(0.001)
        return "ok"

    def release(self) -> None:
        pass

    def end(self, expected: dict) -> dict:
        size = self.file.stat().st_size
        time.sleep(0.02)    # a load still running would grow the file meanwhile
        return {"load stopped": self.file.stat().st_size == size}


class _Model:
    def choose(self, rng: random.Random, id_: int) -> dict | None:
        return {"op": "noop", "args": {}}

    def valid(self, step: dict) -> bool:
        return True

    def apply(self, step: dict, result: str) -> None:
        pass

    def release(self) -> None:
        pass

    def end(self) -> dict:
        return {"load stopped": True}


def test_actors_run_beside_their_loads_which_stop_before_the_end_is_judged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _touching(monkeypatch, tmp_path)
    setup = {"file": str(tmp_path / "f"), "load": [["touch", 0]]}
    rngs = [random.Random(i) for i in range(3)]
    out = probe_explore.run_actors(_World, "trace-mmap", setup, 0, None, rngs, 4, None, 3)
    assert out["failure"] is None, out
    assert sorted({s["actor"] for s in out["steps"]}) == [0, 1, 2]
    assert len(out["steps"]) == 12
    assert out["load"]["touch@0"]["rounds"] > 0


def test_a_replay_runs_as_many_actors_as_its_steps_name(tmp_path: Path) -> None:
    setup = {"file": str(tmp_path / "f")}
    (tmp_path / "f").write_bytes(b"x")   # no load here: steps need not wait for one
    steps = [{"id": i, "op": "noop", "args": {}, "actor": i % 3} for i in range(6)]
    out = probe_explore.run_actors(_World, "trace-mmap", setup, 0, steps, None, 4, None, 1)
    assert sorted({s["actor"] for s in out["steps"]}) == [0, 1, 2]
    assert "load" not in out or out["load"] == {}


def test_loads_stop_even_when_their_parent_dropped_root(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The perf worlds drop to the sequence's user after the loads started as root: a signal
    from the parent would be refused (EPERM) and the load would run on, holding the
    sequence's result pipe open (the explore hung). The parent closes a pipe instead."""
    _touching(monkeypatch, tmp_path)
    kills: list[int] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: kills.append(pid))  # would be EPERM
    r = explore_load.Running([("touch", 0)], {"file": str(tmp_path / "f")})
    while not (tmp_path / "f").exists() or (tmp_path / "f").stat().st_size < 5:
        pass
    assert r.stop()["touch@0"]["rounds"] >= 4 and kills == []


def test_the_detach_load_maps_its_event_and_leaves_no_child_behind() -> None:
    """068's recipes as a load: its child (mapping the event, asking SET_OUTPUT) goes with
    the load."""
    import perf_abi
    try:
        os.close(perf_abi.perf_event_open(perf_abi.attr(perf_abi.PERF_TYPE_SOFTWARE,
                                                        perf_abi.PERF_COUNT_SW_DUMMY)))
    except OSError as e:
        pytest.skip(f"this host refuses a dummy perf event: {e}")
    r = explore_load.Running([("detach", 0)], {})
    time.sleep(0.5)
    pid = r.pids[0]
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    counts = r.stop()
    assert counts["detach@0"]["rounds"] > 0
    assert counts["detach@0"]["ok"] == counts["detach@0"]["rounds"]
    assert len(children) == 1, "the mapping and SET_OUTPUT child"
    deadline = time.monotonic() + 5
    while Path(f"/proc/{children[0]}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{children[0]}/status").exists() or \
        "zombie" in Path(f"/proc/{children[0]}/status").read_text()


def test_the_snapshot_load_arms_and_frees_in_turn_and_leaves_it_freed(tmp_path: Path) -> None:
    """067's recipe as a load: `echo 1 > snapshot` then `echo 0`, and once stopped the
    snapshot freed (its file's last write a 0), so no snapshot buffer outlives the load."""
    written = tmp_path / "snapshot"
    written.write_bytes(b"")
    load = explore_load.LOADS["snapshot"]
    env = {"instance": str(tmp_path)}
    st = load.start(env)
    assert [load.round(env, st, n) for n in range(1, 5)] == [True] * 4
    load.finish(st)
    assert written.read_bytes() == b"01010"


def test_a_snapshot_load_without_the_file_dies_with_its_reason(tmp_path: Path) -> None:
    """No CONFIG_TRACER_SNAPSHOT: no snapshot file; the load dies saying so, counted apart."""
    r = explore_load.Running([("snapshot", 0)], {"instance": str(tmp_path)})
    counts = r.stop()["snapshot@0"]
    assert counts["died"] == 1 and "no snapshot file" in counts["error"], counts


def test_the_drainer_keeps_one_mapping_for_its_get_readers_and_maps_again_every_64(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GET_READERs on one mapping (its meta page mapped once), dropped and made again every
    DRAIN_ROUNDS rounds so the resize and sub-buffer loads beside it are not refused for
    good; a GET_READER the file refuses (here ENOTTY: a plain file) is a round not done."""
    import fcntl
    import probelib
    raw = tmp_path / "per_cpu" / "cpu0" / "trace_pipe_raw"
    raw.parent.mkdir(parents=True)
    raw.write_bytes(b"")
    maps: list[int] = []
    unmaps: list[int] = []
    monkeypatch.setattr(probelib.libc, "mmap", lambda *a: maps.append(1) or 4096 * len(maps))
    monkeypatch.setattr(probelib.libc, "munmap", lambda addr, size: unmaps.append(addr))
    asked: list[int] = []
    monkeypatch.setattr(fcntl, "ioctl", lambda fd, req: asked.append(req))
    load, env, st = explore_load.LOADS["drainer"], {"instance": str(tmp_path)}, {}
    n = explore_load.DRAIN_ROUNDS
    assert all(load.round(env, st, i) for i in range(1, 2 * n + 2))
    assert len(maps) == 3 and unmaps == [4096, 8192]
    assert set(asked) == {0x5220} and len(asked) == 2 * n + 1   # _IO('R', 0x20)
    monkeypatch.setattr(fcntl, "ioctl", lambda fd, req: (_ for _ in ()).throw(OSError(25, "")))
    assert load.round(env, st, 2 * n + 2) is False
    os.close(st["fd"])


class _WhereWorld(_World):
    """Each step answers the CPUs its thread may run on."""

    def do(self, step: dict) -> str:
        return ",".join(map(str, sorted(os.sched_getaffinity(0))))


def test_actor_i_runs_pinned_to_cpu_i(tmp_path: Path) -> None:
    """Two actors on two vCPUs: TCG interleaves them at any instruction, not only where the
    scheduler switches threads on one CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    (tmp_path / "f").write_bytes(b"x")
    steps = [{"id": 1000 * a, "op": "noop", "args": {}, "actor": a} for a in range(3)]
    out = probe_explore.run_actors(_WhereWorld, "trace-mmap", {"file": str(tmp_path / "f")},
                                   0, steps, None, 4, None, 1)
    assert {s["actor"]: s["result"] for s in out["steps"]} == {
        a: str(cpus[a % len(cpus)]) for a in range(3)}
    assert sorted(os.sched_getaffinity(0)) == cpus, "the caller's own CPUs are left alone"


def test_actors_as_processes_run_apart_and_their_steps_come_back(tmp_path: Path) -> None:
    """--processes: an mm per actor (one's mmap() does not wait on another's munmap() for
    mmap_lock); each actor's steps come back to the parent, which judges the end state."""
    cpus = sorted(os.sched_getaffinity(0))
    (tmp_path / "f").write_bytes(b"x")

    class PidWorld(_WhereWorld):
        def do(self, step: dict) -> str:
            return f"{os.getpid()}@{super().do(step)}"
    steps = [{"id": 1000 * a + n, "op": "noop", "args": {}, "actor": a}
             for a in range(2) for n in range(2)]
    setup = {"file": str(tmp_path / "f"), "actors_as": "process"}
    out = probe_explore.run_actors(PidWorld, "trace-mmap", setup, 0, steps, None, 4, None, 1)
    assert out["failure"] is None and len(out["steps"]) == 4, out
    pids = {s["actor"]: s["result"].split("@")[0] for s in out["steps"]}
    assert len(set(pids.values()) | {str(os.getpid())}) == 3, "a process per actor"
    assert {s["actor"]: s["result"].split("@")[1] for s in out["steps"]} == {
        a: str(cpus[a % len(cpus)]) for a in range(2)}


def test_an_actor_process_a_signal_kills_fails_its_sequence(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")

    class Crash(_World):
        def do(self, step: dict) -> str:
            if step.get("actor") == 1:   # SIGKILL: pytest's faulthandler dumps on SIGSEGV
                os.kill(os.getpid(), 9)
            return "ok"
    steps = [{"id": 1000 * a, "op": "noop", "args": {}, "actor": a} for a in range(2)]
    out = probe_explore.run_actors(Crash, "trace-mmap", {"file": str(tmp_path / "f"),
                                                         "actors_as": "process"},
                                   0, steps, None, 4, None, 1)
    assert out["failure"]["check"] == "signal:actor1" and out["failure"]["got"] == "SIGKILL"
    assert [s["actor"] for s in out["steps"]] == [0]


def test_the_world_takes_its_baselines_before_any_load_starts(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """The aux load holds an event of the test PMU, a module reference the perf worlds count
    from their start: taken with the load running, the end found one reference 'missing'
    (pinning:pmu_refs -1 on the unmutated race kernel, the lab's own error)."""
    _touching(monkeypatch, tmp_path)
    seen: list[bool] = []

    class Baseline(_World):
        def __init__(self, path: str, setup: dict, uid: int) -> None:
            super().__init__(path, setup, uid)
            seen.append(self.file.exists())
    setup = {"file": str(tmp_path / "f"), "load": [["touch", 0]]}
    out = probe_explore.run_actors(Baseline, "trace-mmap", setup, 0, None,
                                   [random.Random(0)], 1, None, 1)
    assert seen == [False], "no load had run when the world was made"
    assert out["load"]["touch@0"]["rounds"] > 0


def written(out: Path) -> bool:
    """Whether `out` is there, asked as root: a dropped user cannot look into pytest's 0700
    tmp_path (a -n 2 run failed the test that way)."""
    os.seteuid(0)
    try:
        return out.exists()
    finally:
        os.seteuid(65534)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop and regain it")
def test_loads_run_as_root_under_a_world_that_dropped_to_its_user(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def start(env: dict) -> dict:
        Path(env["file"]).write_text(str(os.geteuid()))
        return {}
    monkeypatch.setitem(explore_load.LOADS, "whoami", explore_load.Load(
        "whoami", ("trace-mmap",), "its euid", start, lambda env, st, n: True))
    out = tmp_path / "euid"
    pid = os.fork()
    if pid == 0:
        said = "no answer"
        try:
            os.setresuid(65534, 65534, 0)     # as the perf worlds drop: root kept saved
            r = explore_load.Running([("whoami", 0)], {"file": str(out)})
            deadline = time.monotonic() + 30
            while not written(out) and time.monotonic() < deadline:
                time.sleep(0.01)
            said = repr(r.stop())
        except BaseException as e:  # noqa: BLE001 - told to the parent below
            said = f"{type(e).__name__}: {e}"
        finally:
            os.setresuid(0, 0, 0)
            (tmp_path / "said").write_text(said)
            os._exit(0)
    os.waitpid(pid, 0)
    assert out.exists() and out.read_text() == "0", (tmp_path / "said").read_text()


def test_the_reader_load_reads_its_own_cpus_trace_pipe_raw(tmp_path: Path) -> None:
    """063-065's recipes as a load: read() of the trace_pipe_raw of the CPU it is pinned
    to; a round that took nothing (EAGAIN, or the end of this stand-in file) is not ok."""
    raw = tmp_path / "per_cpu" / "cpu0" / "trace_pipe_raw"
    raw.parent.mkdir(parents=True)
    raw.write_bytes(b"x" * (3 * os.sysconf("SC_PAGE_SIZE")))
    r = explore_load.Running([("reader", 0)], {"instance": str(tmp_path)})
    time.sleep(0.3)
    counts = r.stop()["reader@0"]
    assert counts["ok"] == 3 and counts["rounds"] > 3, counts


@pytest.mark.parametrize("path,inline", [("trace-mmap", True), ("perf-ring", False)])
def test_a_loads_python_form_is_written_only_for_the_paths_it_was_written_for(
        path: str, inline: bool) -> None:
    """`mapper` goes with trace-mmap and the perf paths, its repro.py lines with trace-mmap's
    CPU 0 buffer only: a perf reproducer names the load to run beside it instead."""
    from types import SimpleNamespace
    from harness.explore import reproducer
    f = SimpleNamespace(path=path, check="x", setup={"load": [["mapper", 1]]}, env={}, steps=[])
    text = "\n".join(reproducer._py_loads(f))
    assert ("trace_pipe_raw" in text) is inline
    assert ("explore_load.py mapper --cpu 1" in text) is not inline


def test_what_a_load_leaves_running_is_finished_before_stop_returns(tmp_path: Path) -> None:
    """A load's `finish` (the detach load kills its mapping child) runs before stop() returns:
    the end state is judged with nothing of the load acting."""
    def start(env: dict) -> dict:
        return {}

    def finish(st: dict) -> None:
        time.sleep(0.2)     # a slow finish still ends before stop() returns
        (tmp_path / "finished").write_text("yes")
    load = explore_load.Load("slow", ("trace-mmap",), "finishes", start,
                             lambda env, st, n: True, finish=finish)
    saved = dict(explore_load.LOADS)
    explore_load.LOADS["slow"] = load
    try:
        r = explore_load.Running([("slow", 0)], {})
        time.sleep(0.05)
        r.stop()
    finally:
        explore_load.LOADS.clear()
        explore_load.LOADS.update(saved)
    assert (tmp_path / "finished").read_text() == "yes"


def test_a_load_that_cannot_start_says_so_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 4's trace mapper died in every sequence (Python's mmap refuses a tracefs file of
    size 0) and showed only as "0 rounds/s": a dead load is the lab's error, said with why."""
    def start(env: dict) -> dict:
        raise ValueError("mmap length is greater than file size")
    monkeypatch.setitem(explore_load.LOADS, "dead", explore_load.Load(
        "dead", ("trace-mmap",), "cannot start", start, lambda env, st, n: True))
    r = explore_load.Running([("dead", 1 % os.cpu_count())], {})
    counts = r.stop()[f"dead@{1 % os.cpu_count()}"]
    assert counts["rounds"] == 0 and counts["died"] == 1
    assert counts["error"] == "ValueError: mmap length is greater than file size"
    from harness.explore.report import load_text
    assert "LOAD DIED in 1 sequence(s): ValueError: mmap length" in load_text("dead@1", counts, 2.0)
    assert "DIED" not in load_text("m@1", {"rounds": 4, "ok": 4, "died": 0}, 2.0)
