"""Where the checkout's own files are, and which lab.yaml a command reads: one home, so no
module computes the project root from its own depth in the tree."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBES = REPO / "probes"                      # pushed into every guest
ROOTFS = REPO / "rootfs"                      # the guest's own files (init, sshd config)
KERNEL_FILES = REPO / "kernels"               # fragments, mutants, modules, known issues
FRAGMENTS = KERNEL_FILES / "fragments"
KNOWN_ISSUES = KERNEL_FILES / "known-issues.yaml"
TEST_MODULES = KERNEL_FILES / "modules"
KERNEL_SUITE = REPO / "tests" / "kernel"      # what `./lab run` runs
EXPLORE_KEPT = KERNEL_SUITE / "explore"       # reproducers the explorer keeps as tests
CONFIG_ENV = "RINGLAB_CONFIG"


def lab_yaml(given: str | os.PathLike[str] | None = None) -> Path:
    """The lab.yaml a command reads: the one given (--lab-config), else $RINGLAB_CONFIG, else
    the checkout's."""
    return Path(given or os.environ.get(CONFIG_ENV) or REPO / "lab.yaml")
