"""The nightly bench: its cells and the lab.yaml its child `./lab nightly` reads."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness import config as lab_config, paths
from harness.bench import nightly
from harness.errors import LabError


def test_each_selection_is_a_cell_and_one_is_not_enough() -> None:
    assert nightly.cells(("a", "b or c")) == {"k1": "a", "k2": "b or c"}
    with pytest.raises(LabError, match="two -k selections"):
        nightly.cells(("a",))


def test_the_child_s_lab_yaml_is_the_user_s_with_the_bench_s_matrix(tmp_path: Path) -> None:
    raw = yaml.safe_load((paths.REPO / "lab.yaml").read_text())
    data = nightly.bench_yaml(raw, paths.REPO, "src-6.12-min", nightly.cells(nightly.SELECTIONS),
                              tmp_path / "nightly")
    assert data["nightly"] == {"kernels": ["src-6.12-min"], "refresh": False,
                               "selections": {"k1": nightly.SELECTIONS[0],
                                              "k2": nightly.SELECTIONS[1]}}
    fragments = data["kernels"]["src-6.12-min"]["build"]["config"]["fragments"]
    assert fragments == [str(paths.FRAGMENTS / "minimal.config")]  # made absolute
    assert raw["kernels"]["src-6.12-min"]["build"]["config"]["fragments"][0].startswith("kernels")
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(data))
    cfg = lab_config.load(tmp_path / "lab.yaml")  # read from another folder, the same kernels
    assert cfg.nightly is not None and [k.name for k in cfg.nightly.kernels] == ["src-6.12-min"]
    assert cfg.reports_dir == tmp_path / "nightly"


def test_a_kernel_not_in_lab_yaml_cannot_be_a_nightly_s_matrix(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="not a kernel of lab.yaml"):
        nightly.bench_yaml({"kernels": {"a": {}}}, tmp_path, "/a/tree", {"k1": "x"}, tmp_path)


def test_the_child_is_lab_nightly_with_one_worker_a_cell_and_refresh_off() -> None:
    argv = nightly.nightly_argv(Path("/o/lab.yaml"), 2, Path("/o/history"), python="py")
    assert argv[:6] == ["py", "-m", "harness.cli", "--lab-config", "/o/lab.yaml", "nightly"]
    assert argv[argv.index("--workers") + 1] == "2" and "--no-refresh" in argv
