"""harness/results/kcidb.py: a run's summary as a KCIDB document, checked against KernelCI's schema
(kcidb-io) on a summary.json written by a real ./lab run (tests/unit/data)."""
from __future__ import annotations

import json
from pathlib import Path

import kcidb_io
import pytest

from harness.results import kcidb

DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_real_summary_becomes_a_valid_kcidb_document() -> None:
    summary = json.loads((DATA / "summary-6.12.json").read_text())
    doc = kcidb.from_summary(summary, 1795300000.0)
    kcidb_io.schema.LATEST.validate(doc)
    [checkout], [build] = doc["checkouts"], doc["builds"]
    assert build["checkout_id"] == checkout["id"] and checkout["id"].startswith("ringlab:")
    statuses = {t["misc"]["outcome"]: t["status"] for t in doc["tests"]}
    assert statuses["passed"] == "PASS" and statuses["skipped"] == "SKIP"
    assert statuses["xfailed"] == "FAIL"  # a known kernel bug is still a faulty kernel
    assert len(doc["tests"]) == len(summary["results"])
    assert len({t["id"] for t in doc["tests"]}) == len(doc["tests"])


@pytest.mark.parametrize("nodeid, path", [
    ("tests/kernel/test_perf_aux.py::test_flags", "ringlab.test_perf_aux.test_flags"),
    ("tests/kernel/test_trace_mmap.py::test_x[4-0]", "ringlab.test_trace_mmap.test_x.4-0"),
    ("tests/kernel/test_pinning.py::test_y[user+ipc_lock]",
     "ringlab.test_pinning.test_y.user_ipc_lock"),
])
def test_test_paths_fit_the_schema(nodeid: str, path: str) -> None:
    assert kcidb.test_path(nodeid) == path


def test_reruns_are_not_results_and_reasons_are_excerpts() -> None:
    summary = {"release": "6.12.107", "kernel": "k", "boots": [], "results": [
        {"test": "tests/kernel/test_a.py::test_a", "outcome": "rerun", "reason": "died"},
        {"test": "tests/kernel/test_a.py::test_a", "outcome": "failed", "duration_s": 1.5,
         "reason": "the kernel splatted during this test: WARNING at x.c:1 f",
         "splats": [{"title": "WARNING at x.c:1 f"}], "taint": [0, 512]}]}
    [test] = kcidb.from_summary(summary, 0.0)["tests"]
    assert test["status"] == "FAIL" and test["log_excerpt"].startswith("the kernel splatted")
    assert test["misc"]["splats"] == ["WARNING at x.c:1 f"] and test["misc"]["taint"] == [0, 512]


def test_the_document_is_written_in_the_pinned_schema_version_and_validates() -> None:
    summary = json.loads((DATA / "summary-6.12.json").read_text())
    doc = kcidb.from_summary(summary, 1795300000.0)
    assert kcidb.SCHEMA is kcidb_io.schema.V5_3
    assert doc["version"] == {"major": 5, "minor": 3}
    kcidb_io.schema.V5_3.validate(doc)


def test_the_build_architecture_is_the_kernels() -> None:
    summary = json.loads((DATA / "summary-6.12.json").read_text())
    assert kcidb.from_summary(summary, 1795300000.0)["builds"][0]["architecture"] == "x86_64"
    doc = kcidb.from_summary({**summary, "arch": "arm64"}, 1795300000.0)
    assert doc["builds"][0]["architecture"] == "arm64"
