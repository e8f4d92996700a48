"""harness/explore/c_reproducer.py: a failure's shortest sequence as one kselftest-style C file.
Each operation becomes its calls (an unknown one is refused by name), references (@N) become
the fd/mapping slots they name, an AUX area goes at the end of its event's rw data mapping,
the setup reaches the program (rlimit, allowance, CAP_IPC_LOCK, trace buffer sizes), and the
programs made from the lab's kept failures compile (when the host has gcc)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness import paths
from harness.explore import c_reproducer, reproducer
from harness.findings import repro

from .conftest import STEPS, expectations, failure, model_ops, named_steps, same_as_kept

KEPT = sorted(paths.EXPLORE_KEPT.glob("*--*.json"))


def _step(op: str, *args: Any, i: int = 5, path: str = "pinning") -> dict[str, Any]:
    return named_steps(path, [{"op": op, "args": list(args), "id": i}])[0]


def _c(step: dict[str, Any], path: str = "pinning", pin: int | None = None,
       made: dict[int, tuple[int, bool]] | None = None) -> list[str]:
    return c_reproducer._c_step(step, ["ok", "EPERM"], pin, path, {} if made is None else made)


def test_each_step_ends_judged_against_what_the_abi_allows() -> None:
    lines = _c(_step("fork"))
    assert lines == ["got = forked();", 'step("fork", got, "ok|EPERM", -1);']


def test_a_step_with_an_expected_pin_checks_vmpin() -> None:
    assert _c(_step("close", "@2"), pin=8)[-1] == 'step("close @2", got, "ok|EPERM", 8);'


def test_references_name_the_slots_of_the_steps_they_point_at() -> None:
    assert _c(_step("close", "@2"))[:2] == ["close(fd[2]);", "fd[2] = 0;"]
    assert _c(_step("munmap", "@12"))[0] == "got = res(munmap(addr[12], len[12]) == 0);"


def test_an_unknown_operation_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="no reproducer for the operation 'teleport'"):
        _c({"op": "teleport", "args": {}, "id": 5})


def test_a_perf_open_is_perf_event_open_and_a_trace_open_a_per_cpu_file() -> None:
    assert _c(_step("open", "dummy"))[0] == 'fd[5] = open_event("dummy");'
    trace = _c(_step("open", 1, "rw", path="trace-mmap"), path="trace-mmap")
    assert "per_cpu/cpu1/trace_pipe_raw" in trace[0] and "O_RDWR | O_NONBLOCK" in trace[1]
    assert "O_RDONLY" in _c(_step("open", 0, path="trace-mmap"), path="trace-mmap")[1]


def test_an_aux_area_follows_its_events_rw_data_mapping() -> None:
    made: dict[int, tuple[int, bool]] = {}
    _c(_step("mmap", "@0", 3, "ro", "shared", i=1), made=made)
    _c(_step("mmap", "@0", 3, "rw", "shared", i=2), made=made)
    assert made == {1: (0, False), 2: (0, True)}
    aux = _c(_step("aux", "@0", 4, i=3), made=made)
    assert aux[0] == "((struct perf_event_mmap_page *)addr[2])->aux_offset = len[2];"
    assert "fd[0], len[2]);" in aux[2]


def test_a_trace_mapping_of_the_whole_buffer_reads_its_size_from_the_meta_page() -> None:
    lines = _c(_step("mmap", "@0", "past", "ro", "shared", i=1, path="trace-mmap"),
               path="trace-mmap")
    assert "\tlen[1] = meta->meta_page_size + (size_t)(meta->nr_subbufs + 1) * " \
        "meta->subbuf_size;" in lines
    assert "page" in lines[0] and "MAP_SHARED" in lines[0]


def test_tracefs_file_steps_write_their_file() -> None:
    assert _c(_step("resize", 16, path="trace-mmap"), path="trace-mmap")[0] == \
        'got = tw("buffer_size_kb", "16\\n");'


def _failure(path: str, setup: dict[str, Any]) -> SimpleNamespace:
    env = {"page_size": 4096, "mlock_kb": 36}
    return SimpleNamespace(path=path, setup=setup, env=env, steps=[])


def _expect(*steps: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"step": s, "allowed": ["ok"], "vm_pin_kb": None} for s in steps]


def test_the_perf_setup_reaches_the_program() -> None:
    f = _failure("pinning", {"rlimit_pages": 2, "who": "user+ipc_lock"})
    text = c_reproducer.program(f, "a title */ with a comment end",
                                _expect(_step("open", "dummy", i=0)))
    assert "\tperf_begin(4, 36, 8192, 54321, 1);\n" in text   # plan, mlock_kb, rlimit, uid, ipc
    assert " * a title * / with a comment end\n" in text  # the title cannot end the comment
    assert "#define SLOTS 2\n" in text  # the highest step id + 2


def test_a_plain_user_gets_no_cap_ipc_lock() -> None:
    text = c_reproducer.program(_failure("pinning", {"rlimit_pages": 1, "who": "user"}), "t",
                                _expect(_step("open", "dummy", i=0)))
    assert "perf_begin(4, 36, 4096, 54321, 0);" in text


def test_the_trace_setup_and_its_end_resize_reach_the_program() -> None:
    f = _failure("trace-mmap", {"buffer_kb": 8, "subbuf_kb": 4})
    text = c_reproducer.program(f, "t", _expect(_step("open", 0, i=0, path="trace-mmap")))
    assert 'trace_begin(4, "8\\n", "4\\n");' in text
    assert 'trace_end("12\\n");' in text  # resized once nothing is mapped
    assert "perf_begin" not in text.split("int main")[1]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc on this host")
@pytest.mark.parametrize("kept", KEPT, ids=lambda p: p.name.split("--")[0])
def test_the_program_of_a_kept_failure_compiles(kept: Path, tmp_path: Path) -> None:
    shutil.copy(kept, tmp_path / kept.name)
    f = repro.kept_failure(kept.name.split("--")[0], tmp_path)
    assert f is not None
    source = tmp_path / "repro.c"
    source.write_text(c_reproducer.program(f, f.why, reproducer.expectations(f)))
    p = subprocess.run(["gcc", "-fsyntax-only", "-Wall", "-Werror", str(source)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]


# --- the text of every operation, byte for byte as before (see tests/unit/explore/conftest.py)

def rendered_c_steps(path: str) -> str:
    """Each step alone, judged with a VmPin check and without, the AUX areas found through
    the mappings made before them (as program() finds them)."""
    out: list[str] = []
    made: dict[int, tuple[int, bool]] = {}
    for e in expectations(STEPS[path]):
        for pin in (e["vm_pin_kb"] or 8, None):
            out += [f"// {e['step']} allowed={e['allowed']} pin={pin}",
                    *c_reproducer._c_step(e["step"], e["allowed"], pin, path, made), ""]
    return "\n".join(out + [f"// made {sorted(made.items())}"])


@pytest.mark.parametrize("path", ["pinning", "trace-mmap", "trace-remote"])
def test_the_cases_are_operations_the_model_knows(path: str) -> None:
    """Every operation of the issue-41 tables is among the cases; one added later is held to
    its forms by tests/unit/probes/test_explore_ops.py, which draws it from the model."""
    assert {s["op"] for s in STEPS[path]} <= model_ops(path)


@pytest.mark.parametrize("path", ["pinning", "trace-mmap", "trace-remote"])
def test_every_operation_renders_as_it_did(path: str) -> None:
    same_as_kept(f"c-steps-{path}.txt", rendered_c_steps(path))


@pytest.mark.parametrize("path, who", [("pinning", "user"), ("pinning", "user+ipc_lock"),
                                       ("trace-mmap", "user"), ("trace-remote", "user")])
def test_a_whole_program_of_every_operation_renders_as_it_did(path: str, who: str,
                                                              tmp_path: Path) -> None:
    f = failure(path, who)
    text = c_reproducer.program(f, f"every operation of {path}", expectations(f.steps))
    same_as_kept(f"repro-{path}-{who}.c", text)
    if shutil.which("gcc"):
        (tmp_path / "repro.c").write_text(text)
        p = subprocess.run(["gcc", "-fsyntax-only", "-Wall", "-Werror", str(tmp_path / "repro.c")],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr[-2000:]
