"""The explorer's operation tables (probes/explore_ops.py, each path's OPS): every operation
has a rule, a model update and both reproducer forms, and the model draws each one, so no
operation can be added half-done; steps kept in format 1 (positional arguments) read as
format 2; and the one list of splat banners holds on real logs of every kernel line."""
from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

import explore_ops
import explore_perf
import explore_trace
import probe_explore
import splat_banners
from harness.explore import c_reproducer, kept, reproducer
from harness.kernellog import console, splats

DATA = Path(__file__).resolve().parents[1] / "data"
PATHS = probe_explore.PATHS
PERF_ENV = {"page_size": 4096, "ncpus": 2, "mlock_kb": 36 * 4, "has_pmu": True, "has_tp": True,
            "mlock_pages": 36, "rlimit_pages": 8, "who": "user", "has_revoke": True,
            "pmu_type": 9}
TRACE_ENV = {"buffer_kb": 8, "subbuf_kb": 4, "ncpus": 2, "page_size": 4096, "has_snapshot": True,
             "has_subbuf": True, "has_trigger": True, "has_fixed": True, "has_copy": True,
             "instance": "x"}


REMOTE_ENV = {"size_kb": 7, "ncpus": 2}
ENVS = {"trace-mmap": TRACE_ENV, "trace-remote": REMOTE_ENV}


def env(path: str) -> dict:
    return ENVS.get(path, PERF_ENV)


def drawn(path: str, seeds: int = 40, length: int = 30) -> dict[str, list[dict]]:
    """Per operation, the sequences (up to and including it) in which the model drew it."""
    world = probe_explore.world_of(path)
    seen: dict[str, list[dict]] = {}
    for seed in range(seeds):
        model, rng, steps = world.model(path, dict(env(path))), random.Random(seed), []
        for i in range(length):
            choice = model.choose(rng, i)
            if choice is None:
                break
            step = dict(choice, id=i)
            allowed = model.expect(step)
            model.apply(step, "ok" if "ok" in allowed else min(allowed))
            steps.append(step)
            seen.setdefault(step["op"], list(steps))
    return seen


def test_every_path_is_found_from_its_file() -> None:
    assert set(PATHS) >= {"perf-ring", "perf-aux", "pinning", "trace-mmap", "trace-remote"}
    assert probe_explore.world_of("trace-mmap") is explore_trace.TraceWorld
    with pytest.raises(ValueError, match="unknown path 'nope'"):
        probe_explore.world_of("nope")


@pytest.mark.parametrize("path", PATHS)
def test_every_operation_is_one_whole_record(path: str) -> None:
    ops = probe_explore.world_of(path).OPS
    for name, op in ops.items():
        assert op.name == name
        assert len(op.rule) > 20, f"{name}: no rule said"
        for part in ("draw", "pre", "expect", "apply", "call", "py", "c", "simpler"):
            assert callable(getattr(op, part)), (name, part)
        assert set(op.refs) <= set(op.params) and set(dict(op.defaults)) <= set(op.params)


@pytest.mark.parametrize("path", PATHS)
def test_the_model_draws_every_operation_and_both_reproducers_render_it(path: str,
                                                                       tmp_path: Path) -> None:
    """A new operation the model cannot draw on any path of its table, or without a Python
    or C form, fails here."""
    world = probe_explore.world_of(path)
    same_table = [p for p in PATHS if probe_explore.world_of(p) is world]
    everywhere = set().union(*(drawn(p) for p in same_table))
    assert set(world.OPS) <= everywhere, f"never drawn: {sorted(set(world.OPS) - everywhere)}"
    seen = drawn(path)
    for name, steps in sorted(seen.items()):
        f = kept.KeptFailure(path, "allowance", {}, steps, "t", env=dict(env(path)))
        f.setup = {k: env(path)[k] for k in world.setup(path, random.Random(0))}
        py = reproducer.python_script(f, name)
        compile(py, "repro.py", "exec")
        c = c_reproducer.program(f, name, reproducer.expectations(f))
        assert c.count("\tstep(\"") == len(reproducer.expectations(f)), name
        if shutil.which("gcc"):
            (tmp_path / "repro.c").write_text(c)
            r = subprocess.run(["gcc", "-fsyntax-only", "-Wall", "-Werror",
                                str(tmp_path / "repro.c")], capture_output=True, text=True)
            assert r.returncode == 0, (name, r.stderr[-1500:])


