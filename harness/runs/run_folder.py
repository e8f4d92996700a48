"""What every `./lab` verb that writes a report does first: find lab.yaml, make the run's
folder under reports.dir (checked writable), log to its lab.log, point reports/latest at it."""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from harness import config as lab_config, paths
from harness.errors import LabError


def setup_logging(verbose: bool, logfile: Path | None = None) -> None:
    """The screen gets `lab: ...` lines (debug with -v); lab.log gets everything."""
    root = logging.getLogger()
    root.setLevel(logging.DEBUG)
    for h in list(root.handlers):
        root.removeHandler(h)
    screen = logging.StreamHandler(sys.stderr)
    screen.setLevel(logging.DEBUG if verbose else logging.INFO)
    screen.setFormatter(logging.Formatter("lab: %(message)s" if not verbose else
                                          "lab: %(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    root.addHandler(screen)
    if logfile is not None:
        logfile.parent.mkdir(parents=True, exist_ok=True)
        f = logging.FileHandler(logfile)
        f.setLevel(logging.DEBUG)
        f.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(f)
    # paramiko logs a traceback for every refused attempt while the guest's sshd starts;
    # harness/guest/ssh.py reports what matters.
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)


def config(args: argparse.Namespace) -> lab_config.LabConfig:
    """--lab-config, else $RINGLAB_CONFIG, else the checkout's lab.yaml (paths.lab_yaml)."""
    return lab_config.load(paths.lab_yaml(args.lab_config))


def make(path: Path) -> Path:
    """The folder, made and proven writable: a report that cannot be written is said now."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / ".writable").touch()
        (path / ".writable").unlink()
    except OSError as e:
        raise LabError(f"cannot write reports to {path}: {e.strerror}",
                       hint="set reports.dir in lab.yaml to a folder you can write") from None
    return path


def point_latest(cfg: lab_config.LabConfig, report_dir: Path) -> None:
    """reports/latest -> this run (only where it is ours to move: a link or nothing)."""
    latest = cfg.reports_dir / "latest"
    if latest.is_symlink() or not latest.exists():
        latest.unlink(missing_ok=True)
        latest.symlink_to(report_dir.name)


def open_run(cfg: lab_config.LabConfig, args: argparse.Namespace, label: str) -> Path:
    """reports/<time>-<label>/: made, logged to (lab.log), and reports/latest."""
    out = make(cfg.reports_dir / time.strftime(f"%Y%m%d-%H%M%S-{label}"))
    setup_logging(args.verbose, out / "lab.log")
    point_latest(cfg, out)
    return out
