"""The test file's wall: pytest given the run's request, its summary line read back."""
from __future__ import annotations

from pathlib import Path

from harness import paths
from harness.bench import pytest_wall


def test_pytest_is_given_the_request_not_a_kernel_to_resolve() -> None:
    argv = pytest_wall.argv(Path("/r/request.json"), "test_perf_ring.py", python="py")
    assert argv[:3] == ["py", "-m", "pytest"]
    assert argv[argv.index("--lab-request") + 1] == "/r/request.json"
    assert "--kernel" not in argv
    assert argv[-1] == str(paths.REPO / "tests" / "kernel" / "test_perf_ring.py")


def test_the_last_line_is_pytests_summary() -> None:
    assert pytest_wall.last_line("..\n\n3 passed in 1.2s\n") == "3 passed in 1.2s"
    assert pytest_wall.last_line("  \n") == "(no output)"
