"""harness/pytest_plugin/html.py: report.html's title and environment table. The title names
the kernel; the table gets the guest's facts, with the optional ones (commit, series, config)
only when the kernel has them; without pytest-metadata nothing is filled and nothing breaks."""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.pytest_plugin import html

KEY = pytest.StashKey[dict]()


def _html(meta: dict | None) -> html.Html:
    config = SimpleNamespace(stash=pytest.Stash())
    if meta is not None:
        config.stash[KEY] = meta
    ctx = SimpleNamespace(kernel_name="trixie-cloud", commit="abc123",
                          lab_config=SimpleNamespace(path=Path("/lab.yaml")))
    return html.Html(ctx, config, KEY)  # type: ignore[arg-type]


def _guest(**kernel: object) -> SimpleNamespace:
    k = {"release": "6.12.1", "description": "Debian 6.12", "commit": None, "series": (),
         "config": None, **kernel}
    return SimpleNamespace(kernel=SimpleNamespace(**k),
                           plan=SimpleNamespace(accel="kvm", cpus=2, memory_mb=1024))


def test_the_title_names_the_kernel() -> None:
    report = SimpleNamespace(title="")
    _html({}).pytest_html_report_title(report)
    assert report.title == "ringlab: trixie-cloud"


def test_the_table_gets_the_guests_facts_and_only_the_optional_ones_it_has() -> None:
    meta: dict = {"Python": "3.11"}
    _html(meta).note_boot(_guest(), None)  # type: ignore[arg-type]
    assert meta["kernel release"] == "6.12.1" and meta["accel"] == "kvm (2 cpu, 1024 MB)"
    assert meta["lab.yaml"] == "/lab.yaml" and meta["lab commit"] == "abc123"
    assert meta["Python"] == "3.11"
    assert not {"kernel commit", "series", "kernel config"} & set(meta)
    _html(meta).note_boot(_guest(commit="f00d", series=("a", "b"), config=Path("/c")),  # type: ignore[arg-type]
                          None)
    assert (meta["kernel commit"], meta["series"], meta["kernel config"]) == ("f00d", "a, b", "/c")


def test_without_metadata_nothing_is_filled() -> None:
    _html(None).note_boot(_guest(), None)  # type: ignore[arg-type]  # no stash entry: no error


def test_no_pytest_metadata_is_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pytest_metadata.plugin", None)  # import fails
    assert html.metadata_key() is None
