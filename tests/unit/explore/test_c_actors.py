"""harness/explore/c_reproducer.py, actors at once: a failure whose steps carry their actor
gets a repro.c as well as a repro.py, each actor's steps in a pthread of its own released from
one barrier, their results said and not judged, the end checks and the kernel log the KTAP
results; the setup's loads started beside them and stopped before the end checks; slots big
enough for every actor's ids; and it builds with gcc -Wall -Werror -pthread (when the host
has gcc)."""
from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.explore import c_reproducer, reproducer

from .conftest import failure, named_steps, same_as_kept, step

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc on this host")

# Two actors' steps as the explorer numbers them: actor i's ids from 1000 i.
ACTORS = {
    "perf-ring": [step(0, "open", "dummy"), step(1, "mmap", "@0", 9, "rw", "shared"),
                  step(2, "munmap", "@1"),
                  step(1000, "open", "tp"), step(1001, "mmap", "@1000", 3, "rw", "shared"),
                  step(1002, "fire", 3), step(1003, "fork")],
    "trace-mmap": [step(0, "open", 0), step(1, "mmap", "@0", "all", "r", "shared"),
                   step(2, "get-reader", "@0", "@1"),
                   step(1000, "open", 0), step(1001, "write", 5), step(1002, "read", "@1000"),
                   step(1003, "resize", 16)],
}


