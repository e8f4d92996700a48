"""`./lab nightly`'s command line: parsed into a Plan, dispatched; a lab.yaml without a
nightly section, or an unknown --cell, fails before a report folder is made."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from harness.commands import nightly
from harness.errors import ConfigError
from harness.nightly.night import Plan

LAB_YAML = """kernels:
  deb: {debian: {suite: trixie, flavour: cloud-amd64}}
reports: {dir: reports}
"""


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--lab-config")
    nightly.register(p.add_subparsers(dest="command"))
    return p.parse_args(argv)


def test_the_declarations() -> None:
    assert nightly.OWN_LOGGING is True and nightly.HOST_TOOLS == ("build",)


def test_the_options_are_parsed() -> None:
    args = parse(["nightly"])
    assert (args.scheduler, args.workers, args.cell, args.history, args.no_refresh) == \
        (None, None, [], None, False)
    args = parse(["nightly", "--scheduler", "tcp://h:8786", "--workers", "3", "--cell", "a",
                  "--cell", "b", "--history", "h", "--no-refresh"])
    assert (args.scheduler, args.workers, args.cell, args.history, args.no_refresh) == \
        ("tcp://h:8786", 3, ["a", "b"], "h", True)
    assert args.func is nightly.main


def test_main_dispatches_a_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lab.yaml").write_text(LAB_YAML + "nightly: {kernels: [deb]}\n")
    got: list[Plan] = []

    def run(plan: Plan) -> int:
        got.append(plan)
        return 0
    monkeypatch.setattr(nightly, "run", run)
    monkeypatch.setattr("harness.runs.run_folder.setup_logging", lambda *a, **k: None)
    args = parse(["--lab-config", str(tmp_path / "lab.yaml"), "nightly", "--cell", "deb",
                  "--history", "h", "--no-refresh", "--workers", "2"])
    monkeypatch.chdir(tmp_path)
    assert nightly.main(args) == 0
    [plan] = got
    assert plan.out.parent == tmp_path / "reports" and plan.out.name.endswith("-nightly")
    assert (plan.only, plan.history, plan.refresh, plan.workers, plan.scheduler) == \
        (("deb",), tmp_path / "h", False, 2, None)


@pytest.mark.parametrize("extra, argv, says", [
    ("", [], "no `nightly:` section"),
    ("nightly: {kernels: [deb]}\n", ["--cell", "nope"], "--cell nope: not a cell"),
])
def test_a_nightly_that_cannot_run_makes_no_folder(tmp_path: Path, extra: str, argv: list[str],
                                                   says: str, monkeypatch: Any) -> None:
    (tmp_path / "lab.yaml").write_text(LAB_YAML + extra)
    monkeypatch.setattr("harness.runs.run_folder.setup_logging", lambda *a, **k: None)
    with pytest.raises(ConfigError, match=says):
        nightly.main(parse(["--lab-config", str(tmp_path / "lab.yaml"), "nightly", *argv]))
    assert not (tmp_path / "reports").exists()
