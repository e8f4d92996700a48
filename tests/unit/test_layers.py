"""The layers of harness/ (pyproject.toml's import-linter contract) hold, and a breach is named."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from harness import paths

REPO = paths.REPO
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports on the harness package under root (it imports `harness` from the cwd)."""
    return subprocess.run([str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
                          cwd=root, capture_output=True, text=True, timeout=120)


def test_harness_keeps_its_layers() -> None:
    done = lint(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "harness layers KEPT" in done.stdout


def breach(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess[str]:
    """lint-imports on a copy of harness/ where `module` (a path under harness/) gains `line`."""
    shutil.copytree(REPO / "harness", tmp_path / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    source = tmp_path / "harness" / module
    source.write_text(source.read_text() + f"\n{line}  # a layer breach\n")
    return lint(tmp_path)


def test_guest_importing_results_is_named(tmp_path: Path) -> None:
    done = breach(tmp_path, "guest/qemu.py", "from harness.results import report")
    assert done.returncode != 0
    assert "harness layers BROKEN" in done.stdout
    assert "harness.guest.qemu -> harness.results.report" in done.stdout


def test_kernellog_importing_the_guest_layer_is_named(tmp_path: Path) -> None:
    """Kernel-log reading works offline, on saved logs: it must not reach for a guest."""
    done = breach(tmp_path, "kernellog/splats.py", "from harness.guest import vm")
    assert done.returncode != 0
    assert "harness layers BROKEN" in done.stdout
    assert "harness.kernellog.splats -> harness.guest.vm" in done.stdout
