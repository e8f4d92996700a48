"""Per-object kbuild lines (`<VAR>_<obj>.o := y`) added to a hard-link copy of a tree: how the
coverage variant profiles (GCOV_PROFILE) and the race variant instruments (KCSAN_SANITIZE) a
few files while the rest of the kernel is compiled as before."""
from __future__ import annotations

import logging
from pathlib import Path, PurePosixPath

from harness.errors import BuildError

log = logging.getLogger(__name__)


def makefile_lines(files: list[str], var: str, what: str) -> dict[str, list[str]]:
    """Per directory Makefile (tree-relative), the kbuild lines that set `var` for its files."""
    out: dict[str, list[str]] = {}
    for f in files:
        p = PurePosixPath(f)
        if p.suffix != ".c" or p.is_absolute() or ".." in p.parts:
            raise BuildError(f"{what}: {f!r} is not a tree-relative .c file")
        out.setdefault(str(p.parent / "Makefile"), []).append(f"{var}_{p.stem}.o := y")
    return out


def add(tree: Path, files: tuple[str, ...], var: str, mark: str, what: str) -> list[str]:
    """Add `var` lines for `files` to the Makefiles of `tree`, a hard-link copy: each Makefile
    is written as a new file (the link to the pristine tree is broken, never written through).
    Files the tree does not have are skipped. The Makefiles changed, tree-relative."""
    if not files:
        return []
    present = [f for f in files if (tree / f).is_file()]
    if absent := sorted(set(files) - set(present)):
        log.info("%s: this tree has no %s; left out", what, ", ".join(absent))
    if not present:
        raise BuildError(f"{what}: {tree} has none of the files named: {', '.join(files)}")
    changed = []
    for makefile, lines in makefile_lines(present, var, what).items():
        path = tree / makefile
        if not path.is_file():
            raise BuildError(f"{what}: {path} does not exist: cannot add {', '.join(lines)}")
        text = path.read_text()
        path.unlink()  # a hard link into the pristine tree: a new file, never an edit
        path.write_text(text.rstrip("\n") + f"\n\n{mark}\n" + "\n".join(lines) + "\n")
        changed.append(makefile)
    return changed
