"""The schedule plugin (issue 31 §1): the costliest files first, the longest split in parts."""
from __future__ import annotations

from types import SimpleNamespace

from harness.pytest_plugin import schedule


def _ids(path: str, n: int) -> list[str]:
    return [f"tests/kernel/{path}::test_{i}" for i in range(n)]


def test_costliest_files_run_first_and_the_rest_keep_their_order() -> None:
    items = [SimpleNamespace(nodeid=i) for i in
             _ids("test_capabilities.py", 2) + _ids("test_perf_aux.py", 2) +
             _ids("test_explore_replay.py", 1) + _ids("test_trace_persistent.py", 1)]
    got = [i.nodeid.split("/")[-1] for i in schedule.order(items)]  # type: ignore[arg-type]
    assert got == ["test_trace_persistent.py::test_0", "test_perf_aux.py::test_0",
                   "test_perf_aux.py::test_1", "test_capabilities.py::test_0",
                   "test_capabilities.py::test_1", "test_explore_replay.py::test_0"]


def test_a_split_file_becomes_contiguous_parts_and_others_stay_whole() -> None:
    ids = _ids("test_pinning.py", 5) + _ids("test_perf_ring.py", 3)
    s = schedule.scopes(ids)
    parts = [s[i].rsplit("::", 1)[-1] for i in ids[:5]]
    assert parts == ["part1", "part1", "part1", "part2", "part2"]
    assert {s[i] for i in ids[5:]} == {"tests/kernel/test_perf_ring.py"}


def test_the_kernels_selftests_are_a_unit_each_so_workers_share_the_slow_ftrace_cases() -> None:
    ids = [f"tests/kernel/kselftest/test_kselftest.py::test_selftest[ftrace/{c}]"
           for c in ("remotes/trace", "remotes/reset", "00basic/snapshot")]
    s = schedule.scopes(ids)
    assert len({s[i] for i in ids}) == 3
