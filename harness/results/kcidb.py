"""A run's results in KernelCI's KCIDB format, so a nightly run can be submitted to KernelCI.

One checkout (the kernel under test), one build (its prepared image), one test per result of
summary.json. Checked against the schema with kcidb-io, KernelCI's own package, before it is
written: an invalid document is a bug of ours and fails loudly.
"""
from __future__ import annotations

import copy
import hashlib
import re
from datetime import datetime, timezone

import kcidb_io

from harness import arch as arches

ORIGIN = "ringlab"
# The KCIDB schema version the lab writes and validates against, pinned: kcidb-io's LATEST
# moves with the package, and a document should not change shape under a pip upgrade.
SCHEMA = kcidb_io.schema.V5_3
# summary.json outcome -> KCIDB status. A known kernel issue (xfail) is still a faulty kernel;
# the first attempt of a rerun test is not a result of its own and is left out.
STATUS = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "xfailed": "FAIL",
          "xpassed": "PASS", "error": "ERROR"}


def test_path(nodeid: str) -> str:
    """'tests/kernel/test_perf_aux.py::test_x[4096]' -> 'ringlab.test_perf_aux.test_x.4096'
    (KCIDB paths are dot-separated [A-Za-z0-9_-] names)."""
    file, _, name = nodeid.partition("::")
    stem = file.rsplit("/", 1)[-1].removesuffix(".py")
    parts = [ORIGIN, stem, *re.split(r"[\[\]]+", name)]
    return ".".join(re.sub(r"[^A-Za-z0-9_-]+", "_", p).strip("_") or "_" for p in parts if p)


def from_summary(summary: dict, started: float) -> dict:
    """The KCIDB document (schema SCHEMA, v5.3) for one run's summary.json content."""
    release = summary.get("release") or "unknown"
    run = hashlib.sha256(f"{release} {started}".encode()).hexdigest()[:16]
    when = datetime.fromtimestamp(started, timezone.utc).isoformat()
    checkout_id = f"{ORIGIN}:{hashlib.sha256(release.encode()).hexdigest()[:16]}"
    build_id = f"{ORIGIN}:{run}-build"
    accel = ", ".join(sorted({f"{b['cpus']} cpu {b['accel']}" for b in summary.get("boots", [])}))
    tests = []
    for i, r in enumerate(summary.get("results", [])):
        status = STATUS.get(r["outcome"])
        if status is None:
            continue
        misc = {"outcome": r["outcome"]}
        if r.get("splats"):
            misc["splats"] = [s["title"] for s in r["splats"]]
        if r.get("taint"):
            misc["taint"] = r["taint"]
        test = {"id": f"{ORIGIN}:{run}-{i}", "build_id": build_id, "origin": ORIGIN,
                "path": test_path(r["test"]), "status": status, "start_time": when,
                "duration": r.get("duration_s", 0.0), "comment": r["test"], "misc": misc,
                "environment": {"comment": f"QEMU guest ({accel or 'not booted'})"}}
        if r.get("reason"):
            test["log_excerpt"] = r["reason"][:16384].replace("\0", "")
        tests.append(test)
    doc = {
        "version": {"major": SCHEMA.major, "minor": SCHEMA.minor},
        "checkouts": [{"id": checkout_id, "origin": ORIGIN, "start_time": when,
                       "comment": summary.get("kernel_description") or release,
                       "valid": True, "misc": {"kernel": summary.get("kernel"),
                                               "release": release}}],
        "builds": [{"id": build_id, "checkout_id": checkout_id, "origin": ORIGIN,
                    "architecture": summary.get("arch") or arches.DEFAULT, "start_time": when,
                    "status": "PASS",
                    "comment": f"{release} prepared for QEMU by ringlab"}],
        "tests": tests,
    }
    SCHEMA.validate(doc)
    return doc


def failed_build(kernel: str, why: str, started: float) -> dict:
    """A KCIDB document for a kernel that did not build: its checkout and a FAIL build, so a
    nightly's merged document says so instead of leaving the cell out."""
    when = datetime.fromtimestamp(started, timezone.utc).isoformat()
    checkout_id = f"{ORIGIN}:{hashlib.sha256(kernel.encode()).hexdigest()[:16]}"
    run = hashlib.sha256(f"{kernel} {started}".encode()).hexdigest()[:16]
    doc = {"version": {"major": SCHEMA.major, "minor": SCHEMA.minor},
           "checkouts": [{"id": checkout_id, "origin": ORIGIN, "start_time": when,
                          "comment": kernel, "valid": True, "misc": {"kernel": kernel}}],
           "builds": [{"id": f"{ORIGIN}:{run}-build", "checkout_id": checkout_id,
                       "origin": ORIGIN, "architecture": arches.DEFAULT, "start_time": when,
                       "status": "FAIL", "comment": why[:4000]}]}
    SCHEMA.validate(doc)
    return doc


def merge(docs: dict[str, dict]) -> dict:
    """One KCIDB document from several runs' (a nightly's cells, by cell name): kcidb-io's own
    merge, each build tagged with its cell (misc.nightly_cell), the checkout two cells share
    (the same kernel release) kept once, then validated against SCHEMA."""
    tagged = []
    for cell, doc in docs.items():
        doc = copy.deepcopy(doc)
        for build in doc.get("builds", []):
            build["misc"] = {**build.get("misc", {}), "nightly_cell": cell}
        tagged.append(doc)
    empty = {"version": {"major": SCHEMA.major, "minor": SCHEMA.minor}}
    merged = SCHEMA.merge(empty, tagged, copy_target=False, copy_sources=False)
    merged = SCHEMA.dedup(merged, copy=False, pick_second=lambda: False)
    SCHEMA.validate(merged)
    return merged
