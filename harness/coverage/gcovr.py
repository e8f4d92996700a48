"""gcovr, the coverage tool the lab reads gcov's data with: gcov run on the merged counters
into one JSON tracefile per source of execution, tracefiles added up for the union, and the
annotated source as HTML (gcovr rather than lcov's genhtml: pure Python, installed with the
lab, JSON with per-line function names and branches, and tracefiles it can add)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from harness.errors import LabError


def _gcovr(args: list[str], what: str) -> None:
    cmd = [sys.executable, "-m", "gcovr", *args]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise LabError(f"{what}: gcovr failed ({p.returncode}): "
                       f"{(p.stderr or p.stdout).strip()[-500:]}")


def filters(source_root: Path, files: tuple[str, ...]) -> list[str]:
    """gcovr --filter arguments: only the profiled .c files, not the headers they inline."""
    out: list[str] = []
    for f in files:
        out += ["--filter", re.escape(str(source_root / f)) + "$"]
    return out


def tracefile(objects: Path, source_root: Path, files: tuple[str, ...], into: Path) -> Path:
    """coverage.json of the merged counters in `objects` (gcov's .gcda beside .gcno)."""
    # --include-internal-functions: gcovr drops functions named __* as the compiler's own
    # (and their lines with them), and the kernel names real ones so: __rb_map_vma().
    _gcovr(["--root", str(source_root), *filters(source_root, files),
            "--include-internal-functions", "--gcov-executable", "gcov", "--json-pretty",
            "--json", str(into), str(objects)],
           f"reading the counters in {objects}")
    return into


def union(tracefiles: list[Path], source_root: Path, into: Path) -> Path:
    """One tracefile adding up several (a line run by any of them is run)."""
    args = [a for t in tracefiles for a in ("--json-add-tracefile", str(t))]
    _gcovr(["--root", str(source_root), *args, "--json-pretty", "--json", str(into)],
           "adding up the tracefiles")
    return into


def html(tracefile: Path, source_root: Path, into: Path, title: str) -> Path:
    """The annotated source of every profiled file, lines and branches, one page each."""
    into.mkdir(parents=True, exist_ok=True)
    _gcovr(["--root", str(source_root), "--json-add-tracefile", str(tracefile),
            "--html-details", str(into / "index.html"), "--html-title", title],
           f"writing the HTML report of {tracefile}")
    return into / "index.html"
