"""The one place a benchmark's results go: its folder under reports.dir, the table it prints
(kept as bench.txt) and its figures (bench.json). Every bench of `./lab bench` and `./lab
review` writes through here, so a results folder always looks the same and nothing but
`save` decides what is printed at the end of a bench."""
from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import config as lab_config
from harness.config import LabConfig
from harness.runs import run_folder


@dataclass
class Report:
    """What a bench prints and keeps: the lines a user reads, the figures a script reads."""
    lines: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)


def folder(cfg: LabConfig, kind: str, kernel: str | None = None) -> Path:
    """reports/<time>-bench-<kind>[-<kernel>]/, made and proven writable before any guest is
    started: where a bench's console logs, child runs and report go."""
    label = f"bench-{kind}" + (f"-{lab_config.file_safe(kernel)}" if kernel else "")
    return run_folder.make(cfg.reports_dir / time.strftime(f"%Y%m%d-%H%M%S-{label}"))


def save(out: Path, report: Report, name: str = "bench") -> Path:
    """Write <name>.txt (the printed table) and <name>.json (the figures) into `out`, print the
    table and where both went; the JSON's path is returned."""
    text = "\n".join(report.lines) + "\n"
    (out / f"{name}.txt").write_text(text)
    path = out / f"{name}.json"
    path.write_text(json.dumps(report.figures, indent=2) + "\n")
    print(f"\n{text}\nfigures saved to {path}", flush=True)
    return path


def stats(values: list[float]) -> dict[str, float]:
    """min/median/max/n of a figure's samples: how every bench summarizes them."""
    return {"min": min(values), "median": statistics.median(values), "max": max(values),
            "n": len(values)}


def line(name: str, s: dict[str, float], unit: str, target: float | None = None,
         at_least: bool = False) -> str:
    """One figure as a table row, judged against its target (a ceiling, or with `at_least`
    a floor) on the median."""
    verdict = ""
    if target is not None:
        met = s["median"] >= target if at_least else s["median"] <= target
        verdict = f"  target {'>=' if at_least else '<='} {target:g} {unit}: " \
                  f"{'met' if met else 'MISSED'}"
    return (f"{name:38s} min {s['min']:10.3f}  median {s['median']:10.3f}  max "
            f"{s['max']:10.3f} {unit} (n={s['n']}){verdict}")


def progress(text: str) -> None:
    """A line while the bench runs (flushed: a bench is long, and often piped to a file)."""
    print(text, flush=True)
