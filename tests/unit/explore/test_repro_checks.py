"""A failure of a check made through a mapping (meta, subbuf, ring, aux, ctl), of the tracefs
files read back (tracefs) or of the events the readers took (events) must fail its
reproducers too: both check, after each step where the model says what that check must see,
what the kernel shows (the world's py_check/c_check forms), and nothing else of the kind. Both
programs are compiled; a check of the kind a failure did not fail is left out."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.explore import c_reproducer, reproducer

from .conftest import named_steps

PERF_ENV = {"page_size": 4096, "ncpus": 1, "mlock_kb": 33 * 4, "has_pmu": True, "has_tp": True}
TRACE_ENV = {"ncpus": 1, "instance": "x", "page_size": 4096, "has_snapshot": True,
             "has_subbuf": True}
CASES: dict[str, tuple[str, dict, dict, list[tuple]]] = {
    "ctl": ("pinning", {"mlock_pages": 9, "rlimit_pages": 0, "who": "user"}, PERF_ENV,
            [("open", "dummy"), ("mmap", "@0", 3, "rw", "shared")]),
    "ring": ("perf-ring", {"mlock_pages": 129, "rlimit_pages": 0, "who": "user"}, PERF_ENV,
             [("open", "tp"), ("mmap", "@0", 2, "rw", "shared"), ("fire", 150)]),
    "aux": ("perf-aux", {"mlock_pages": 33, "rlimit_pages": 0, "who": "user"}, PERF_ENV,
            [("open", "pmu", 0, 3000, 8), ("mmap", "@0", 3, "rw", "shared"), ("aux", "@0", 2),
             ("aux-run", "@0")]),
    "meta": ("trace-mmap", {"buffer_kb": 8, "subbuf_kb": 4}, TRACE_ENV,
             [("open", 0), ("mmap", "@0", "meta", "r", "shared"), ("write", 1000),
              ("get-reader", "@0")]),
    "tracefs": ("trace-mmap", {"buffer_kb": 8, "subbuf_kb": 4}, TRACE_ENV,
                [("open", 0), ("mmap", "@0", "meta", "r", "shared"), ("subbuf", 8)]),
    "events": ("trace-mmap", {"buffer_kb": 8, "subbuf_kb": 4}, TRACE_ENV,
               [("open", 0), ("mmap", "@0", "all", "r", "shared"), ("write", 60), ("read", "@0"),
                ("write", 10), ("get-reader", "@0", "@1")]),
    "subbuf": ("trace-mmap", {"buffer_kb": 8, "subbuf_kb": 4}, TRACE_ENV,
               [("open", 0), ("mmap", "@0", "all", "r", "shared"), ("write", 1000),
                ("get-reader", "@0")]),
}


def failed(check: str) -> SimpleNamespace:
    path, setup, env, steps = CASES[check]
    named = named_steps(path, [{"id": i, "op": op, "args": list(args)}
                               for i, (op, *args) in enumerate(steps)])
    return SimpleNamespace(path=path, check=check, setup=setup, env=env, steps=named)


@pytest.mark.parametrize("check", sorted(CASES))
def test_a_failed_observation_is_checked_by_both_reproducers(check: str, tmp_path: Path) -> None:
    f = failed(check)
    exp = reproducer.expectations(f)
    assert exp[-1]["checks"], f"the model says what {check} must see after the last step"
    keys = [k for e in exp for k in e["checks"]]
    assert all(k.startswith(check + "@") for k in keys), keys
    py = reproducer.python_script(f, f"a {check} failure")
    c = c_reproducer.program(f, f"a {check} failure", exp)
    ends = 3 + (f.path != "trace-mmap")   # its end checks, the kernel log; perf: the PMU refs
    assert reproducer.end_checks(f) == ends
    assert f"1..{len(exp) + len(keys) + ends}" in py
    assert f"ktap_begin({len(exp) + len(keys) + ends}" in c or \
        f"_begin({len(exp) + len(keys) + ends}," in c
    assert py.index("def check(") < py.index("check('"), "defined before it is called"
    for key in keys:
        assert f"check('{key}'" in py and f'check_end("{key}");' in c
    (tmp_path / "repro.py").write_text(py)
    subprocess.run([sys.executable, "-m", "py_compile", str(tmp_path / "repro.py")], check=True)
    if shutil.which("gcc"):
        (tmp_path / "repro.c").write_text(c)
        p = subprocess.run(["gcc", "-fsyntax-only", "-Wall", "-Werror", str(tmp_path / "repro.c")],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr


def test_the_aux_check_names_its_area_and_the_records_as_the_model_says() -> None:
    f = failed("aux")
    want = reproducer.expectations(f)[-1]["checks"]["aux@1"]
    assert want["records"] == [[3000, 0], [3000, 0], [2184, 1]]
    [py] = reproducer.check_lines(f, {"aux@1": want}, "py")
    assert "observe_aux(m[1][0], *m[2])" in py and "'aux_vma'" not in py
    c = "\n".join(reproducer.check_lines(f, {"aux@1": want}, "c"))
    assert 'want_str("records", recs, "3000/0,3000/0,2184/1");' in c
    assert "aux_data_ok(addr[1], addr[2], len[2])" in c


def test_a_failure_of_another_kind_carries_no_observation_check() -> None:
    f = failed("subbuf")
    f.check = "result:get-reader"
    exp: list[dict[str, Any]] = reproducer.expectations(f)
    assert not any(e["checks"] for e in exp)
    assert "def check(" not in reproducer.python_script(f, "a result failure")


def test_a_step_the_model_would_pass_over_is_refused_not_dropped() -> None:
    """replay() passes over a step whose precondition fails (the shrinker needs that); a
    reproducer without it shows nothing (found when `./lab report` made a program without the
    sub-buffer change, which passed on every kernel)."""
    f = failed("meta")
    f.steps = f.steps + named_steps("trace-mmap", [{"id": 9, "op": "subbuf", "args": [8]}])
    f.env = {k: v for k, v in f.env.items() if k != "has_subbuf"}
    with pytest.raises(ValueError, match="the model takes no step subbuf"):
        reproducer.expectations(f)
