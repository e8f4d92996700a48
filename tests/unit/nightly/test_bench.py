"""The nightly bench: its cells, and the matrix it gives its nightly in memory (no lab.yaml
written: the cells are requests like any nightly's)."""
from __future__ import annotations

import pytest

from harness import config as lab_config, paths
from harness.errors import LabError
from harness.nightly import bench, matrix


def test_each_selection_is_a_cell_and_one_is_not_enough() -> None:
    assert bench.cells(("a", "b or c")) == {"k1": "a", "k2": "b or c"}
    with pytest.raises(LabError, match="two -k selections"):
        bench.cells(("a",))


def test_the_nightly_s_matrix_is_the_kernel_by_the_bench_s_selections() -> None:
    cfg = lab_config.load(paths.REPO / "lab.yaml")
    spec = cfg.kernel("src-6.12-min")
    plan_cfg = bench.bench_config(cfg, spec, bench.cells(bench.SELECTIONS))
    assert plan_cfg.nightly is not None and not plan_cfg.nightly.refresh
    cells = matrix.chosen(plan_cfg, ())
    assert [(c.kernel.name, c.selection.expr) for c in cells] == \
        [("src-6.12-min", bench.SELECTIONS[0]), ("src-6.12-min", bench.SELECTIONS[1])]
    assert plan_cfg.kernels == cfg.kernels and plan_cfg.path == cfg.path


def test_a_kernel_not_in_lab_yaml_cannot_be_a_nightly_s_matrix(tmp_path) -> None:
    cfg = lab_config.load(paths.REPO / "lab.yaml")
    other = lab_config.KernelSpec("/a/tree", lab_config.BuildKernel(tmp_path))
    with pytest.raises(LabError, match="not a kernel of lab.yaml"):
        bench.bench_config(cfg, other, {"k1": "x"})
