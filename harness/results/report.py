"""Writing a run's report files so that no result is ever lost or left half-written.

Each test's result is appended to results.jsonl as soon as it is known (a run killed halfway
still says what it found), and the end-of-run files are written through a temporary name. If
the report folder fails (removed, full, read-only) the files go to a rescue folder in the
lab's cache instead, and the run says where and fails.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from harness import cache

log = logging.getLogger(__name__)


class ResultLog:
    """results.jsonl in the report folder: one JSON object per test, flushed at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.error: str | None = None  # why appending failed, if it did

    def append(self, entry: dict) -> None:
        if self.error is not None:
            return
        try:
            with self.path.open("a") as f:
                f.write(json.dumps(entry, sort_keys=True) + "\n")
        except OSError as e:
            self.error = f"{self.path}: {e.strerror or e}"
            log.warning("cannot append results to %s (%s); they are kept in memory and "
                        "written at the end of the run", self.path, self.error)


@dataclass(frozen=True)
class Written:
    """Where the end-of-run files went, and why not to the report folder if they did not."""
    folder: Path
    error: str | None = None


def write_files(report_dir: Path, files: dict[str, str], cache_dir: Path | None,
                run_name: str) -> Written:
    """Write `files` (name -> text) atomically into report_dir, or into a rescue folder under
    the cache when report_dir cannot take them."""
    try:
        _write_all(report_dir, files)
        return Written(report_dir)
    except OSError as e:
        error = f"{e.filename or report_dir}: {e.strerror or e}"
    rescue = cache.Layout(cache.cache_root(cache_dir)).rescued_reports(
        f"{time.strftime('%Y%m%d-%H%M%S')}-{run_name}")
    _write_all(rescue, files)
    log.error("could not write the reports to %s (%s); wrote them to %s", report_dir, error,
              rescue)
    return Written(rescue, error)


def _write_all(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        cache.write_atomic(folder / name, text.encode())
