"""The command line of a `./lab run` child process.

Several commands run the suite in a child `./lab run` (a fresh process per kernel, so each
run has its own guests, logging and report folder): a multi-kernel run, review (base and
patched), each bisect step and each mutant. One builder makes that command line, so a flag the
child needs is added once and the children never drift apart.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunRequest:
    """What a child `./lab run` is asked to do: the whole request travels as one JSON value
    (`run --request`), so a child never needs another hidden flag."""
    lab_config: Path
    kernel: str
    report_dir: Path
    selection: str | None = None        # pytest -k
    jobs: str | None = None             # ./lab run -j (test workers)
    tree: Path | None = None            # a build kernel's tree in another checkout (bisect)
    series: tuple[Path, ...] = ()       # extra patch series on a build kernel (review)
    refresh: bool = False
    history: str | None = None
    keep_guest: bool = False
    pytest_args: tuple[str, ...] = ()

    def to_json(self) -> str:
        d = asdict(self)
        return json.dumps({**d, "lab_config": str(self.lab_config),
                           "report_dir": str(self.report_dir),
                           "tree": str(self.tree) if self.tree else None,
                           "series": [str(s) for s in self.series]})

    @classmethod
    def from_json(cls, text: str) -> RunRequest:
        d = json.loads(text)
        return cls(**{**d, "lab_config": Path(d["lab_config"]),
                      "report_dir": Path(d["report_dir"]),
                      "tree": Path(d["tree"]) if d.get("tree") else None,
                      "series": tuple(Path(s) for s in d.get("series", ())),
                      "pytest_args": tuple(d.get("pytest_args", ()))})


def argv(req: RunRequest, python: str = sys.executable) -> list[str]:
    """The child's argv: `python -m harness.cli --lab-config X run --request JSON`."""
    return [python, "-m", "harness.cli", "--lab-config", str(req.lab_config), "run",
            "--request", req.to_json()]


def run_jobs(guest_cpus: int, text: str) -> int:
    """How many guests `./lab run -j` runs at once: N, or `auto`: the host's cores over each
    guest's vCPUs (under TCG a vCPU wants a core), at least 1."""
    if text == "auto":
        return max(1, (os.cpu_count() or 1) // max(1, guest_cpus))
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"-j: expected a number of guests (1 or more) or 'auto', got {text!r}")
    return int(text)
