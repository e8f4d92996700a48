"""The review run: what can be patched, and a side's suite that could not complete."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import config as lab_config, paths
from harness.bench import review
from harness.config import BuildKernel
from harness.errors import ConfigError, LabError
from harness.runs import child_run


def test_the_patched_config_builds_the_series_after_the_kernel_s_own(tmp_path: Path) -> None:
    cfg = lab_config.load(paths.REPO / "lab.yaml")
    spec = cfg.kernel("src-6.12-min")
    series = tmp_path / "0001-x.patch"
    series.write_text("")
    patched = review.patched(cfg, spec, series)
    source = patched.kernel(spec.name).source
    assert isinstance(source, BuildKernel) and source.series[-1] == series
    assert cfg.kernel(spec.name) == spec  # the base is left as it was


def test_a_kernel_that_is_not_built_cannot_be_reviewed(tmp_path: Path) -> None:
    cfg = lab_config.load(paths.REPO / "lab.yaml")
    with pytest.raises(ConfigError, match="not a `build` kernel"):
        review.patched(cfg, cfg.kernel(None), tmp_path)


def test_a_side_whose_run_did_not_complete_stops_the_review(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = lab_config.load(paths.REPO / "lab.yaml")
    spec = cfg.kernel("src-6.12-min")
    plan = review.Plan(cfg, cfg, spec, tmp_path / "s.patch", tmp_path)
    monkeypatch.setattr(child_run, "run", lambda req: child_run.of(None, 2))
    with pytest.raises(LabError, match="the base run could not complete \\(exit 2\\)"):
        review.suite(plan, "base", (), None)