def test_a_format_1_step_is_named_by_its_operation_and_prints_as_before() -> None:
    old = [{"id": 0, "op": "open", "args": [1, "rw"]}, {"id": 1, "op": "open", "args": [0]},
           {"id": 2, "op": "mmap", "args": ["@0", "meta", "r", "shared"]}]
    new = explore_ops.named(explore_trace.OPS, old)
    assert new[0]["args"] == {"cpu": 1, "mode": "rw"} and new[1]["args"] == {"cpu": 0}
    assert new[2]["args"] == {"fd": "@0", "what": "meta", "prot": "r", "share": "shared"}
    ops = explore_trace.OPS
    assert [ops[s["op"]].what(s["args"]) for s in new] == \
        ["open 1 rw", "open 0", "mmap @0 meta r shared"]
    assert explore_ops.named(explore_trace.OPS, new) == new, "format 2 is left as it is"


def test_every_kept_failure_loads_and_keeps_its_traits(tmp_path: Path) -> None:
    files = sorted((Path(__file__).resolve().parents[2] / "kernel" / "explore").glob("*.json"))
    assert files
    for file in files:
        f = kept.load(file)
        assert all(isinstance(s["args"], dict) for s in f.steps)
        model = probe_explore.world_of(f.path).model(f.path, dict(
            f.setup, page_size=4096, ncpus=1, mlock_kb=f.setup.get("mlock_pages", 0) * 4,
            has_pmu=True, has_tp=True, has_snapshot=True, has_subbuf=True))
        assert set(f.traits) <= explore_ops.traits(model, f.steps), file.name
        again = kept.load(kept.dump(f, tmp_path / file.name))
        assert (again.format, again.steps, again.traits) == (2, f.steps, f.traits)


def test_a_file_that_is_no_kept_failure_is_named(tmp_path: Path) -> None:
    from harness.errors import LabError
    bad = tmp_path / "x.json"
    bad.write_text('{"format": 7, "path": "pinning"}')
    with pytest.raises(LabError, match="x.json: .*format 7"):
        kept.load(bad)


def test_the_shared_mapping_operations_follow_either_model() -> None:
    perf = explore_perf.PerfModel("pinning", dict(PERF_ENV))
    trace = explore_trace.TraceModel("trace-mmap", dict(TRACE_ENV))
    for model, setup in ((perf, [("open", "dummy"), ("mmap", "@0", 3, "rw", "shared")]),
                         (trace, [("open", 0), ("mmap", "@0", "all", "r", "shared")])):
        steps = explore_ops.named(model.OPS, [{"id": i, "op": op, "args": list(a)}
                                              for i, (op, *a) in enumerate(setup)])
        steps += [{"id": 2, "op": "madvise", "args": {"vma": "@1", "advice": "dofork"}},
                  {"id": 3, "op": "fork", "args": {}},
                  {"id": 4, "op": "munmap", "args": {"vma": "@1"}}]
        out = list(explore_ops.replay(model, steps))
        assert [a for _, a in out][3:] == [["inherits 1"], ["ok"]], type(model).__name__
        assert model.live_vmas() == [] and "fork-inherits-a-mapping" in model.traits


# --- one list of splat banners ---------------------------------------------------------------

LOGS = sorted(DATA.glob("console-*.log"))


@pytest.mark.parametrize("log", LOGS, ids=[p.stem for p in LOGS])
def test_each_banner_the_host_parser_finds_is_noticed_by_probes_and_reproducers(log: Path) -> None:
    lines = [console.clean(x) for x in log.read_text(errors="replace").splitlines()]
    for s in splats.find(lines):
        first = lines[s.first_line]
        assert splat_banners.is_banner(first), first
        assert any(p in first for p in splat_banners.PREFIXES), first


def test_ordinary_lines_are_no_banners() -> None:
    for line in ("ringlab-explore: pinning seed 1 sequence 3", "random: crng init done",
                 "Run /init as init process", "tracing_buffers_mmap: mapped"):
        assert not splat_banners.is_banner(line)
        assert not any(p in line for p in splat_banners.PREFIXES), line


def test_every_trait_a_known_issue_binds_is_one_a_model_gives() -> None:
    """A known issue's `explore: traits` that no model ever adds would leave its symptom
    reported NEW on every explore: each must be a trait the models' code adds."""
    import re
    from harness.results import known_issues
    probes = Path(probe_explore.__file__).parent
    added = {t for f in probes.glob("explore_*.py")
             for t in re.findall(r'traits\.add\("([\w-]+)"\)', f.read_text())}
    assert {"mapped-again", "moved", "forked"} <= added
    # explore_ops.traits_as_run(): an operation the kernel accepted where the model refuses it
    added |= {f"refused-{op}-accepted" for path in probe_explore.PATHS
              for op in probe_explore.world_of(path).OPS}
    for issue in known_issues.load():
        missing = set(issue.explore_traits) - added
        assert not missing, f"{issue.id}: no model adds the trait(s) {sorted(missing)}"
