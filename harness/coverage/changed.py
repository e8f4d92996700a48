"""The lines a patch series adds or changes, and whether a run executed each: what `./lab
review --coverage` tells a reviewer. Line numbers are the patched tree's, found by comparing
each touched file in the base and patched trees (a series' later patches move the lines of
its earlier ones), so they match the counters gcov read off the patched kernel."""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.coverage import functions

SOURCE_SUFFIXES = (".c", ".h")


def changed_lines(base: Path, patched: Path, files: set[str]) -> dict[str, set[int]]:
    """Per C file the series touches, the patched file's lines it added or replaced."""
    out: dict[str, set[int]] = {}
    for f in sorted(files):
        if not f.endswith(SOURCE_SUFFIXES) or not (patched / f).is_file():
            continue
        old = (base / f).read_text(errors="replace").splitlines() if (base / f).is_file() else []
        new = (patched / f).read_text(errors="replace").splitlines()
        lines: set[int] = set()
        for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, old, new,
                                                          autojunk=False).get_opcodes():
            if tag in ("replace", "insert"):
                lines.update(range(j1 + 1, j2 + 1))
        if lines:
            out[f] = lines
    return out


@dataclass
class Judged:
    """The changed lines that are code (gcov has a counter for them), run or not; the rest
    (comments, braces, declarations) are not counted."""
    run: dict[str, list[int]] = field(default_factory=dict)
    not_run: dict[str, list[int]] = field(default_factory=dict)
    unprofiled: list[str] = field(default_factory=list)  # changed files no counter covers
    changed: int = 0  # every added or replaced line, code or not

    @property
    def code_lines(self) -> int:
        return sum(map(len, self.run.values())) + sum(map(len, self.not_run.values()))

    @property
    def missed(self) -> int:
        return sum(map(len, self.not_run.values()))

    def verdict(self, who: str = "the suite") -> str:
        """One line for the review's verdict."""
        rest = self.changed - self.code_lines
        other = f" ({rest} other changed line{'s' if rest != 1 else ''}: comments, braces, " \
            "declarations or unprofiled files)" if rest > 0 else ""
        if not self.code_lines:
            return f"coverage: no changed line is code gcov counts ({who} cannot be judged on it)"
        if not self.missed:
            lines = "the one changed line" if self.code_lines == 1 else \
                f"all {self.code_lines} changed lines"
            return f"coverage: {who} executed {lines} of code{other}"
        where = "; ".join(f"{f}:{functions.ranges(ls)}" for f, ls in self.not_run.items())
        return (f"coverage: {who} did not execute {self.missed} of the {self.code_lines} changed "
                f"lines of code: {where}{other}")

    def as_json(self) -> dict[str, Any]:
        return {"changed_lines": self.changed, "code_lines": self.code_lines,
                "missed": self.missed,
                "run": self.run, "not_run": self.not_run, "unprofiled": self.unprofiled}


def judge(changed: dict[str, set[int]], tracefile: dict[str, Any]) -> Judged:
    """Each changed line against gcovr's JSON of the patched kernel's run."""
    counts: dict[str, dict[int, int]] = {}
    for f in tracefile.get("files", []):
        per = counts.setdefault(f["file"], {})
        for ln in f.get("lines", []):
            if not ln.get("gcovr/excluded") and not ln.get("gcovr/noncode"):
                per[ln["line_number"]] = per.get(ln["line_number"], 0) + ln["count"]
    j = Judged(changed=sum(map(len, changed.values())))
    for f, lines in changed.items():
        if f not in counts:
            j.unprofiled.append(f)
            continue
        run = sorted(n for n in lines if counts[f].get(n, 0) > 0)
        missed = sorted(n for n in lines if n in counts[f] and counts[f][n] == 0)
        if run:
            j.run[f] = run
        if missed:
            j.not_run[f] = missed
    return j
