"""A suite for tests/unit/results/test_report.py: the report folder disappears mid-run (test_b
replaces it with a file); the results of all three tests must still be written somewhere, and
the run must say where and fail. No guest needed."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest


def test_a_passes() -> None:
    assert sum([1, 2]) == 3


def test_b_loses_the_report_folder(request: pytest.FixtureRequest) -> None:
    folder = Path(request.config.getoption("--lab-report-dir"))
    shutil.rmtree(folder)
    folder.write_text("the report folder was replaced by this file\n")


def test_c_fails_afterwards() -> None:
    assert [1, 2] == [1, 3]
