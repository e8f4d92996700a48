"""The guests' .gcda dumps of one source of execution summed into one, with GCC's own
`gcov-tool merge` (counters added object by object), and paired with the build's .gcno notes,
which gcov needs beside each .gcda."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.errors import LabError

FOLDER = "gcov"  # a run's dumps: <report folder>/gcov/<guest> (harness/guest/gcov.py)
# Guests of a run that are the lab's, not the tests': the splat proof fires its own module.
NOT_COUNTED = {"splat-proof"}


@dataclass(frozen=True)
class Dumps:
    """The dumps of some runs: folders of .gcda files, and the guests that left none."""
    folders: tuple[Path, ...]
    lost: tuple[str, ...]  # "<guest>: why"


def find(report_dirs: list[Path]) -> Dumps:
    """Every guest's dump under these run folders (a -j run's workers, child runs included)."""
    folders: list[Path] = []
    lost: list[str] = []
    for r in report_dirs:
        for d in sorted(r.rglob(FOLDER)):
            if not d.is_dir() or NOT_COUNTED & set(d.relative_to(r).parts):
                continue
            for g in sorted(d.iterdir()):
                if g.is_dir() and not g.name.endswith(".part"):
                    folders.append(g)
                elif g.suffix == ".lost":
                    lost.append(f"{g.stem}: {g.read_text().strip()}")
    return Dumps(tuple(folders), tuple(lost))


def merge(folders: tuple[Path, ...], into: Path) -> Path:
    """The sum of the dumps' counters in `into` (made whole or not at all), each .gcda beside
    a link to its .gcno: the dumps keep the build folder's absolute path (/sys/kernel/debug/
    gcov mirrors it), where the notes still are."""
    if not folders:
        raise LabError("no gcov data to merge: no guest of these runs left any")
    tool = shutil.which("gcov-tool")
    if tool is None:
        raise LabError("gcov-tool is not installed (Debian package gcc): it sums the guests' "
                       "counters")
    scratch = Path(tempfile.mkdtemp(prefix=into.name + ".", dir=into.parent))
    try:
        acc = folders[0]
        for i, nxt in enumerate(folders[1:]):
            out = scratch / f"sum{i}"
            p = subprocess.run([tool, "merge", str(acc), str(nxt), "-o", str(out)],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise LabError(f"gcov-tool merge {acc} {nxt} failed: {p.stderr.strip()[-300:]}")
            if acc.parent == scratch:  # the previous sum, not a guest's dump
                shutil.rmtree(acc)
            acc = out
        final = scratch / "merged"
        shutil.copytree(acc, final)
        for gcda in final.rglob("*.gcda"):
            notes = Path("/") / gcda.relative_to(final).with_suffix(".gcno")
            if notes.exists():
                gcda.with_suffix(".gcno").symlink_to(notes)
        shutil.rmtree(into, ignore_errors=True)
        final.rename(into)
        return into
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
