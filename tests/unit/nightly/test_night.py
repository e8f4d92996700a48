"""The whole night on the submitter: each chosen cell's task (its request, its explore)."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from harness import paths
from harness.errors import ConfigError
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


def test_a_race_cell_explores_with_its_own_actors_and_loads(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """A kernel's own `explore:` (the race kernel's cell) replaces nightly.explore for its
    cells only, and its actors and loads reach the explore's command line."""
    from harness.nightly import cell as cell_mod
    cfg = load(tmp_path, "nightly: {kernels: [deb, {kernel: src, explore: {budget: 3m, "
                         "actors: 2, load: 'marker,resize@0'}}], explore: {budget: 1m}}\n")
    plan = Plan(cfg, tmp_path / "out", refresh=False)
    tasks = {c.name: task(plan, c, "c" * 40, 20261205) for c in cells(cfg)}
    assert tasks["deb"].explore is not None and tasks["deb"].explore.actors == 1
    race = tasks["src"].explore
    assert race is not None and (race.budget_s, race.actors, race.load) == \
        (180, 2, "marker,resize@0")
    seen: list[list[str]] = []

    def call(argv: list[str], **kw: object) -> int:
        seen.append(argv)
        return 0
    monkeypatch.setattr(cell_mod.subprocess, "call", call)
    (tmp_path / "run").mkdir()
    cell_mod.explore_cell(tasks["src"].request, race, 20261205, tmp_path / "run")
    argv = seen[0]
    assert argv[argv.index("--actors") + 1] == "2"
    assert argv[argv.index("--load") + 1] == "marker,resize@0"


def test_a_bad_load_in_a_kernels_explore_names_its_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nightly.kernels\[1\].explore.load"):
        load(tmp_path, "nightly: {kernels: [deb, {kernel: src, explore: {budget: 3m, "
                       "load: 'marker,nope'}}]}\n")
