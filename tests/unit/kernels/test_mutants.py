"""The mutant catalog with a patch per tree (harness/kernels/mutants.py): variants are found
next to their mutant, the one that applies to a tree is used (the tree's own version first),
and a mutant with none for the tree is an error naming it and the tree, never a silent drop."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from harness import paths
from harness import cache
from harness.kernels import mutants
from harness.kernels.mutants import BASE_TREE, MutantError

REPO = paths.REPO

FILE = "kernel/events/core.c"
OLD = "int f(void)\n{\n\treturn -EINVAL;\n}\n"   # the code of the catalog's base tree
NEW = "int f(void)\n{\n\treturn -EPERM;\n}\n"    # the same function on the "newer" tree


def _diff(old: str, new: str) -> str:
    return (f"diff --git a/{FILE} b/{FILE}\n--- a/{FILE}\n+++ b/{FILE}\n"
            f"@@ -1,4 +1,4 @@\n int f(void)\n {{\n-\t{old}\n+\t{new}\n }}\n")


def _tree(root: Path, code: str, version: tuple[int, int] | None = None) -> Path:
    """A tiny kernel tree: one file, maybe a top Makefile, in a git repository (as the cached
    trees are not, but a repository must not change how the diff is checked)."""
    (root / FILE).parent.mkdir(parents=True)
    (root / FILE).write_text(code)
    if version:
        (root / "Makefile").write_text(f"# SPDX\nVERSION = {version[0]}\n"
                                       f"PATCHLEVEL = {version[1]}\nSUBLEVEL = 13\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A catalog of one mutant with a base (6.12) diff and a 7.2 variant."""
    cat = tmp_path / "mutants"
    cat.mkdir()
    (cat / "001-f-returns-0.patch").write_text(
        "Subject: [MUTANT] f returns 0\n\nRule: f(): fails with an error\nTests: f_fails\n"
        "---\n" + _diff("return -EINVAL;", "return 0;"))
    (cat / "001-f-returns-0.7.2.patch").write_text(
        "made against linux-source-7.2 7.2.13-1\n\n" + _diff("return -EPERM;", "return 0;"))
    return cat


def test_a_variant_is_read_with_its_mutant_and_does_not_count_as_one(folder: Path) -> None:
    [m] = mutants.catalog(folder)
    assert m.id == "001-f-returns-0"
    assert (m.rule, m.tests, m.variant) == ("f(): fails with an error", "f_fails", BASE_TREE)
    assert [(v.label, v.path.name, v.file) for v in m.variants] == [
        (BASE_TREE, "001-f-returns-0.patch", FILE), ("7.2", "001-f-returns-0.7.2.patch", FILE)]


def test_the_variant_that_applies_to_the_tree_is_chosen(folder: Path, tmp_path: Path) -> None:
    [m] = mutants.catalog(folder)
    new = _tree(tmp_path / "new", NEW)   # no Makefile: chosen by what applies alone
    old = _tree(tmp_path / "old", OLD)
    on_new = mutants.for_tree(m, new)
    assert (on_new.variant, on_new.path.name, on_new.id) == ("7.2", "001-f-returns-0.7.2.patch",
                                                             m.id)
    assert "return -EPERM;" in on_new.text and on_new.rule == m.rule
    assert mutants.for_tree(m, old).variant == BASE_TREE


def test_the_variant_made_for_the_trees_version_is_tried_first(folder: Path,
                                                               tmp_path: Path) -> None:
    """Both diffs apply (the code did not move): the tree's own one is used."""
    (folder / "001-f-returns-0.7.2.patch").write_text(_diff("return -EINVAL;", "return 1;"))
    [m] = mutants.catalog(folder)
    assert mutants.for_tree(m, _tree(tmp_path / "t72", OLD, (7, 2))).variant == "7.2"
    assert mutants.for_tree(m, _tree(tmp_path / "t612", OLD, (6, 12))).variant == BASE_TREE
    assert mutants.for_tree(m, _tree(tmp_path / "t73", OLD, (7, 3))).variant == BASE_TREE


def test_a_mutant_with_no_patch_for_the_tree_is_named_with_the_tree(folder: Path,
                                                                    tmp_path: Path) -> None:
    (folder / "002-g.patch").write_text(
        "Rule: f(): something else\nTrees: 6.12 only; 7.2 has no such check\n---\n"
        + _diff("return -EINVAL;", "return 2;"))
    cat = mutants.catalog(folder)
    tree = _tree(tmp_path / "new", NEW, (7, 2))
    with pytest.raises(MutantError) as e:
        mutants.for_tree_all(cat, tree, shown_as=Path("/trees/linux-7.2"))
    text = str(e.value)
    assert "1 mutant(s) have no patch for the tree /trees/linux-7.2: 002-g" in text
    assert "mutant 002-g has no patch for the tree /trees/linux-7.2 (7.2): made for 6.12" in text
    assert "002-g.patch at kernel/events/core.c:1" in text and "rejected hunk:" in text
    assert "Trees: 6.12 only; 7.2 has no such check" in text
    assert "rebase the mutant on this tree, or leave it out with --mutants" in text
    assert "001-f-returns-0" not in text.splitlines()[0]


