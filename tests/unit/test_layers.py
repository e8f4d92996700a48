"""The layers of harness/ (pyproject.toml's import-linter contract) hold, and a breach is named."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports on the harness package under root (it imports `harness` from the cwd)."""
    return subprocess.run([str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
                          cwd=root, capture_output=True, text=True, timeout=120)


def test_harness_keeps_its_layers() -> None:
    done = lint(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "harness layers KEPT" in done.stdout


def test_boot_importing_results_is_named(tmp_path: Path) -> None:
    shutil.copytree(REPO / "harness", tmp_path / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    qemu = tmp_path / "harness" / "boot" / "qemu.py"
    qemu.write_text(qemu.read_text() + "\nfrom harness.results import report  # a layer breach\n")
    done = lint(tmp_path)
    assert done.returncode != 0
    assert "harness layers BROKEN" in done.stdout
    assert "harness.boot.qemu -> harness.results.report" in done.stdout
