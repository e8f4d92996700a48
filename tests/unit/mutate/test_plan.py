"""A mutation run's plan (harness/mutate/plan.py) carries the kernel the verb resolved: its
name is the spec's, and the config holds that same spec."""
from __future__ import annotations

from pathlib import Path

from harness import config
from harness.mutate.plan import Plan
from harness.paths import REPO


def test_the_plan_names_the_resolved_kernel_and_its_config_holds_it(tmp_path: Path) -> None:
    cfg = config.load(REPO / "lab.yaml")
    spec = cfg.kernel(None)
    plan = Plan(cfg.with_kernel(spec), spec, (), None, (), tmp_path)
    assert plan.name == spec.name and plan.cfg.kernel(plan.name) is spec
    assert not (plan.whole_suite or plan.selftests) and plan.explore_s is None
