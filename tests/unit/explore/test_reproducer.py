"""harness/explore/reproducer.py: a failure's shortest sequence as a stdlib Python script.
A characterisation test first: every operation of the paths' OPS tables
(probes/explore_perf.py, probes/explore_trace.py), in every form its arguments select, rendered as one step, as a whole script per path and as two actors' threads, must
give the text kept in tests/unit/data/explore-repro/ byte for byte, so the generator can be
reshaped without a reproducer changing. Then the parts a reader checks by eye: an unknown
operation is refused by name, references name their slots, a step is judged or only said.

The kept text was remade once, on purpose, when the reproducers began to print KTAP and the
operations became records (issue 41); `RINGLAB_REGEN_REPRO=1` rewrites it (only for a change
meant to alter the reproducers)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.explore import reproducer

from .conftest import (PERF_STEPS, STEPS, expectations, failure, model_ops, named_steps,
                       same_as_kept, step as _s)


def rendered_steps(path: str) -> str:
    """Each step alone: judged with its VmPin, judged without, and only said (an actor's)."""
    out = []
    for k, e in enumerate(expectations(STEPS[path])):
        for allowed, pin in ((e["allowed"], e["vm_pin_kb"] or 8), (e["allowed"], None),
                             (None, None)):
            out += [f"# {e['step']} allowed={allowed} pin={pin}",
                    *reproducer._py_step(k, e["step"], allowed, pin, path), ""]
    return "\n".join(out)


def rendered_script(path: str, who: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(reproducer, "expectations", lambda f: expectations(f.steps))
    return reproducer.python_script(failure(path, who), f"every operation of {path}")


def two_actors() -> SimpleNamespace:
    steps = [dict(s, actor=0) for s in PERF_STEPS[:4]] + \
        [dict(s, id=1000 + s["id"], actor=1) for s in PERF_STEPS[:1]] + \
        [dict(_s(1003, "mmap", "@1000", 3, "rw", "shared"), actor=1),
         dict(_s(1004, "munmap", "@1003"), actor=1)]
    return failure("pinning", steps=steps)


@pytest.mark.parametrize("path", ["pinning", "trace-mmap", "trace-remote"])
def test_the_cases_are_operations_the_model_knows(path: str) -> None:
    """Every operation of the issue-41 tables is among the cases; one added later is held to
    its forms by tests/unit/probes/test_explore_ops.py, which draws it from the model."""
    assert {s["op"] for s in STEPS[path]} <= model_ops(path)


@pytest.mark.parametrize("path", ["pinning", "trace-mmap", "trace-remote"])
def test_every_operation_renders_as_it_did(path: str) -> None:
    same_as_kept(f"py-steps-{path}.txt", rendered_steps(path))


@pytest.mark.parametrize("path, who", [("pinning", "user"), ("pinning", "user+ipc_lock"),
                                       ("trace-mmap", "user"), ("trace-remote", "user")])
def test_a_whole_script_of_every_operation_renders_as_it_did(
        path: str, who: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    text = rendered_script(path, who, monkeypatch)
    same_as_kept(f"repro-{path}-{who}.py", text)
    (tmp_path / "repro.py").write_text(text)
    subprocess.run([sys.executable, "-m", "py_compile", str(tmp_path / "repro.py")],
                   check=True)


def test_two_actors_render_as_they_did() -> None:
    same_as_kept("repro-two-actors.py", reproducer.python_script(two_actors(), "two actors"))


def test_an_unknown_operation_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="no reproducer for the operation 'teleport'"):
        reproducer._py_step(0, _s(0, "teleport"), ["ok"], None, "pinning")


def test_a_judged_step_is_wrapped_and_checked() -> None:
    lines = reproducer._py_step(2, _s(4, "fork"), ["ok"], 12, "pinning")
    assert lines == ["try:", "    got = fork()", "except OSError as e:",
                     "    got = errno.errorcode[e.errno]",
                     "except KeyError:   # made by a step that failed",
                     "    got = 'no such object'", "step('fork', got, ['ok'], 12)"]


def test_an_actors_step_is_only_said() -> None:
    lines = reproducer._py_step(1, dict(_s(7, "close", "@3"), actor=1), None, None, "pinning")
    assert lines[1] == "    os.close(fd.pop(3))"
    assert lines[-1] == "print(f'# actor 1 step 1: close @3 -> {got}')"


def test_a_remote_reproducers_end_check_is_the_models_end_after_its_steps() -> None:
    """A size taken while unloaded is the size the end must read (review, round 10)."""
    from harness.explore import c_reproducer
    steps = named_steps("trace-remote", [_s(0, "size", 16), _s(1, "open", "all"),
                                         _s(2, "read", "@1")])
    f = failure("trace-remote", steps=steps)
    assert '{"kb": 16, "loaded": False}' in reproducer.python_script(f, "t")
    assert "remote_end(16);" in c_reproducer.program(f, "t", reproducer.expectations(f))


def test_three_actors_beside_loads_run_them_in_pinned_children(tmp_path: Path) -> None:
    """A failure found with loads (`./lab explore --load`) restarts them in its repro.py: a
    trace load in Python, a perf load named for the user to run beside; three actors run."""
    steps = [dict(s, actor=i % 3, id=i) for i, s in enumerate(STEPS["trace-mmap"][:3])]
    f = failure("trace-mmap", steps=steps)
    f.setup = dict(f.setup, load=[["marker", 1], ["resize", 0]])
    text = reproducer.python_script(f, "three actors and two loads")
    assert "for a in (actor0, actor1, actor2)" in text
    assert "os.sched_setaffinity(0, {1})  # load marker" in text
    assert "open(f'{inst}/buffer_size_kb', 'w').write(('8', '16')[n % 2])" in text
    assert text.rstrip().count("stop_loads()") >= 1
    (tmp_path / "repro.py").write_text(text)
    subprocess.run([sys.executable, "-m", "py_compile", str(tmp_path / "repro.py")], check=True)
