"""Per function figures (lines and branches run / total) read from gcovr's JSON, and the
table of summary.txt: the mapping functions (issue 42's list) first, by source of execution."""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

# The mapping paths' functions, as fnmatch patterns, in the table's order: the perf ring
# buffer and AUX mapping, the tracefs mapping, the snapshot and resize refusals, then the
# 7.x persistent and remote paths.
MAPPING: tuple[str, ...] = (
    "perf_mmap*", "perf_mmap_close", "perf_mmap_account", "perf_mmap_calc_limits",
    "rb_alloc_aux", "__rb_free_aux", "rb_free_aux", "perf_output_begin*",
    "perf_aux_output_*", "rb_alloc", "perf_mmap_to_page",
    "ring_buffer_map", "ring_buffer_unmap", "__rb_map_vma", "ring_buffer_map_get_reader",
    "rb_update_meta_page", "rb_setup_ids_meta_page", "rb_get_mapped_buffer",
    "rb_put_mapped_buffer", "tracing_buffers_mmap*", "tracing_buffers_ioctl",
    "tracing_arm_snapshot*", "tracing_disarm_snapshot", "ring_buffer_resize",
    "tracing_resize_ring_buffer", "rb_meta_*", "rb_range_*", "ring_buffer_alloc_range",
    "trace_remote_*", "simple_ring_buffer_*",
)


@dataclass(frozen=True)
class Figures:
    lines_run: int = 0
    lines: int = 0
    branches_run: int = 0
    branches: int = 0

    def __add__(self, other: Figures) -> Figures:
        return Figures(self.lines_run + other.lines_run, self.lines + other.lines,
                       self.branches_run + other.branches_run, self.branches + other.branches)

    def cell(self) -> str:
        return f"{self.lines_run}/{self.lines} {self.branches_run}/{self.branches}"

    @property
    def line_percent(self) -> float:
        return 100.0 * self.lines_run / self.lines if self.lines else 100.0


@dataclass(frozen=True)
class Function:
    file: str  # tree-relative
    name: str
    line: int  # its first line
    figures: Figures
    missed: tuple[int, ...] = ()  # its lines not run


def read(tracefile: dict[str, Any]) -> dict[tuple[str, str], Function]:
    """The functions of a gcovr JSON tracefile, keyed by (file, name)."""
    out: dict[tuple[str, str], Function] = {}
    for f in tracefile.get("files", []):
        starts = {fn["name"]: fn["lineno"] for fn in f.get("functions", [])}
        per: dict[str, Figures] = {}
        first: dict[str, int] = {}
        missed: dict[str, list[int]] = {}
        for ln in f.get("lines", []):
            if ln.get("gcovr/excluded") or ln.get("gcovr/noncode"):
                continue
            name = ln.get("function_name") or "(outside a function)"
            b = ln.get("branches", [])
            per[name] = per.get(name, Figures()) + Figures(
                int(ln["count"] > 0), 1, sum(1 for x in b if x["count"] > 0), len(b))
            first.setdefault(name, ln["line_number"])
            if ln["count"] == 0:
                missed.setdefault(name, []).append(ln["line_number"])
        for name, fig in per.items():
            out[(f["file"], name)] = Function(f["file"], name, starts.get(name, first[name]), fig,
                                              tuple(sorted(missed.get(name, ()))))
    return out


def is_mapping(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in MAPPING)


def order(keys: list[tuple[str, str]], line_of: dict[tuple[str, str], int]
          ) -> list[tuple[str, str]]:
    """The mapping functions first (in MAPPING's order), then the rest by file and line."""
    def rank(k: tuple[str, str]) -> tuple[int, int, str, int]:
        i = next((n for n, p in enumerate(MAPPING) if fnmatch.fnmatchcase(k[1], p)), len(MAPPING))
        return (0 if i < len(MAPPING) else 1, i, k[0], line_of.get(k, 0))
    return sorted(keys, key=rank)


def table(sources: dict[str, dict[tuple[str, str], Function]], mapping_only: bool = False
          ) -> str:
    """summary.txt's table: a row per function, a column per source (lines run/total,
    branches run/total); totals of the mapping functions and of every function."""
    keys = sorted({k for fs in sources.values() for k in fs})
    line_of = {k: fs[k].line for fs in sources.values() for k in fs}
    rows = [k for k in order(keys, line_of) if not mapping_only or is_mapping(k[1])]
    names = list(sources)
    head = ["function", "file:line", *[f"{n} (lines, branches)" for n in names]]
    body = [[k[1] + (" *" if is_mapping(k[1]) else ""), f"{k[0]}:{line_of.get(k, 0)}",
             *[sources[n][k].figures.cell() if k in sources[n] else "-" for n in names]]
            for k in rows]
    for label, pick in (("mapping functions (*)", is_mapping), ("all functions", None)):
        totals = []
        for n in names:
            t = Figures()
            for k, fn in sources[n].items():
                if pick is None or pick(k[1]):
                    t = t + fn.figures
            totals.append(f"{t.cell()} ({t.line_percent:.1f}%)")
        body.append([label, "", *totals])
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*r).rstrip() for r in [head, *body]) + "\n"


def not_run(fs: dict[tuple[str, str], Function]) -> str:
    """The lines of the mapping functions that did not run, per function: what must be
    explained or given a test (docs/coverage.md)."""
    keys = order([k for k in fs if is_mapping(k[1]) and fs[k].missed],
                 {k: f.line for k, f in fs.items()})
    return "".join(f"{k[1]} ({k[0]}): {ranges(fs[k].missed)}\n" for k in keys)


def ranges(lines: tuple[int, ...] | list[int]) -> str:
    """[3, 4, 5, 9] -> "3-5,9"."""
    out: list[list[int]] = []
    for n in sorted(lines):
        if out and out[-1][1] == n - 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in out)
