"""The throw-away guest's steps: the table and the command a user types."""
from __future__ import annotations

from pathlib import Path

from harness import config as lab_config, paths
from harness.bench import throwaway


def test_the_whole_command_is_judged_and_the_steps_are_not() -> None:
    rows = [{s: 0.1 for s in throwaway.STEPS} | {throwaway.WHOLE: w} for w in (0.9, 1.4, 0.95)]
    lines = throwaway.table(rows)
    assert len(lines) == len(throwaway.STEPS)
    assert lines[-1].endswith(f"target <= {throwaway.TARGET_S:g} s: met")  # median 0.95
    assert all("target" not in line for line in lines[:-1])
    rows.append({s: 0.1 for s in throwaway.STEPS} | {throwaway.WHOLE: 2.0})
    assert throwaway.table(rows)[-1].endswith("MISSED")  # median 1.175


def test_lab_ssh_is_asked_for_the_resolved_kernel_by_its_name() -> None:
    cfg = lab_config.load(paths.REPO / "lab.yaml")
    argv = throwaway.ssh_argv(cfg, cfg.kernel(None))
    assert argv[0] == str(paths.REPO / "lab") and argv[-2:] == ["--", "true"]
    assert argv[argv.index("--kernel") + 1] == cfg.default_kernel
    assert Path(argv[argv.index("--lab-config") + 1]) == cfg.path
