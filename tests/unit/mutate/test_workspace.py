"""Applying and reverting a mutant on the workspace (harness/mutate/workspace.py), a hard-link
copy of the tree, without disturbing the tree or make's view of it; a run killed with a
mutant applied is cleaned up next time; two runs on one tree are refused."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.errors import LabError
from harness.kernels.mutants import Mutant, MutantError, parse
from harness.mutate.workspace import Workspace

OLD = 1_600_000_000  # an mtime long before any build


def _patch(path: Path, header: str, file: str = "kernel/events/core.c",
           old: str = "return -EINVAL;", new: str = "return 0;") -> Path:
    path.write_text(f"{header}---\ndiff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n"
                    f"@@ -2,3 +2,3 @@\n {{\n-\t{old}\n+\t{new}\n }}\n")
    return path


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
def mutant(tmp_path: Path) -> Mutant:
    return parse(_patch(tmp_path / "001-f-returns-0.patch", "Rule: f() fails\n"))


def test_apply_patches_a_new_file_and_revert_restores_inode_and_mtime(
        tmp_path: Path, mutant: Mutant) -> None:
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
                                                      mutant: Mutant) -> None:
    tree = _tree(tmp_path)
    with Workspace(tree, tmp_path / "cache").opened() as ws:
        with pytest.raises(KeyboardInterrupt), ws.applied(mutant, []):
            raise KeyboardInterrupt
        assert (ws.src / CORE).stat().st_ino == (tree / CORE).stat().st_ino
        assert (ws.src / CORE).stat().st_mtime == OLD


def test_a_mutant_that_does_not_apply_is_named_with_its_hunk(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    bad = parse(_patch(tmp_path / "007-stale.patch", "Rule: r\n",
                              old="return -ENOMEM;"))
    with Workspace(tree, tmp_path / "cache").opened() as ws:
        with pytest.raises(MutantError, match=r"mutant .*007-stale.patch does not apply") as e:
            with ws.applied(bad, []):
                pass
        assert "-\treturn -ENOMEM;" in str(e.value)
        assert (ws.src / CORE).stat().st_ino == (tree / CORE).stat().st_ino


def test_a_run_killed_with_a_mutant_applied_is_cleaned_up_next_time(
        tmp_path: Path, mutant: Mutant) -> None:
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