def test_a_variant_carries_no_header_and_needs_its_mutant(folder: Path) -> None:
    (folder / "001-f-returns-0.7.2.patch").write_text("Rule: another rule\n"
                                                      + _diff("return -EPERM;", "return 0;"))
    with pytest.raises(MutantError, match=r"001-f-returns-0.7.2.patch: has a Rule: header"):
        mutants.catalog(folder)
    (folder / "001-f-returns-0.7.2.patch").unlink()
    (folder / "009-orphan.7.2.patch").write_text(_diff("return -EPERM;", "return 0;"))
    with pytest.raises(MutantError, match=r"009-orphan.7.2.patch: there is no 009-orphan.patch"):
        mutants.catalog(folder)


def test_select_by_file_sees_the_variants_file(folder: Path) -> None:
    cat = mutants.catalog(folder)
    assert mutants.select(cat, "core.c") == cat


def test_a_mutant_since_a_newer_tree_is_left_out_by_name_on_an_older_one(folder: Path,
                                                                          tmp_path: Path) -> None:
    (folder / "002-g-new-in-7.patch").write_text(
        "Subject: [MUTANT] g\n\nRule: g(): 7.x only\nSince: 7.2\n---\n"
        + _diff("return -EPERM;", "return 1;"))
    cat = mutants.catalog(folder)
    new = next(m for m in cat if m.id == "002-g-new-in-7")
    assert (new.since, new.variant, new.variants[0].label) == ("7.2", "7.2", "7.2")
    old_tree, new_tree = _tree(tmp_path / "o", OLD, (6, 12)), _tree(tmp_path / "n", NEW, (7, 2))
    kept, left = mutants.since_split(cat, old_tree)
    assert [m.id for m in kept] == ["001-f-returns-0"]
    assert left == ["002-g-new-in-7: left out on this 6.12 tree: its code is new in 7.2 (Since:)"]
    kept, left = mutants.since_split(cat, new_tree)
    assert len(kept) == 2 and not left
    assert [m.variant for m in mutants.for_tree_all(kept, new_tree)] == ["7.2", "7.2"]


def test_since_must_name_a_tree_version(folder: Path) -> None:
    (folder / "002-g.patch").write_text("Rule: g\nSince: seven\n---\n"
                                        + _diff("return -EPERM;", "return 1;"))
    with pytest.raises(MutantError, match="Since: 'seven'; expected a tree version"):
        mutants.catalog(folder)


def test_the_tree_version_is_read_from_the_top_makefile(tmp_path: Path) -> None:
    assert mutants.tree_version(_tree(tmp_path / "a", OLD, (7, 2))) == "7.2"
    assert mutants.tree_version(_tree(tmp_path / "b", OLD)) is None


def test_every_variant_of_the_shipped_catalog_parses() -> None:
    cat = mutants.catalog()
    assert len(cat) >= 45
    for m in cat:
        assert m.variants[0].label == (m.since or BASE_TREE) and m.variants[0].path == m.path
        for v in m.variants:
            assert v.file in mutants.KERNEL_FILES, v.path
            assert v.text.count("diff --git ") == 1, v.path


def _cached_trees() -> list[Path]:
    """The unpacked trees of the cache that lab.yaml's build kernels pin (the mutants are made
    for those; ./lab run --selftests also unpacks a Debian kernel's own, e.g. 6.12.117)."""
    pinned = set(re.findall(r"package: (linux-source-[\d.]+), version: ([^}\s]+)\}",
                            (REPO / "lab.yaml").read_text()))
    return sorted(t for t in cache.Layout(cache.cache_root()).trees().glob(
        "linux-source-*_*/linux-source-*") if tuple(t.parent.name.split("_", 1)) in pinned)


@pytest.mark.parametrize("tree", _cached_trees() or [None], ids=lambda t: t.parent.name if t
                         else "no-cached-tree")
def test_every_shipped_mutant_has_a_patch_for_each_cached_tree(tree: Path | None) -> None:
    """On each unpacked Debian tree of the cache lab.yaml pins (6.12.107, 7.2.13), every mutant
    has a variant that applies: `git apply --check` only reads the tree."""
    if tree is None:
        pytest.skip("no linux-source tree unpacked in the cache")
    kept, newer = mutants.since_split(mutants.catalog(), tree)
    assert len(mutants.for_tree_all(kept, tree)) >= 45
    assert all("(Since:)" in line for line in newer)
