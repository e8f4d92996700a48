"""A coverage report folder: per source of execution (suite, explorer, selftests) and their
union, the guests' counters summed (merge.py), read by gcovr into coverage.json and an HTML
report (gcovr.py), and summary.txt's table per function (functions.py)."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from harness import progress
from harness.probe_modules import probe_module
from harness.coverage import functions, gcovr, merge

log = logging.getLogger(__name__)

UNION = "union"


@dataclass(frozen=True)
class Source:
    """A source of execution: its name and the run folders its guests dumped into."""
    name: str
    runs: tuple[Path, ...]


@dataclass
class Coverage:
    """What a report found: per source its functions, the guests lost, sources with no data."""
    functions: dict[str, dict[tuple[str, str], functions.Function]] = field(default_factory=dict)
    guests: dict[str, int] = field(default_factory=dict)
    edges: dict[str, int] = field(default_factory=dict)  # arc counters not zero, all guests
    lost: dict[str, tuple[str, ...]] = field(default_factory=dict)
    empty: list[str] = field(default_factory=list)


def write(out: Path, sources: list[Source], source_root: Path, files: tuple[str, ...],
          title: str) -> Coverage:
    """Each source's and the union's coverage.json and html/ under out/<source>/, and
    out/summary.txt. A source none of whose guests left data is listed, not an error."""
    cov = Coverage()
    tracefiles: list[Path] = []
    for s in sources:
        dumps = merge.find(list(s.runs))
        cov.guests[s.name], cov.lost[s.name] = len(dumps.folders), dumps.lost
        if not dumps.folders:
            cov.empty.append(s.name)
            continue
        d = out / s.name
        d.mkdir(parents=True, exist_ok=True)
        with progress.step(f"coverage of the {s.name}: {len(dumps.folders)} guest(s)"):
            objects = merge.merge(dumps.folders, d / "gcda")
            cov.edges[s.name] = edges(objects)
            t = gcovr.tracefile(objects, source_root, files, d / "coverage.json")
            gcovr.html(t, source_root, d / "html", f"{title}: {s.name}")
        tracefiles.append(t)
        cov.functions[s.name] = functions.read(json.loads(t.read_text()))
    if len(tracefiles) > 1:
        d = out / UNION
        d.mkdir(parents=True, exist_ok=True)
        with progress.step("coverage of their union"):
            t = gcovr.union(tracefiles, source_root, d / "coverage.json")
            gcovr.html(t, source_root, d / "html", f"{title}: {UNION}")
        cov.functions[UNION] = functions.read(json.loads(t.read_text()))
    (out / "summary.txt").write_text(summary(cov, title))
    return cov


def edges(objects: Path) -> int:
    """The edges (arc counters) the merged counters say ran: the explorer's compass,
    counted the way the guest counts them (probes/gcov_edges.py)."""
    read = probe_module("gcov_edges").edges_of
    return sum(len(read(p.read_bytes())) for p in objects.rglob("*.gcda"))


def summary(cov: Coverage, title: str, mapping_only: bool = False) -> str:
    """summary.txt: the guests per source, the table per function, the mapping functions'
    unrun lines; with `mapping_only` the table keeps the mapping functions (the screen's)."""
    lines = [title, ""]
    for name, n in cov.guests.items():
        lost = cov.lost.get(name, ())
        lines.append(f"{name}: {n} guest(s) counted"
                     + (f", {cov.edges[name]} edges run" if name in cov.edges else "")
                     + (f", {len(lost)} lost: " + "; ".join(lost) if lost else ""))
    lines.append("")
    if cov.functions:
        lines.append("lines run/total, branches run/total; * a mapping function "
                     "(harness/coverage/functions.py MAPPING)")
        lines.append(functions.table(cov.functions, mapping_only))
        last = list(cov.functions)[-1]  # the union when there are several sources
        lines += [f"lines of the mapping functions the {last} did not run:",
                  functions.not_run(cov.functions[last])]
    return "\n".join(lines) + "\n"
