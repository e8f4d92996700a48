"""harness/runs/run_folder.py: what every verb that writes a report does first. Which lab.yaml
is read (--lab-config over $RINGLAB_CONFIG), a report folder that cannot be written said up
front naming it, reports/latest moved only where it is the lab's own link, and the run's
lab.log getting what the screen does not."""
from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import config
from harness.errors import ConfigError, LabError
from harness.runs import run_folder

LAB_YAML = "kernels:\n  deb:\n    debian: {suite: trixie, flavour: cloud-amd64}\n"


@pytest.fixture
def root_logging() -> Iterator[logging.Logger]:
    """setup_logging replaces the root logger's handlers: put pytest's back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    paramiko = logging.getLogger("paramiko").level
    yield root
    for h in list(root.handlers):
        root.removeHandler(h)
        if h not in handlers:
            h.close()
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)
    logging.getLogger("paramiko").setLevel(paramiko)


def _yaml(path: Path, reports: Path | None = None) -> Path:
    path.write_text(LAB_YAML + (f"reports:\n  dir: {reports}\n" if reports else ""))
    return path


def test_the_lab_config_given_wins_over_the_environment(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RINGLAB_CONFIG", str(tmp_path / "absent.yaml"))
    given = _yaml(tmp_path / "given.yaml")
    assert run_folder.config(argparse.Namespace(lab_config=str(given))).path == given


def test_without_lab_config_the_environment_names_lab_yaml(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setenv("RINGLAB_CONFIG", str(tmp_path / "absent.yaml"))
    with pytest.raises(ConfigError, match="absent.yaml: no such file"):
        run_folder.config(argparse.Namespace(lab_config=None))


def test_make_returns_the_folder_made_and_leaves_no_probe_file(tmp_path: Path) -> None:
    out = run_folder.make(tmp_path / "a" / "b")
    assert out == tmp_path / "a" / "b" and out.is_dir()
    assert list(out.iterdir()) == []


def test_a_folder_that_cannot_be_written_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    where = tmp_path / "file" / "run"  # under a file: not writable, whoever runs the test
    with pytest.raises(LabError, match=f"cannot write reports to {where}: Not a directory") as e:
        run_folder.make(where)
    assert "reports.dir" in (e.value.hint or "")


def test_latest_points_at_the_run_by_its_name(tmp_path: Path) -> None:
    cfg = config.load(_yaml(tmp_path / "lab.yaml", tmp_path / "reports"))
    first, second = (run_folder.make(cfg.reports_dir / n) for n in ("one", "two"))
    run_folder.point_latest(cfg, first)
    run_folder.point_latest(cfg, second)
    latest = cfg.reports_dir / "latest"
    assert os.readlink(latest) == "two"  # relative: the reports folder can move
    assert latest.resolve() == second


def test_a_latest_the_user_made_is_left_alone(tmp_path: Path) -> None:
    cfg = config.load(_yaml(tmp_path / "lab.yaml", tmp_path / "reports"))
    mine = run_folder.make(cfg.reports_dir / "latest")
    (mine / "keep").write_text("the user's")
    run_folder.point_latest(cfg, run_folder.make(cfg.reports_dir / "run"))
    assert not mine.is_symlink() and (mine / "keep").read_text() == "the user's"


def test_open_run_makes_a_labelled_folder_logs_to_it_and_points_latest(
        tmp_path: Path, root_logging: logging.Logger) -> None:
    cfg = config.load(_yaml(tmp_path / "lab.yaml", tmp_path / "reports"))
    out = run_folder.open_run(cfg, argparse.Namespace(verbose=False), "bench")
    assert out.parent == cfg.reports_dir and out.name.endswith("-bench")
    logging.getLogger("ringlab.test").debug("only in the file")
    for h in root_logging.handlers:
        h.flush()
    assert "only in the file" in (out / "lab.log").read_text()
    assert (cfg.reports_dir / "latest").resolve() == out


def test_the_screen_shows_debug_only_when_verbose(root_logging: logging.Logger) -> None:
    def screen() -> logging.Handler:
        return next(h for h in root_logging.handlers if isinstance(h, logging.StreamHandler)
                    and not isinstance(h, logging.FileHandler))
    run_folder.setup_logging(False)
    assert screen().level == logging.INFO and len(root_logging.handlers) == 1
    run_folder.setup_logging(True)  # called again: replaces, never adds a second screen
    assert screen().level == logging.DEBUG and len(root_logging.handlers) == 1
    assert logging.getLogger("paramiko").level == logging.CRITICAL
