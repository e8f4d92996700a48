"""The night's report: each cell's folder unpacked once into the nightly's folder, then the
nightly's own files: summary.txt/json (the matrix, a column per cell), one merged
kcidb.json, and each cell's run kept in the history of its kernel line and compared with
the previous night's (history.record, whose comparison is results/compare.py's)."""
from __future__ import annotations

import io
import json
import logging
import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

from harness.nightly.cell import BUILD_FAILED, FAILED, PASSED, CellResult
from harness.results import history, kcidb, matrix

log = logging.getLogger(__name__)


def store(result: CellResult, out: Path) -> Path:
    """The cell's report folder, `out/<cell>`, unpacked from its archive into a temporary
    folder renamed into place: whole or absent, and written once (a second result for the same
    cell, from a task Dask ran again, is dropped)."""
    final = out / result.name
    if final.exists():
        log.warning("nightly: cell %s reported twice; keeping the first report", result.name)
        return final
    tmp = Path(tempfile.mkdtemp(prefix=f".{result.name}.", dir=out))
    try:
        if result.archive:
            with tarfile.open(fileobj=io.BytesIO(result.archive), mode="r:gz") as tar:
                tar.extractall(tmp, filter="data")
        (tmp / "cell.json").write_text(json.dumps(result.record(), indent=2))
        tmp.chmod(0o755)  # mkdtemp's 0700 is for the scratch name, not the report
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def write(out: Path, results: list[CellResult], history_dir: Path, commit: str,
          started: float, where: str) -> tuple[str, int]:
    """The nightly's own files (summary.txt/json, kcidb.json, history.txt); (text, exit):
    exit 0 if every cell passed and no known issue came back where its test passed the night
    before (a regression, though the cell's run is green: the xfail excuses a known bug, not
    its return), else 1."""
    table = matrix.build({r.name: out / r.name / "summary.json" for r in results})
    for r in results:
        k = table["kernels"][r.name]
        k["status"] = r.status
        if r.status not in (PASSED, FAILED):
            k["error"] = f"{r.status}: {r.why}"
    docs: dict[str, dict] = {}
    for r in results:
        doc_path = out / r.name / "kcidb.json"
        if doc_path.exists():
            docs[r.name] = json.loads(doc_path.read_text())
        elif r.status == BUILD_FAILED:
            docs[r.name] = kcidb.failed_build(r.name, r.why, started)
    if docs:
        (out / "kcidb.json").write_text(json.dumps(kcidb.merge(docs), indent=2))
    hist: list[str] = []
    back: list[str] = []
    for r in results:
        summary = out / r.name / "summary.json"
        if not summary.exists():
            continue
        _, comparison = history.record(history_dir, summary, line=r.name)
        (out / r.name / "history.txt").write_text("\n".join(comparison.lines()) + "\n")
        (out / r.name / "history.json").write_text(history.as_json(comparison))
        hist += [f"{r.name}:"] + ["  " + ln for ln in comparison.lines()]
        back += [f"{r.name}: {t}" for t in comparison.returned]
    ok = sum(r.status == PASSED for r in results)
    lines = [f"ringlab nightly at {commit[:12]}: {len(results)} cell(s), {ok} passed, "
             f"{time.time() - started:.0f} s on {where}"]
    if back:
        lines.append(f"REGRESSION: a known issue came back where its test passed before: "
                     f"{'; '.join(back)}")
    lines += ["  " + r.line() for r in results]
    text = "\n".join(lines) + "\n\n" + matrix.render(table) + \
        ("\n" + "\n".join(hist) + "\n" if hist else "")
    (out / "summary.txt").write_text(text)
    (out / "summary.json").write_text(json.dumps(
        {"commit": commit, "where": where, "started": started,
         "cells": [r.record() for r in results], "matrix": table}, indent=2))
    if hist:
        (out / "history.txt").write_text("\n".join(hist) + "\n")
    return text, 0 if ok == len(results) and not back else 1
