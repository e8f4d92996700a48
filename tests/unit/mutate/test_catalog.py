"""The mutant catalog as `./lab mutate` reads it (harness/kernels/mutants.py): every shipped
mutant parses and names its rule, a malformed one is named, --mutants selects."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.kernels.mutants import KERNEL_FILES, MutantError, catalog, parse, select


def test_the_shipped_catalog_parses_and_each_mutant_names_its_rule() -> None:
    mutants = catalog()
    assert len(mutants) >= 30
    assert len({m.id for m in mutants}) == len(mutants)
    assert len({m.id.split("-", 1)[0] for m in mutants}) == len(mutants)
    for m in mutants:
        assert m.file in KERNEL_FILES, m.path
        assert len(m.rule) > 20 and "\n" not in m.rule, m.path
        assert m.tests is None or m.tests.strip(), m.path
        assert m.text.count("diff --git ") == 1, m.path
    assert {m.file for m in mutants} == set(KERNEL_FILES)
    assert sum(bool(m.fixes_revert) for m in mutants) >= 2


def _patch(path: Path, header: str, file: str = "kernel/events/core.c",
           old: str = "return -EINVAL;", new: str = "return 0;") -> Path:
    path.write_text(f"{header}---\ndiff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n"
                    f"@@ -2,3 +2,3 @@\n {{\n-\t{old}\n+\t{new}\n }}\n")
    return path


def test_a_mutant_without_a_rule_is_named(tmp_path: Path) -> None:
    p = _patch(tmp_path / "001-x.patch", "Subject: x\n\n")
    with pytest.raises(MutantError, match=r"001-x.patch: no `Rule:` line"):
        parse(p)


def test_a_mutant_may_patch_any_c_file_of_the_tree(tmp_path: Path) -> None:
    # A user's mutant is theirs to make (issue 44: 7.x keeps the snapshot's arming in
    # kernel/trace/trace_snapshot.c, which no catalog mutant patched then).
    p = _patch(tmp_path / "002-y.patch", "Rule: something\n", file="mm/mmap.c")
    assert parse(p).file == "mm/mmap.c"


def test_a_mutant_of_a_header_is_named(tmp_path: Path) -> None:
    # Reverting drops the patched file's one object; a header's includers would stay mutated.
    p = _patch(tmp_path / "002-h.patch", "Rule: something\n", file="include/linux/mm.h")
    with pytest.raises(MutantError, match=r"002-h.patch: patches include/linux/mm.h; a mutant "
                       r"patches one C file \(.c\) of the tree"):
        parse(p)


def test_a_mutant_of_two_files_is_named(tmp_path: Path) -> None:
    p = _patch(tmp_path / "002-t.patch", "Rule: something\n")
    p.write_text(p.read_text() + _patch(tmp_path / "other", "", file="mm/mmap.c")
                 .read_text().split("---\n", 1)[1])
    with pytest.raises(MutantError, match=r"002-t.patch: patches kernel/events/core.c, "
                       r"mm/mmap.c; a mutant patches one C file"):
        parse(p)


def test_headers_are_read_only_before_the_diff(tmp_path: Path) -> None:
    p = _patch(tmp_path / "003-z.patch", "Rule: perf_mmap(): a rule\nFixes-revert: abc123\n"
               "Tests: one or two\n")
    m = parse(p)
    assert (m.id, m.file, m.rule, m.fixes_revert, m.tests) == (
        "003-z", "kernel/events/core.c", "perf_mmap(): a rule", "abc123", "one or two")


def test_mutants_are_selected_by_number_glob_and_file() -> None:
    mutants = catalog()
    assert [m.id for m in select(mutants, "001")] == [mutants[0].id]
    assert select(mutants, None) == mutants
    by_file = select(mutants, "trace.c")
    assert by_file and all(m.file == "kernel/trace/trace.c" for m in by_file)
    assert select(mutants, "00[12]*") == mutants[:2]
    with pytest.raises(MutantError, match="--mutants nothing-like-this: matches no mutant"):
        select(mutants, "nothing-like-this")
