"""`./lab nightly`: lab.yaml's matrix of cells, each a `./lab run` of its own, as Dask tasks
(harness/nightly/: matrix.py the cells and their requests, cell.py a cell on a worker,
cluster.py the Dask client, report.py the night's report, night.py the whole night). Here:
the command line, parsed and dispatched."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.nightly import matrix
from harness.nightly.night import Plan, run
from harness.runs import run_folder

# Read by harness/cli.py, and as text by harness/host.py (./lab's host check): literals only.
OWN_LOGGING: bool = True
HOST_TOOLS: tuple[str, ...] = ("build",)  # a build kernel's cells build it


def register(sub: argparse._SubParsersAction) -> None:
    ni = sub.add_parser("nightly", help="lab.yaml's nightly matrix, each cell a ./lab run, as "
                        "Dask tasks (a LocalCluster, or --scheduler)", description=main.__doc__)
    ni.add_argument("--scheduler", metavar="tcp://HOST:8786", help="an existing Dask "
                    "scheduler whose workers are lab hosts (default: a LocalCluster of this host)")
    ni.add_argument("--workers", type=int, metavar="N", help="LocalCluster worker processes "
                    "(default: host cores / guest vCPUs, at most one per cell)")
    ni.add_argument("--cell", action="append", default=[], metavar="NAME", help="only this "
                    "cell (again for more)")
    ni.add_argument("--history", metavar="DIR", help="where runs are kept per kernel line "
                    "(default: nightly.history, else <reports.dir>/history)")
    ni.add_argument("--no-refresh", action="store_true", help="do not look for newer Debian "
                    "kernel packages (default: nightly.refresh)")
    ni.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """lab.yaml's nightly matrix (kernels x config variants x guest profiles x test
    selections), each cell a `./lab run` of its own run as a Dask task: on a LocalCluster the
    lab starts (workers: host cores / guest vCPUs), or with --scheduler on an existing Dask
    cluster whose workers are lab hosts at this checkout's commit. One report: the matrix, the
    cells' report folders, one merged kcidb.json, history per kernel line. Exit 0 if every
    cell passed, 1 otherwise."""
    cfg = run_folder.config(args)
    matrix.chosen(cfg, tuple(args.cell))  # no nightly section, or an unknown --cell: no folder
    out = run_folder.open_run(cfg, args, "nightly")
    return run(Plan(cfg, out, scheduler=args.scheduler, workers=args.workers,
                    history=Path(args.history).resolve() if args.history else None,
                    refresh=False if args.no_refresh else None, only=tuple(args.cell)))
