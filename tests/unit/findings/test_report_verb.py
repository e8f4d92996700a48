"""`./lab report`'s choices that need no guest: which kernels the reproducer runs on by default
and which tree the code is quoted from (harness/findings/issue_report.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
from debian.debian_support import Version

from harness import arch, config, paths
from harness.errors import LabError
from harness.findings import issue_report

LAB_YAML = paths.REPO / "lab.yaml"


def test_the_default_kernels_are_one_debian_kernel_per_suite_default_first() -> None:
    cfg = config.load(LAB_YAML)
    names = issue_report.default_kernels(cfg)
    assert names[0] == cfg.default_kernel
    suites = [cfg.kernels[n].source.suite for n in names]  # type: ignore[union-attr]
    assert len(suites) == len(set(suites)) and {"trixie", "sid", "experimental"} <= set(suites)
    assert all(isinstance(cfg.kernels[n].source, config.DebianKernel) for n in names)


def test_the_code_is_quoted_from_the_newest_debian_source() -> None:
    cfg = config.load(LAB_YAML)
    versions = {n: Version(s.source.tree.version) for n, s in cfg.kernels.items()
                if isinstance(s.source, config.BuildKernel)
                and isinstance(s.source.tree, config.DebianSource) and s.source.tree.version}
    assert len(set(versions.values())) > 1, "lab.yaml builds more than one Debian source"
    assert versions[issue_report.newest_source(cfg, arch.DEFAULT)] == max(versions.values())


def test_a_lab_without_a_debian_source_says_so(tmp_path: Path) -> None:
    p = tmp_path / "lab.yaml"
    p.write_text("default_kernel: k\nkernels:\n  k: {debian: {suite: trixie, flavour: "
                 "cloud-amd64}}\n")
    with pytest.raises(LabError, match="no `build` kernel on a Debian source"):
        issue_report.newest_source(config.load(p), arch.DEFAULT)
