"""./lab mutate: the mutant catalog, the kill rule, and applying and reverting a mutant on a
hard-link copy without disturbing the tree or make's view of it."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.commands import mutate
from harness.runs import child_run
from harness.commands.mutate import (KILLED, NOT_BOOTED, NOT_BUILT, NOT_RUN, SURVIVED,
                                     MutantError, MutantResult, Workspace)
from harness.errors import LabError

OLD = 1_600_000_000  # an mtime long before any build


# --- the catalog ----------------------------------------------------------------------------

def test_the_shipped_catalog_parses_and_each_mutant_names_its_rule() -> None:
    mutants = mutate.catalog()
    assert len(mutants) >= 30
    assert len({m.id for m in mutants}) == len(mutants)
    assert len({m.id.split("-", 1)[0] for m in mutants}) == len(mutants)
    for m in mutants:
        assert m.file in mutate.KERNEL_FILES, m.path
        assert len(m.rule) > 20 and "\n" not in m.rule, m.path
        assert m.tests is None or m.tests.strip(), m.path
        assert m.text.count("diff --git ") == 1, m.path
    assert {m.file for m in mutants} == set(mutate.KERNEL_FILES)
    assert sum(bool(m.fixes_revert) for m in mutants) >= 2


def _patch(path: Path, header: str, file: str = "kernel/events/core.c",
           old: str = "return -EINVAL;", new: str = "return 0;") -> Path:
    path.write_text(f"{header}---\ndiff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n"
                    f"@@ -2,3 +2,3 @@\n {{\n-\t{old}\n+\t{new}\n }}\n")
    return path


def test_a_mutant_without_a_rule_is_named(tmp_path: Path) -> None:
    p = _patch(tmp_path / "001-x.patch", "Subject: x\n\n")
    with pytest.raises(MutantError, match=r"001-x.patch: no `Rule:` line"):
        mutate.parse(p)


def test_a_mutant_of_another_file_is_named(tmp_path: Path) -> None:
    p = _patch(tmp_path / "002-y.patch", "Rule: something\n", file="mm/mmap.c")
    with pytest.raises(MutantError, match=r"002-y.patch: patches mm/mmap.c; a mutant patches "
                       r"one of kernel/events/core.c"):
        mutate.parse(p)


def test_headers_are_read_only_before_the_diff(tmp_path: Path) -> None:
    p = _patch(tmp_path / "003-z.patch", "Rule: perf_mmap(): a rule\nFixes-revert: abc123\n"
               "Tests: one or two\n")
    m = mutate.parse(p)
    assert (m.id, m.file, m.rule, m.fixes_revert, m.tests) == (
        "003-z", "kernel/events/core.c", "perf_mmap(): a rule", "abc123", "one or two")


def test_mutants_are_selected_by_number_glob_and_file() -> None:
    mutants = mutate.catalog()
    assert [m.id for m in mutate.select(mutants, "001")] == [mutants[0].id]
    assert mutate.select(mutants, None) == mutants
    by_file = mutate.select(mutants, "trace.c")
    assert by_file and all(m.file == "kernel/trace/trace.c" for m in by_file)
    assert mutate.select(mutants, "00[12]*") == mutants[:2]
    with pytest.raises(MutantError, match="--mutants nothing-like-this: matches no mutant"):
        mutate.select(mutants, "nothing-like-this")


# --- the kill rule ---------------------------------------------------------------------------

A, B, C = ("tests/kernel/test_a.py::test_one", "tests/kernel/test_a.py::test_two",
           "tests/kernel/test_b.py::test_three")
BOOTS = [{"cpus": 1, "memory_mb": 1024, "boot_s": 8.0, "accel": "tcg"}]


def _summary(*results: tuple[str, str, str], boots: list | None = None) -> dict:
    return {"boots": BOOTS if boots is None else boots,
            "results": [{"test": t, "outcome": o, "reason": r} for t, o, r in results]}


D = "tests/kernel/test_b.py::test_known"
BASELINE = child_run.of(_summary(
    (A, "passed", ""), (B, "failed", "AssertionError: broken already"), (C, "passed", ""),
    (D, "xfailed", "known kernel issue k")), 1)


def judge(summary: dict | None, no_guest: frozenset[str] | set[str] = frozenset()
          ) -> tuple[str, list[str], str]:
    """mutate.judge of a mutant's run with this summary.json and these tests without a
    guest."""
    return mutate.judge(BASELINE, child_run.of(summary, 1, no_guest))


def test_a_known_issue_test_that_fails_outside_its_symptom_kills_the_mutant() -> None:
    # xfailed unmutated: the known issue excused exactly its symptom; failed on the mutant:
    # something the known issue does not excuse broke.
    run = _summary((A, "passed", ""), (C, "passed", ""),
                   (D, "failed", "check resize: expected ok, got EBUSY"))
    assert judge(run) == (KILLED, [D], "test_known: check resize: expected ok, got EBUSY")
    assert judge(_summary((A, "passed", ""), (D, "xfailed", "known kernel issue k")))[0] \
        == SURVIVED


def test_a_test_that_passed_unmutated_and_fails_on_the_mutant_kills_it() -> None:
    run = _summary((A, "failed", "AssertionError: 1+3 pages accepted\nmore"), (B, "failed", ""),
                   (C, "passed", ""))
    outcome, killers, why = judge(run)
    assert (outcome, killers) == (KILLED, [A])
    assert why == "test_one: AssertionError: 1+3 pages accepted"


def test_a_test_that_failed_unmutated_never_kills() -> None:
    run = _summary((A, "passed", ""), (B, "failed", "x"), (C, "passed", ""))
    assert judge(run)[:2] == (SURVIVED, [])


def test_a_test_the_unmutated_run_did_not_run_never_kills() -> None:
    run = _summary(("tests/kernel/test_c.py::test_new", "failed", "x"))
    assert judge(run)[0] == SURVIVED


def test_a_flaky_failure_is_not_a_kill() -> None:
    run = _summary((A, "rerun", "guest died"), (A, "passed", ""))
    assert judge(run)[0] == SURVIVED


def test_a_failure_on_the_rerun_too_is_a_kill() -> None:
    run = _summary((A, "rerun", "first"), (A, "failed", "second"))
    assert judge(run)[:2] == (KILLED, [A])


def test_a_guest_that_did_not_boot_is_never_a_kill() -> None:
    run = _summary((A, "failed", "    | [ 1.0] Kernel panic"), (C, "failed", "x"), boots=[])
    assert judge(run, {"test_a::test_one", "test_b::test_three"})[0] == NOT_BOOTED
    # No boot at all, whatever the reasons say.
    assert judge(_summary((A, "failed", "x"), boots=[]))[0] in (KILLED, NOT_BOOTED)
    assert judge(run, {"test_a::test_one", "test_b::test_three"})[1] == []


def test_a_boot_failure_of_one_guest_does_not_kill_but_a_real_failure_does() -> None:
    run = _summary((A, "failed", "x"), (C, "failed", "AssertionError: y"))
    outcome, killers, _ = judge(run, {"test_a::test_one"})
    assert (outcome, killers) == (KILLED, [C])


def test_no_summary_is_not_run_and_no_test_selected_is_survived() -> None:
    assert judge(None)[0] == NOT_RUN
    assert judge(_summary(boots=[])) == (SURVIVED, [], "no test of the selection ran")
    # A mutated kernel that could not be prepared (./lab run's {"not_run": why}) ran nothing:
    # not judged, so not a survivor that would lower the kill rate.
    assert judge({"not_run": "kernel src: the build failed"}) == \
        (NOT_RUN, [], "not run: kernel src: the build failed")


def test_totals_rate_only_mutants_the_suite_could_judge() -> None:
    rs = [MutantResult(str(i), "f", "r", o) for i, o in
          enumerate([KILLED, KILLED, KILLED, SURVIVED, NOT_BUILT, NOT_BOOTED])]
    t = mutate.totals(rs)
    assert (t[KILLED], t[SURVIVED], t[NOT_BUILT], t[NOT_BOOTED], t["judged"]) == (3, 1, 1, 1, 4)
    assert t["kill_rate"] == 0.75
    doc = {"kernel": "k", "release": "6.12.107", "selection": None, "wall_s": 600,
           "unmutated": {"counts": {"passed": 3}, "build_s": 300, "run_s": 60},
           "totals": t, "mutants": [dict(vars(r)) for r in rs]}
    text = mutate.render(doc)
    assert "killed 3 of 4 judged (75%); survived 1; not built 1; not booted 1" in text
    assert text.count("\n    f: r") == 6


def test_whole_suite_run_reports_what_each_mutant_cost_against_the_unmutated_run() -> None:
    runs = {"001-a": 55.0, "002-b": 60.0, "003-c": 66.0, "004-d": 90.0, "005-e": 0.0}
    rs = [MutantResult(i, "f", "r", KILLED, run_s=s) for i, s in runs.items()]
    doc = {"kernel": "k", "release": "6.12.107", "selection": None, "whole_suite": True,
           "wall_s": 600, "unmutated": {"counts": {"passed": 3}, "build_s": 300, "run_s": 60},
           "totals": mutate.totals(rs), "mutants": [dict(vars(r)) for r in rs]}
    # 005 never ran (run_s 0: not built) and is no ratio; the median of 4 is the mean of two.
    line = mutate.cost_line(doc)
    assert line == ("run time against the unmutated kernel (60 s), 4 mutants: "
                    "0.92 / 1.05 / 1.50x (min / median / max); slowest 004-d 90 s; "
                    "over 1.3x: 004-d")
    assert line in mutate.render(doc)
    assert line not in mutate.render({**doc, "whole_suite": False})


# --- applying and reverting ------------------------------------------------------------------

CORE = "kernel/events/core.c"


def _tree(root: Path) -> Path:
    tree = root / "linux"
    for rel, text in ((CORE, "int f(void)\n{\n\treturn -EINVAL;\n}\n"),
                      ("kernel/trace/trace.c", "int g;\n"), ("Makefile", "VERSION = 6\n")):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
        os.utime(tree / rel, (OLD, OLD))
    return tree


@pytest.fixture
def mutant(tmp_path: Path) -> mutate.Mutant:
    return mutate.parse(_patch(tmp_path / "001-f-returns-0.patch", "Rule: f() fails\n"))


def test_apply_patches_a_new_file_and_revert_restores_inode_and_mtime(
        tmp_path: Path, mutant: mutate.Mutant) -> None:
    tree = _tree(tmp_path)
    out = tmp_path / "out"
    (out / "kernel/events").mkdir(parents=True)
    (out / "kernel/events/core.o").write_text("object of the mutant")
    original = (tree / CORE).stat()
    with Workspace(tree, tmp_path / "cache").opened() as ws:
        src = ws.src
        other = (src / "kernel/trace/trace.c").stat()
        assert other.st_ino == (tree / "kernel/trace/trace.c").stat().st_ino  # a link
        with ws.applied(mutant, [out]):
            assert "return 0;" in (src / CORE).read_text()
            assert (src / CORE).stat().st_ino != original.st_ino  # a new file
            assert (tree / CORE).read_text().count("-EINVAL") == 1  # the tree is untouched
            assert (src / "kernel/trace/trace.c").stat().st_ino == other.st_ino
            assert ws.marker.exists()
        after = (src / CORE).stat()
        assert (after.st_ino, after.st_mtime_ns) == (original.st_ino, original.st_mtime_ns)
        assert "-EINVAL" in (src / CORE).read_text()
        assert not (out / "kernel/events/core.o").exists()  # make recompiles the original
        assert not ws.marker.exists()


def test_an_interrupt_inside_leaves_the_copy_reverted(tmp_path: Path,
                                                      mutant: mutate.Mutant) -> None:
    tree = _tree(tmp_path)
    with Workspace(tree, tmp_path / "cache").opened() as ws:
        with pytest.raises(KeyboardInterrupt), ws.applied(mutant, []):
            raise KeyboardInterrupt
        assert (ws.src / CORE).stat().st_ino == (tree / CORE).stat().st_ino
        assert (ws.src / CORE).stat().st_mtime == OLD


def test_a_mutant_that_does_not_apply_is_named_with_its_hunk(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    bad = mutate.parse(_patch(tmp_path / "007-stale.patch", "Rule: r\n",
                              old="return -ENOMEM;"))
    with Workspace(tree, tmp_path / "cache").opened() as ws:
        with pytest.raises(MutantError, match=r"mutant .*007-stale.patch does not apply") as e:
            with ws.applied(bad, []):
                pass
        assert "-\treturn -ENOMEM;" in str(e.value)
        assert (ws.src / CORE).stat().st_ino == (tree / CORE).stat().st_ino


def test_a_run_killed_with_a_mutant_applied_is_cleaned_up_next_time(
        tmp_path: Path, mutant: mutate.Mutant) -> None:
    tree = _tree(tmp_path)
    out = tmp_path / "out"
    ws = Workspace(tree, tmp_path / "cache")
    with ws.opened():
        (out / "kernel/events").mkdir(parents=True)
        (out / "kernel/events/core.o").write_text("mutant object")
        ws.marker.write_text(f'{{"mutant": "001", "paths": ["{CORE}"], "outs": ["{out}"]}}')
    with ws.opened():  # as a SIGKILLed run leaves it
        assert not (out / "kernel/events/core.o").exists()
        assert not ws.marker.exists()
        assert (ws.src / CORE).read_text() == (tree / CORE).read_text()


def test_two_runs_on_one_tree_are_refused(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    with Workspace(tree, tmp_path / "cache").opened():
        with pytest.raises(LabError, match="another ./lab mutate is using the tree"):
            with Workspace(tree, tmp_path / "cache").opened():
                pass


def test_the_kernels_own_selftests_are_judged_apart_from_ours() -> None:
    st = "tests/kernel/kselftest/test_kselftest.py::test_selftest[ring-buffer/map_test/x]"
    base = child_run.of(_summary((A, "passed", ""), (st, "passed", "")), 1)
    only_theirs = child_run.of(_summary((A, "passed", ""), (st, "failed", "not ok 1 x")), 1)
    assert mutate.judge(base, only_theirs)[:2] == (SURVIVED, [])
    assert mutate.selftest_killers(base, only_theirs) == [st]
    both = child_run.of(_summary((A, "failed", "y"), (st, "passed", "")), 1)
    assert mutate.judge(base, both)[:2] == (KILLED, [A])
    assert mutate.selftest_killers(base, both) == []
