"""The kill table (harness/mutate/table.py): its totals line, a row per mutant with its rule,
and with --whole-suite what a mutant cost against the unmutated kernel."""
from __future__ import annotations

from dataclasses import asdict

from harness.mutate.outcomes import (KILLED, NOT_BOOTED, NOT_BUILT, SURVIVED, ExploreRun,
                                     MutantResult, totals)
from harness.mutate.table import cost_line, render


def test_the_table_has_a_row_per_mutant_and_the_kill_rate_of_those_judged() -> None:
    rs = [MutantResult(str(i), "f", "r", o) for i, o in
          enumerate([KILLED, KILLED, KILLED, SURVIVED, NOT_BUILT, NOT_BOOTED])]
    doc = {"kernel": "k", "release": "6.12.107", "selection": None, "wall_s": 600,
           "unmutated": {"counts": {"passed": 3}, "build_s": 300, "run_s": 60},
           "totals": totals(rs), "mutants": [dict(vars(r)) for r in rs]}
    text = render(doc)
    assert "killed 3 of 4 judged (75%); survived 1; not built 1; not booted 1" in text
    assert text.count("\n    f: r") == 6


def test_the_kernels_own_selftests_get_their_own_line() -> None:
    rs = [MutantResult("001-a", "f", "r", KILLED, selftest_killers=["t[ring-buffer/x]"]),
          MutantResult("002-b", "f", "r", SURVIVED, selftest_killers=[])]
    doc = {"kernel": "k", "release": "6.12", "selection": "mmap", "wall_s": 60,
           "unmutated": {"counts": {"passed": 3}, "build_s": 1, "run_s": 1},
           "totals": totals(rs), "mutants": [dict(vars(r)) for r in rs]}
    text = render(doc)
    assert "kernel selftests: killed it: ring-buffer/x" in text
    assert "the kernel's own selftests killed 1 of 2 they judged" in text


def test_whole_suite_run_reports_what_each_mutant_cost_against_the_unmutated_run() -> None:
    runs = {"001-a": 55.0, "002-b": 60.0, "003-c": 66.0, "004-d": 90.0, "005-e": 0.0}
    rs = [MutantResult(i, "f", "r", KILLED, run_s=s) for i, s in runs.items()]
    doc = {"kernel": "k", "release": "6.12.107", "selection": None, "whole_suite": True,
           "wall_s": 600, "unmutated": {"counts": {"passed": 3}, "build_s": 300, "run_s": 60},
           "totals": totals(rs), "mutants": [dict(vars(r)) for r in rs]}
    # 005 never ran (run_s 0: not built) and is no ratio; the median of 4 is the mean of two.
    line = cost_line(doc)
    assert line == ("run time against the unmutated kernel (60 s), 4 mutants: "
                    "0.92 / 1.05 / 1.50x (min / median / max); slowest 004-d 90 s; "
                    "over 1.3x: 004-d")
    assert line in render(doc)
    assert line not in render({**doc, "whole_suite": False})


def test_explores_in_two_modes_get_a_steered_against_blind_section() -> None:
    def run(seed: int, steered: bool, killed: bool, s: float) -> ExploreRun:
        return ExploreRun(seed, steered, killed, "x" if killed else "", s)

    rs = [MutantResult("030-a", "f", "r", KILLED, explored=[
              run(0, False, False, 40), run(0, True, True, 12), run(1, False, True, 30),
              run(1, True, True, 20)]),
          MutantResult("031-b", "f", "r", SURVIVED, explored=[
              run(0, False, False, 40), run(0, True, False, 40), run(1, False, False, 40),
              run(1, True, False, 40)])]
    doc = {"kernel": "k", "release": "7.2.13", "selection": "explore", "wall_s": 600,
           "unmutated": {"counts": {}, "build_s": 1, "run_s": 1},
           "totals": totals(rs), "mutants": [asdict(r) for r in rs]}
    text = render(doc)
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()
            if line.startswith("03") and "/" in line}
    assert rows == {"030-a": ["1/2,", "30", "2/2,", "16"], "031-b": ["0/2,", "-", "0/2,", "-"]}
    assert "blind: 1 mutants killed by some seed; 1 of 4 explores killed, in 30 / 30 / 30 s" \
        in text
    assert "steered: 1 mutants killed by some seed; 2 of 4 explores killed, in 12 / 16 / 20 s" \
        in text
    one = {**doc, "mutants": [asdict(MutantResult("030-a", "f", "r", KILLED,
                                                  explored=[run(1, False, True, 30)]))]}
    assert "by mode" not in render(one)
