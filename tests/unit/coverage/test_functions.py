"""summary.txt's per-function figures, read from gcovr's JSON."""
from __future__ import annotations

from harness.coverage import functions


def _trace(counts: dict[int, tuple[str, int, list[int]]]) -> dict:
    return {"files": [{"file": "kernel/events/core.c", "functions": [
        {"name": "perf_mmap", "lineno": 10}, {"name": "perf_event_init", "lineno": 1}],
        "lines": [{"line_number": n, "function_name": f, "count": c,
                   "branches": [{"count": b} for b in br]}
                  for n, (f, c, br) in counts.items()]}]}


def test_lines_and_branches_are_counted_per_function() -> None:
    fs = functions.read(_trace({1: ("perf_event_init", 1, []),
                                10: ("perf_mmap", 3, [1, 0]), 11: ("perf_mmap", 0, []),
                                12: ("perf_mmap", 2, [0, 0, 4])}))
    f = fs[("kernel/events/core.c", "perf_mmap")]
    assert f.line == 10
    assert f.figures == functions.Figures(lines_run=2, lines=3, branches_run=2, branches=5)


def test_excluded_lines_are_not_counted() -> None:
    t = _trace({10: ("perf_mmap", 0, [])})
    t["files"][0]["lines"][0]["gcovr/excluded"] = True
    assert functions.read(t) == {}


def test_the_table_puts_mapping_functions_first_with_totals() -> None:
    fs = functions.read(_trace({1: ("perf_event_init", 1, []), 10: ("perf_mmap", 0, [0])}))
    text = functions.table({"suite": fs})
    rows = text.splitlines()
    assert rows[1].startswith("perf_mmap *") and "0/1 0/1" in rows[1]
    assert rows[2].startswith("perf_event_init ") and "1/1 0/0" in rows[2]
    assert rows[-2].startswith("mapping functions (*)") and "(0.0%)" in rows[-2]
    assert rows[-1].startswith("all functions") and "1/2 0/1 (50.0%)" in rows[-1]


def test_a_function_one_source_did_not_reach_shows_a_dash() -> None:
    a = functions.read(_trace({10: ("perf_mmap", 1, [])}))
    b = functions.read(_trace({1: ("perf_event_init", 1, [])}))
    rows = functions.table({"suite": a, "explorer": b}).splitlines()
    assert rows[1].split()[-1] == "-"


def test_not_run_lists_the_missed_lines_of_mapping_functions_only() -> None:
    fs = functions.read(_trace({1: ("perf_event_init", 0, []), 10: ("perf_mmap", 0, []),
                                11: ("perf_mmap", 0, []), 12: ("perf_mmap", 1, []),
                                13: ("perf_mmap", 0, [])}))
    assert functions.not_run(fs) == "perf_mmap (kernel/events/core.c): 10-11,13\n"
