"""The whole mutation run (harness/mutate/session.py): only a `build` kernel can be mutated,
and mutate.json holds the run, the unmutated kernel and each mutant's row with the totals."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import config
from harness.errors import LabError
from harness.mutate import session
from harness.mutate.outcomes import KILLED, SURVIVED, Judged, MutantResult
from harness.mutate.plan import Plan
from harness.paths import REPO


def _plan(tmp_path: Path, name: str | None = None) -> Plan:
    cfg = config.load(REPO / "lab.yaml")
    spec = cfg.kernel(name)
    return Plan(cfg.with_kernel(spec), spec, (), "mmap", (), tmp_path)


def test_a_kernel_that_is_not_built_cannot_be_mutated(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "debian:trixie/cloud-amd64")
    with pytest.raises(LabError, match="is not a `build` kernel"):
        session.run(plan)


def test_the_document_holds_the_unmutated_kernel_and_every_mutant(tmp_path: Path) -> None:
    rs = [MutantResult("001-a", "f", "r", KILLED, killed_by=["t::x"], build_s=3.0),
          MutantResult("002-b", "f", "r", SURVIVED)]
    judged = Judged(rs, "mmap", False, {"passed": 4}, 61.26, str(tmp_path / "unmutated"))
    doc = session.document(_plan(tmp_path), "6.12.1", "/tree", judged, 300.04, 900.0)
    assert (doc["release"], doc["tree"], doc["selection"], doc["wall_s"]) == (
        "6.12.1", "/tree", "mmap", 900.0)
    assert doc["unmutated"] == {"counts": {"passed": 4}, "build_s": 300.0, "run_s": 61.3,
                                "report": str(tmp_path / "unmutated")}
    assert doc["totals"]["kill_rate"] == 0.5
    assert [m["id"] for m in doc["mutants"]] == ["001-a", "002-b"]
    assert doc["mutants"][0]["killed_by"] == ["t::x"]
