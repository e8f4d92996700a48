"""`./lab report ISSUE`: a known kernel issue as a maintainer reads it (harness/findings/)."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness import arch as arches, config as lab_config
from harness.findings import issue_report
from harness.resources import Lab
from harness.runs import run_folder

# Read by harness/cli.py, and as text by harness/host.py (./lab's host check): literals only.
OWN_LOGGING: bool = True
HOST_TOOLS: tuple[str, ...] = ("build",)


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("report", help="a known kernel issue as a maintainer reads it: "
                       "report.txt, the reproducer run on the lab's kernels, the fix",
                       description=main.__doc__)
    r.add_argument("issue", metavar="ISSUE", help="an id of kernels/known-issues.yaml")
    r.add_argument("--kernel", action="append", metavar="KERNEL", help="a kernel of lab.yaml "
                   "to run the reproducer on (again for more; default: one Debian kernel of "
                   "lab.yaml per suite, for this host's arch)")
    r.add_argument("--source", metavar="KERNEL", help="the build kernel of lab.yaml whose tree "
                   "the code is quoted from (default: the newest Debian source of lab.yaml)")
    r.add_argument("--out", metavar="DIR", help="the folder to write (default: "
                   "reports/<time>-report-ISSUE/)")
    r.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Write a folder for a known kernel issue: report.txt (the mail body: what happens, the
    reproducer's output on a kernel with the bug and one without, Fixes:, the code, what the
    lab checks), repro.c and repro.py (from the failure `./lab explore` kept for it), and
    fix.patch when the issue names a fix. The reproducer is built here and run as root on each
    kernel. Exit 0 when written, 1 when the reproducer passed everywhere (it shows nothing)."""
    issue = issue_report.known(args.issue)
    cfg = run_folder.config(args)
    kernels = args.kernel or issue_report.default_kernels(cfg)
    for k in kernels:
        cfg.kernel(k)   # an unknown name is one clear error before any boot
    # the code is quoted from a kernel of the default arch (harness/findings/issue_report.py)
    source = args.source or issue_report.newest_source(cfg, arches.DEFAULT)
    if args.out:
        out = run_folder.make(Path(args.out))
        run_folder.setup_logging(args.verbose, out / "lab.log")
    else:
        out = run_folder.open_run(cfg, args, f"report-{lab_config.file_safe(issue.id)}")
    req = issue_report.ReportRequest(issue, tuple(kernels), source)
    return issue_report.write(Lab(cfg), req, out).exit_code
