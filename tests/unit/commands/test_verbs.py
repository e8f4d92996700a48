"""A verb module parses and dispatches: it never imports another verb (what a verb does lives
in a layer below harness/commands, where any verb can reach it); options is shared."""
from __future__ import annotations

import ast
from pathlib import Path

from harness import cli, paths

COMMANDS = paths.REPO / "harness" / "commands"
SHARED = {"options", "__init__"}
VERB_MODULES = {v.replace("-", "_") for v in cli.VERBS}


def verb_imports(path: Path) -> list[str]:
    """The verb modules `path` imports (harness.commands.X, or X from harness.commands)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["harness", "commands"] and len(parts) > 2 \
                    and parts[2] not in SHARED and parts[2] != path.stem:
                found.append(parts[2])
    return sorted(set(found))


def test_the_check_sees_both_import_forms(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("from harness.commands import options, nightly\nimport harness.commands.ssh\n"
                 "from harness.commands.boot import main\n")
    assert verb_imports(f) == ["boot", "nightly", "ssh"]


def test_every_module_of_harness_commands_is_a_verb_or_shared() -> None:
    stray = {p.stem for p in COMMANDS.glob("*.py")} - VERB_MODULES - SHARED
    assert not stray, f"modules of harness/commands/ that are no verb: {sorted(stray)}"


def test_no_verb_imports_another_verb() -> None:
    found = {p.name: verb_imports(p) for p in sorted(COMMANDS.glob("*.py"))}
    assert {f: v for f, v in found.items() if v} == {}
