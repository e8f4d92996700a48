"""The one report writer: a bench's folder, its table and figures written, printed."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness import config as lab_config, paths
from harness.bench import report


def test_a_bench_gets_a_folder_named_after_it_and_its_kernel(tmp_path: Path) -> None:
    cfg = dataclasses.replace(lab_config.load(paths.REPO / "lab.yaml"),
                              reports_dir=tmp_path / "reports")
    out = report.folder(cfg, "boot", "/some/tree")
    assert out.is_dir() and out.parent == tmp_path / "reports"
    assert out.name.endswith("-bench-boot-some-tree")
    assert report.folder(cfg, "build").name.endswith("-bench-build")


def test_save_writes_the_table_and_the_figures_and_prints_both_places(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = report.Report(["ringlab bench x", "row 1"], {"results": {"a": 1.5}})
    r.add("row 2")
    path = report.save(tmp_path, r)
    assert path == tmp_path / "bench.json"
    assert json.loads(path.read_text()) == {"results": {"a": 1.5}}
    assert (tmp_path / "bench.txt").read_text() == "ringlab bench x\nrow 1\nrow 2\n"
    printed = capsys.readouterr().out
    assert "row 2" in printed and f"figures saved to {path}" in printed
    report.save(tmp_path, r, name="review")
    assert (tmp_path / "review.txt").exists() and (tmp_path / "review.json").exists()


def test_a_row_is_judged_on_its_median_against_a_ceiling_or_a_floor() -> None:
    s = report.stats([3.0, 1.0, 2.0])
    assert s == {"min": 1.0, "median": 2.0, "max": 3.0, "n": 3}
    assert report.line("boot", s, "s", 2.0).endswith("target <= 2 s: met")
    assert report.line("boot", s, "s", 1.5).endswith("MISSED")
    assert report.line("rate", s, "/s", 2.5, at_least=True).endswith("target >= 2.5 /s: MISSED")
    assert "target" not in report.line("rate", s, "/s")
