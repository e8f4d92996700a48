"""A failure's shortest sequence as one C file in kselftest style: builds alone with `gcc -o
repro repro.c`, prints KTAP as kselftest.h does (version, plan, a numbered result per step and
per end check, totals), exits KSFT_PASS (0), KSFT_FAIL (1) or KSFT_SKIP (4). The same calls as
repro.py (harness/explore/reproducer.py), the same judgement. Each step's statements are its
operation's C form (its record in the path's OPS, probes/explore_*.py); the support code is
real C in harness/explore/c/ (ringlab_repro.h and the path's header), carried inline so the
file needs nothing but the kernel's uapi headers.

A failure several actors made at once (`--actors N`, `--load`) is actors_program(): each
actor's steps in a pthread of its own, the same statements, their results said and not judged
(as repro.py does: the interleaving is the scheduler's), the end checks and the kernel log as
KTAP results; it builds with `gcc -pthread` (actors.h)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.explore import reproducer
from harness.probe_modules import probe_module

SUPPORT = Path(__file__).with_name("c")


def support(path: str, actors: bool = False) -> str:
    """ringlab_repro.h and the path's own header (and actors.h for actors at once), as the
    program carries them."""
    own = reproducer.world(path).C_SUPPORT
    return "\n".join((SUPPORT / h).read_text()
                     for h in ("ringlab_repro.h", own, *(["actors.h"] if actors else [])))


def _c_call(step: dict, path: str, made: dict[int, tuple[int, bool]]) -> tuple[str, list[str]]:
    """How a step is printed, and its operation's statements (the result left in `got`)."""
    s = reproducer.step_record(step, path, made)
    return s.what, s.op.c(s)


def _c_step(step: dict, allowed: list[str], pin: int | None, path: str,
            made: dict[int, tuple[int, bool]]) -> list[str]:
    """A step's statements: its operation's calls, then the verdict on the result (and on
    VmPin when the model says what it must be: -1 when it does not)."""
    what, calls = _c_call(step, path, made)
    verdict = f'step("{what}", got, "{"|".join(allowed)}", {-1 if pin is None else pin});'
    return calls + [verdict]


def _frame(f: Any, plan: int) -> tuple[str, str]:
    """The path's set-up (its KTAP plan printed) and end checks, as two statements."""
    s = dict(f.setup, **f.env)
    frame = getattr(reproducer.world(f.path), "c_frame", None)
    if frame is not None:   # the path's own file frames its reproducers
        begin, end = frame(s, plan, reproducer.model_end(f))
        return begin, end
    if f.path == "trace-mmap":
        return (f'trace_begin({plan}, "{s["buffer_kb"]}\\n", "{s["subbuf_kb"]}\\n");',
                f'trace_end("{s["buffer_kb"] + 4}\\n");')
    ipc = int(s.get("who") == "user+ipc_lock")
    return (f'perf_begin({plan}, {s["mlock_kb"]}, {s["rlimit_pages"] * s["page_size"]}, '
            f'{reproducer.UID}, {ipc});',
            f'perf_end({s["mlock_kb"]}, {int(bool(s.get("has_pmu")))});')


def _top(title: str, slots: int, found: str, build: str, more: tuple[str, ...] = ()) -> str:
    """The licence, what the program is and how to build it (and `more` comment lines), and
    what its headers need."""
    banners = ", ".join('"' + b.replace('"', '\\"') + '"'
                        for b in probe_module("splat_banners").PREFIXES)
    return (f"// SPDX-License-Identifier: GPL-2.0\n/*\n * {title.replace('*/', '* /')}\n *\n"
            f" * Found by ringlab's explorer (./lab explore {found}). Run as root on the kernel "
            f"to test:\n *   {build}\n" + "".join(f" * {x}\n" if x else " *\n" for x in more) +
            " */\n"
            f"#define SLOTS {slots}\n#define SPLAT_BANNERS {banners}\n")


# What a step's statements may use (the single actor's main and each actor's function).
_LOCALS = ['const char *got = "ok";', "char path[512], *a, *spot;", "int i, j;", "",
           "(void)got; (void)path; (void)a; (void)spot; (void)i; (void)j;"]


