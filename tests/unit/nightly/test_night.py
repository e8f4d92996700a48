"""The whole night on the submitter: each chosen cell's task (its request, its explore)."""
from __future__ import annotations

import pickle
from pathlib import Path

from harness import paths
from harness.nightly.matrix import cells
from harness.nightly.night import Plan, task

from .conftest import load


def test_a_cells_task_carries_its_request_and_who_is_explored(tmp_path: Path) -> None:
    cfg = load(tmp_path, "nightly: {kernels: [deb, src, {kernel: src, branch: main}], "
                         "variants: {v: [b.config]}, explore: {budget: 1m}, refresh: true}\n")
    plan = Plan(cfg, tmp_path / "out", refresh=False)
    tasks = {c.name: task(plan, c, "c" * 40, 20261126) for c in cells(cfg)}
    assert sorted(tasks) == ["deb", "src.v", "src@main.v"]
    deb = tasks["deb"]
    assert deb.request.report_dir == tmp_path / "out" / "deb"
    assert deb.request.refresh is False            # --no-refresh over nightly.refresh
    assert (deb.repo, deb.commit, deb.seed) == (str(paths.REPO), "c" * 40, 20261126)
    assert deb.explore is not None and tasks["src.v"].explore == deb.explore
    assert tasks["src@main.v"].kernel.branch == "main"
    assert tasks["src@main.v"].request.kernel.name == "src+v"
    assert pickle.loads(pickle.dumps(tasks["src@main.v"])) == tasks["src@main.v"]