def two_actors(path: str, load: list[list[Any]] | None = None) -> SimpleNamespace:
    """A failure of the path made by two actors (and the setup's loads, if any)."""
    steps = [dict(s, actor=s["id"] // 1000) for s in named_steps(path, ACTORS[path])]
    f = failure(path, steps=steps)
    if load:
        f.setup = dict(f.setup, load=load)
    return f


def compiles(source: Path) -> None:
    r = subprocess.run(["gcc", "-Wall", "-Werror", "-pthread", "-o", str(source.with_suffix("")),
                        str(source)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]


def body(text: str) -> str:
    """The generated code after the support headers: the actors and main()."""
    return text.split("#endif /* RINGLAB_ACTORS_H */")[1]


@needs_gcc
@pytest.mark.parametrize("path, plan", [("perf-ring", "perf_begin(4, "),
                                        ("trace-mmap", 'trace_begin(3, "8\\n", "4\\n");')])
def test_two_actors_get_a_repro_c_with_a_pthread_each(path: str, plan: str,
                                                      tmp_path: Path) -> None:
    f = two_actors(path)
    written = reproducer.write(tmp_path, f, f"two actors on {path}")
    assert [p.name for p in written] == ["repro.py", "repro.c"]
    text = written[1].read_text()
    code = body(text)
    assert "static void *actor0(void *unused)" in code and \
        "static void *actor1(void *unused)" in code
    assert code.count("\tpthread_barrier_wait(&start_line);") == 2, "both start together"
    assert "{ actor0, actor1 };" in code and "\tactors_run(actor, 2);" in code
    assert "pthread_create" in text and "#include <pthread.h>" in text
    # the KTAP plan is the end checks only (the steps are said), printed by the path's begin
    assert f"\t{plan}" in code
    assert "\tstep(" not in code, "no step is judged: the interleaving is the scheduler's"
    assert code.index("actors_run") < code.index("_end(") < code.index("kmsg_check();")
    assert "gcc -Wall -pthread -o repro repro.c" in text
    compiles(written[1])


def test_each_actor_says_its_steps_in_its_own_numbering() -> None:
    code = body(c_reproducer.actors_program(two_actors("perf-ring"), "t"))
    actor1 = code.split("static void *actor1")[1].split("int main")[0]
    assert 'said(1, 0, "open tp", got);' in actor1
    assert "fd[1000] = open_event(\"tp\");" in actor1
    assert "addr[1001] = a;" in actor1 and 'said(1, 3, "fork", got);' in actor1
    assert "fd[0]" not in actor1, "an actor touches only its own slots"


@pytest.mark.parametrize("path", ["perf-ring", "trace-mmap"])
def test_the_slots_hold_every_actors_ids(path: str) -> None:
    f = two_actors(path)
    f.steps = f.steps + [dict(named_steps(path, [step(3000, "open", *(
        ["dummy"] if path == "perf-ring" else [0]))])[0], actor=3)]
    text = c_reproducer.actors_program(f, "t")
    assert "#define SLOTS 3002\n" in text
    assert "static void *actor2(void *unused)" not in text, "no actor without steps but 0"
    assert "{ actor0, actor1, actor3 };" in text and "actors_run(actor, 3);" in text


def test_two_steps_of_one_id_are_refused_by_name() -> None:
    f = two_actors("perf-ring")
    f.steps = f.steps + [dict(f.steps[0], actor=1)]
    with pytest.raises(ValueError, match=r"steps of one id \(0\)"):
        c_reproducer.actors_program(f, "t")


@needs_gcc
def test_the_loads_start_beside_the_actors_and_stop_before_the_end_checks(
        tmp_path: Path) -> None:
    f = two_actors("trace-mmap", load=[["marker", 1], ["resize", 1]])
    text = c_reproducer.actors_program(f, "t")
    code = body(text)
    assert "./lab explore trace-mmap --actors 2 --load marker@1,resize@1" in text
    starts = ['\tload_start("marker", inst, 1);', '\tload_start("resize", inst, 1);',
              "\tloads_started();", "\tactors_run(actor, 2);", "\tloads_stop();",
              '\ttrace_end("12\\n");']
    at = [code.index(s) for s in starts]
    assert at == sorted(at), "loads on the program's instance, stopped before the end checks"
    perf = body(c_reproducer.actors_program(two_actors("perf-ring", [["samples", 0]]), "t"))
    assert '\tload_start("samples", "/sys/kernel/tracing", 0);' in perf
    assert "load_start" not in body(c_reproducer.actors_program(two_actors("perf-ring"), "t"))
    (tmp_path / "repro.c").write_text(text)
    compiles(tmp_path / "repro.c")


def test_two_actors_render_as_they_did() -> None:
    same_as_kept("repro-two-actors.c", c_reproducer.actors_program(
        two_actors("trace-mmap", [["marker", 1]]), "two actors"))


def _drawn(path: str, actor: int, seed: int, setup: dict[str, Any]) -> list[dict[str, Any]]:
    """An actor's steps as the explorer draws them: its own model, ids from 1000 actor."""
    m = reproducer.world(path).model(path, setup)
    rng, out = random.Random(seed), []
    for n in range(20):
        sid = 1000 * actor + n
        s = m.choose(rng, sid)
        if s is None:
            break
        s = dict(s, id=sid, actor=actor)
        allowed = m.expect(s)
        m.apply(s, "ok" if "ok" in allowed else min(allowed))
        out.append(s)
    return out


@needs_gcc
@pytest.mark.parametrize("path", ["perf-ring", "perf-aux", "pinning", "trace-mmap"])
def test_every_operation_the_models_draw_compiles_in_an_actors_thread(path: str,
                                                                      tmp_path: Path) -> None:
    """Each operation's C form, written for main(), builds in an actor's function too."""
    f = failure(path, steps=[])
    setup = dict(f.setup, **f.env)
    for seed in range(6):
        f.steps = _drawn(path, 0, seed, setup) + _drawn(path, 1, seed + 100, setup)
        source = tmp_path / f"repro{seed}.c"
        source.write_text(c_reproducer.actors_program(f, "t"))
        r = subprocess.run(["gcc", "-Wall", "-Werror", "-pthread", "-fsyntax-only",
                            str(source)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]


@needs_gcc
def test_actors_found_as_processes_are_forked_in_the_c_reproducer_too(tmp_path: Path) -> None:
    """--processes: an mm each, so the C program forks its actors (released together by a
    pipe) instead of starting threads of one process."""
    f = two_actors("perf-ring")
    f.setup = dict(f.setup, actors_as="process")
    written = reproducer.write(tmp_path, f, "two actor processes on perf-ring")
    code = body(written[1].read_text())
    assert "\tactors_fork(actor, 2);" in code and "actors_run(" not in code
    assert "--actors 2 --processes" in written[1].read_text()
    compiles(written[1])