def program(f: Any, title: str, expectations: list[dict]) -> str:
    n = max([e["step"]["id"] for e in expectations] + [0]) + 2
    plan = reproducer.plan(expectations, reproducer.end_checks(f))
    made: dict[int, tuple[int, bool]] = {}
    body: list[str] = []
    for e in expectations:
        body += [""] + _c_step(e["step"], e["allowed"], e["vm_pin_kb"], f.path, made)
        body += reproducer.check_lines(f, e.get("checks", {}), "c")
    begin, end = _frame(f, plan)
    top = _top(title, n, f.path, "gcc -Wall -o repro repro.c && ./repro")
    main = ["", "int main(void)", "{", *("\t" + x if x else "" for x in _LOCALS),
            "\t" + begin]
    main += ["\t" + line if line else "" for line in body]
    main += ["", "\t" + end, "\tkmsg_check();", "\tktap_end();", "}", ""]
    return top + support(f.path) + "\n".join(main)


# --- actors at once ------------------------------------------------------------------------

def actors_program(f: Any, title: str) -> str:
    """Several actors' steps at once (the steps carry their actor): each actor's in a thread
    of its own, all released together, the setup's loads beside them; only the end checks and
    the kernel log are KTAP results, as in repro.py, since the interleaving is the
    scheduler's and a step's right result depends on it."""
    steps = reproducer.steps_of(f)
    _distinct_slots(steps)
    actors = sorted({s.get("actor", 0) for s in steps} | {0})
    begin, end = _frame(f, reproducer.plan([], reproducer.end_checks(f)))
    loads = _c_loads(f)
    spec = ",".join(f"{name}@{cpu}" for name, cpu in f.setup.get("load", []))
    found = f"{f.path} --actors {len(actors)}" + \
        (" --processes" if f.setup.get("actors_as") == "process" else "") + \
        (f" --load {spec}" if spec else "")
    more: tuple[str, ...] = (
        "", "Each actor's steps run in a thread of its own, all at once; their results are said,",
        "not judged: the interleaving is the scheduler's, so a run may need repeating to fail.",
        "The end checks and the kernel log are judged.")
    if loads:
        more += ("The loads run if ringlab's probes/explore_load.py (and the probe modules it",
                 "imports) is beside the program; else it says so and runs without them.")
    top = _top(title, max(s["id"] for s in steps) + 2, found,
               "gcc -Wall -pthread -o repro repro.c && ./repro", more)
    body: list[str] = []
    for i in actors:
        body += _c_actor(i, [s for s in steps if s.get("actor", 0) == i], f.path)
    names = ", ".join(f"actor{i}" for i in actors)
    # --processes: an mm each, forked; else threads of one process
    run = "actors_fork" if f.setup.get("actors_as") == "process" else "actors_run"
    main = ["", "int main(void)", "{", f"\tstatic void *(*const actor[])(void *) = {{ {names} }};",
            "", "\t" + begin, *("\t" + x for x in loads),
            f"\t{run}(actor, {len(actors)});", *(["\tloads_stop();"] if loads else []),
            "\t" + end, "\tkmsg_check();", "\tktap_end();", "}", ""]
    return top + support(f.path, actors=True) + "\n".join(body + main)


def _distinct_slots(steps: list[dict]) -> None:
    """Actors share the fd[] and addr[] slots, indexed by step id: two steps of one id would
    write one slot from two threads."""
    ids = [s["id"] for s in steps]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"steps of one id ({twice[0]}) in two places: the actors' ids must "
                         "be distinct (actor i's from 1000 i)")


def _c_actor(i: int, steps: list[dict], path: str) -> list[str]:
    """Actor i's steps as a thread's function, started at the barrier with the others: the
    same statements as one actor's, each result said and not judged."""
    made: dict[int, tuple[int, bool]] = {}   # this actor's data mappings (its AUX areas')
    lines = ["pthread_barrier_wait(&start_line);"]
    for n, step in enumerate(steps):
        what, calls = _c_call(step, path, made)
        lines += ["", *calls, f'said({i}, {n}, "{what}", got);']
    return ["", f"static void *actor{i}(void *unused)", "{",
            *("\t" + x if x else "" for x in _LOCALS[:-1]),
            "\t(void)unused; " + _LOCALS[-1], *("\t" + x if x else "" for x in lines),
            "\treturn NULL;", "}"]


def _c_loads(f: Any) -> list[str]:
    """The setup's loads started (each said, or why it does not run), and time for them to
    start: the actors' steps in C take microseconds, the loads' python3 a second."""
    loads = [(name, int(cpu)) for name, cpu in f.setup.get("load", [])]
    if not loads:
        return []
    # a trace load acts on the program's own instance; a perf load opens events of its own
    instance = "inst" if f.path == "trace-mmap" else '"/sys/kernel/tracing"'
    return [f'load_start("{name}", {instance}, {cpu});' for name, cpu in loads] + \
        ["loads_started();"]
