"""A lab.yaml with a nightly section, for the nightly package's tests."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import config
from harness.errors import ConfigError

KERNELS = """kernels:
  deb: {debian: {suite: trixie, flavour: cloud-amd64}}
  deb2: {debian: {suite: trixie, flavour: amd64}}
  src:
    build:
      tree: tree
      config: {base: defconfig, fragments: [a.config]}
"""


def write(tmp_path: Path, nightly_text: str) -> Path:
    (tmp_path / "tree").mkdir(exist_ok=True)
    for f in ("a.config", "b.config"):
        (tmp_path / f).write_text("CONFIG_PERF_EVENTS=y\n")
    p = tmp_path / "lab.yaml"
    p.write_text(KERNELS + nightly_text)
    return p


def load(tmp_path: Path, nightly_text: str) -> config.LabConfig:
    return config.load(write(tmp_path, nightly_text))


def error_of(tmp_path: Path, nightly_text: str) -> str:
    with pytest.raises(ConfigError) as e:
        load(tmp_path, nightly_text)
    return str(e.value)
