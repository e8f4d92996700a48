"""The lines of a C function, quoted from a kernel tree for a report: found by its definition
line, ended by the first closing brace in column 0, as the kernel's coding style writes them."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import LabError


@dataclass(frozen=True)
class Quote:
    file: str        # relative to the tree, e.g. kernel/events/core.c
    function: str
    first_line: int  # 1-based
    lines: tuple[str, ...]

    def text(self) -> str:
        width = len(str(self.first_line + len(self.lines)))
        return "\n".join(f"{self.first_line + i:>{width}}  {line}"
                         for i, line in enumerate(self.lines))


def function(source: str, name: str) -> tuple[int, list[str]] | None:
    """(1-based first line, lines) of the definition of `name` in C source, or None. The
    definition is a line naming `name(` that is not a statement (no ';' before the body) and
    whose body opens in column 0 at or after it."""
    lines = source.splitlines()
    head = re.compile(rf"^(?![ \t#]).*\b{re.escape(name)}\(")
    for i, line in enumerate(lines):
        if not head.match(line) or line.rstrip().endswith(";"):
            continue
        j = i
        while j < len(lines) and lines[j] != "{":
            if lines[j].rstrip().endswith(";"):
                break
            j += 1
        if j >= len(lines) or lines[j] != "{":
            continue
        end = next((k for k in range(j, len(lines)) if lines[k] == "}"), None)
        if end is None:
            return None
        start = i
        while start > 0 and lines[start - 1] and not lines[start - 1].startswith(("}", "#")) \
                and not lines[start - 1].rstrip().endswith((";", "*/")):
            start -= 1   # a return type on the line before: "static int\nfoo(...)"
        return start + 1, lines[start:end + 1]
    return None


def quote(tree: Path, where: str) -> Quote:
    """`where` ("kernel/events/core.c:perf_mmap_rb") quoted from `tree`; LabError naming the
    file or the function when the tree does not have it."""
    rel, name = where.rsplit(":", 1)
    path = tree / rel
    try:
        found = function(path.read_text(errors="replace"), name)
    except OSError as e:
        raise LabError(f"cannot quote {where}: {path}: {e.strerror or e}") from None
    if found is None:
        raise LabError(f"cannot quote {where}: no definition of {name}() in {path}")
    return Quote(rel, name, found[0], tuple(found[1]))
