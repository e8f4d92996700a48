"""kernels/known-issues.yaml: loading, validation errors that name the culprit, matching."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.results import known_issues
from harness.errors import ConfigError

GOOD = """
issues:
  - id: a
    tests: ["tests/kernel/test_x.py::test_y*"]
    versions: [">=6.12.105, <6.13", "==6.18.2"]
    reason: why
    link: https://example.invalid/a
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "known-issues.yaml"
    p.write_text(text)
    return p


def test_the_checked_in_list_loads() -> None:
    issues = known_issues.load()
    assert issues and all(i.reason and i.link and i.tests for i in issues)


def test_matching_by_test_and_release(tmp_path: Path) -> None:
    [issue] = known_issues.load(write(tmp_path, GOOD))
    assert issue.applies("tests/kernel/test_x.py::test_y[4-0]", "6.12.107+deb13-cloud-amd64")
    assert issue.applies("tests/kernel/test_x.py::test_y", "6.18.2")
    assert not issue.applies("tests/kernel/test_x.py::test_y", "6.12.104")
    assert not issue.applies("tests/kernel/test_x.py::test_y", "6.13.0")
    assert not issue.applies("tests/kernel/test_x.py::test_z", "6.12.107")
    assert not issue.applies("tests/kernel/test_x.py::test_y", "not-a-version")
    assert known_issues.matching([issue], "tests/kernel/test_x.py::test_y", "6.12.106") is issue
    assert "known kernel issue a: why" in issue.summary


@pytest.mark.parametrize("text, culprit", [
    ("issues: 3", "issues: expected a list"),
    ("issues:\n  - {id: a, tests: [t], versions: ['>=6'], reason: r}", r"issues\[0\]\.link"),
    ("issues:\n  - {id: a, tests: [t], versions: ['6.12'], reason: r, link: l}",
     r"issues\[0\]\.versions\[0\]: expected clauses"),
    ("issues:\n  - {id: a, tests: [], versions: ['>=6'], reason: r, link: l}",
     r"issues\[0\]\.tests: expected a list"),
    ("issues:\n  - {id: a, tests: [t], versions: ['>=6'], reason: r, link: l, extra: 1}",
     r"issues\[0\]\.extra: unknown key"),
    ("issues:\n  - {id: a, tests: [t], versions: ['>=6'], reason: r, link: l}\n"
     "  - {id: a, tests: [t], versions: ['>=6'], reason: r, link: l}", r"issues\[1\]\.id"),
    ("issues: [", "not valid YAML"),
])
def test_mistakes_name_file_and_key(tmp_path: Path, text: str, culprit: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=culprit) as e:
        known_issues.load(path)
    assert str(path) in str(e.value)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        known_issues.load(tmp_path / "nope.yaml")
