"""The schedule plugin: which tests a `-j` worker gets, so the run ends when its longest work
unit does, not when a long file started last does.

pytest-xdist's `loadfile` hands out whole test files in collection order: here the one long
test (a persistent buffer across a warm reboot, a boot of its own) was collected near the end
and the two costliest files ran whole on one worker each. This plugin orders the costliest
files first (in every mode: tests do not depend on their order) and, under xdist, splits each
file of SPLIT into that many contiguous parts (or each test), each a work unit of its own. A
worker keeps one guest per machine profile whatever units it runs, so a part costs at most a
restore more.
The costs are those of docs/results (a warm trixie-cloud run: seconds of test time per file).
"""
from __future__ import annotations

from pathlib import Path

import pytest

# Test files, costliest first (seconds of test time in a warm run), run before the others.
FIRST = ("test_trace_persistent.py", "test_pinning.py", "test_perf_aux.py", "test_trace_mmap.py",
         "test_perf_ring.py")
# Files split into this many work units under xdist; EACH: every test a unit of its own (the
# kernel's selftests: one ftracetest case is 10 s to 3.4 min under TCG, and cases share
# nothing but the guest).
EACH = 0
SPLIT = {"test_pinning.py": 2, "test_perf_aux.py": 2, "test_kselftest.py": EACH}


def order(items: list[pytest.Item]) -> list[pytest.Item]:
    """Items of FIRST's files first, in FIRST's order; the rest after, as collected."""
    rank = {name: i for i, name in enumerate(FIRST)}
    return sorted(items, key=lambda it: rank.get(Path(it.nodeid.split("::")[0]).name,
                                                 len(FIRST)))  # sorted() is stable


def scopes(nodeids: list[str]) -> dict[str, str]:
    """Each node id's work unit: its file, or for a file of SPLIT, its file and its part
    (contiguous runs of the file's tests, as even in count as they come)."""
    by_file: dict[str, list[str]] = {}
    for nodeid in nodeids:
        by_file.setdefault(nodeid.split("::")[0], []).append(nodeid)
    out: dict[str, str] = {}
    for path, ids in by_file.items():
        parts = SPLIT.get(Path(path).name, 1) or len(ids)
        for i, nodeid in enumerate(ids):
            out[nodeid] = path if parts == 1 else f"{path}::part{i * parts // len(ids) + 1}"
    return out


class Schedule:
    """Orders the collection; under xdist, makes the controller's scheduler."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        items[:] = order(items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: object) -> object:
        if config.getoption("dist", None) != "loadfile":
            return None  # a --dist the user chose
        from xdist.scheduler import LoadFileScheduling

        class CostScheduling(LoadFileScheduling):
            """loadfile, in collection order (the costliest first), with SPLIT's parts."""

            def __init__(self, config: pytest.Config, log: object = None) -> None:
                super().__init__(config, log)  # type: ignore[arg-type]
                config.option.loadscopereorder = False  # the collection's order is the cost's
                self._scopes: dict[str, str] = {}

            def schedule(self) -> None:
                if self.collection is None and self.registered_collections:
                    self._scopes = scopes(list(next(iter(
                        self.registered_collections.values()))))
                super().schedule()

            def _split_scope(self, nodeid: str) -> str:
                return self._scopes.get(nodeid) or super()._split_scope(nodeid)

        return CostScheduling(config, log)
