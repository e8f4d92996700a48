"""The build bench: its tree copy, the source it builds, its table."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from harness import config as lab_config, paths
from harness.bench import build
from harness.config import BuildKernel, DebianSource


def test_touching_a_file_of_the_copy_leaves_the_hard_linked_original_alone(
        tmp_path: Path) -> None:
    (tmp_path / "orig").mkdir()
    (tmp_path / "copy").mkdir()
    (tmp_path / "orig" / "README").write_text("x")
    os.link(tmp_path / "orig" / "README", tmp_path / "copy" / "README")
    os.utime(tmp_path / "orig" / "README", (1, 1))
    build.Tree(tmp_path / "copy").touch("README")
    assert (tmp_path / "orig" / "README").stat().st_mtime == 1
    assert (tmp_path / "copy" / "README").stat().st_ino != \
        (tmp_path / "orig" / "README").stat().st_ino
    assert (tmp_path / "copy" / "README").read_text() == "x"


def test_the_bench_kernel_builds_the_copy_with_a_shipped_fragment(tmp_path: Path) -> None:
    k = build.Tree(tmp_path).kernel("bench-min", "tinyconfig", "minimal.config")
    assert isinstance(k.source, BuildKernel) and k.source.tree == tmp_path
    assert k.source.fragments == (paths.FRAGMENTS / "minimal.config",)


def test_the_source_is_lab_yaml_s_pinned_one_else_the_newest() -> None:
    cfg = lab_config.load(paths.REPO / "lab.yaml")
    pinned = build.debian_source(cfg)
    assert isinstance(pinned, DebianSource) and pinned.package == "linux-source-6.12"
    without = dataclasses.replace(cfg, kernels={})
    assert build.debian_source(without) == build.FALLBACK_SOURCE


def test_the_table_judges_the_bisect_step() -> None:
    lines = build.table({"full_build_minimal_s": {"s": 300.0, "steps": 900},
                         "bisect_step_s": {"s": 120.0, "build_s": 60.0, "probe_ok": True}})
    assert lines[0].startswith("full_build_minimal_s") and "steps 900" in lines[0]
    assert "build_s 60.0, probe_ok True" in lines[1]
    assert lines[-1].endswith("met")
