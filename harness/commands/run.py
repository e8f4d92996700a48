"""`./lab run`: the kernel suite (tests/kernel/) on a kernel, or on several one after the other
into one table; the reports of each run in its folder under reports.dir."""
from __future__ import annotations

import argparse

from harness import config as lab_config
from harness.commands import options
from harness.errors import LabError
from harness.results import known_issues
from harness.runs import request, run_folder, suite

# Read by harness/cli.py, and as text by harness/host.py (./lab's host check): literals only.
OWN_LOGGING: bool = True
HOST_TOOLS: tuple[str, ...] = ()
HOST_TOOLS_WITH: dict[str, tuple[str, ...]] = {"--selftests": ("build",)}

def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("run", help="run the kernel test suite on a kernel, write reports",
                       description=main.__doc__)
    options.kernel(r, "the kernel; several joined by commas, or 'all' of lab.yaml, run one "
                   "after the other into one report with a column per kernel")
    # A child run (multi-kernel, review, bisect, mutate, nightly, benches) gets its request
    # whole: harness/runs/child_run.py RunRequest, as JSON.
    r.add_argument("--request", help=argparse.SUPPRESS)
    options.selection(r)
    r.add_argument("-j", "--jobs", metavar="N", default=None,
                   help="run N guests at once (pytest-xdist: one guest pool per worker, a test "
                   "file or part of one stays on one worker); 'auto' (the default): two a "
                   "host core per guest vCPU, as far as memory holds; -j 1: one after the "
                   "other")
    r.add_argument("--keep-guest", action="store_true", help="keep the guest up at the end")
    r.add_argument("--gdb-on-failure", action="store_true",
                   help="stop at the first failing test and keep its guest paused with QEMU's "
                   "gdbstub open; prints the gdb command line; Ctrl-C ends it")
    r.add_argument("--refresh", action="store_true", help="look for a newer kernel package")
    r.add_argument("--selftests", action="store_true",
                   help="run the kernel's own selftests of these paths too (perf_events, "
                   "ring-buffer, ftracetest's ring-buffer cases), built from the kernel's tree: "
                   "one test per case beside ours")
    r.add_argument("--history", metavar="DIR", help="keep this run's summary in DIR and compare "
                   "it with the previous run of the same kernel (new failures, fixed, flaky)")
    options.pytest_args(r)
    r.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """The main job: the kernel test suite on one kernel (or several), with reports."""
    if args.request:  # a child run: the request is whole, its kernel resolved by the parent
        req = request.RunRequest.from_json(args.request)
        cfg = request.run_config(req)
        known_issues.load()
        report_dir = run_folder.make(req.report_dir)
        run_folder.setup_logging(args.verbose, report_dir / "lab.log")
        return suite.run_one(cfg, req)
    cfg = run_folder.config(args)
    specs = kernel_specs(cfg, args)
    known_issues.load()  # a broken list is a clear error here, not a pytest INTERNALERROR
    # A guest kept for the user (gdb, --keep-guest) needs the one process with a terminal.
    jobs = args.jobs or ("1" if args.gdb_on_failure or args.keep_guest else "auto")
    if args.gdb_on_failure and (len(specs) > 1 or jobs != "1"):
        raise LabError("--gdb-on-failure keeps one guest paused: give one kernel and no -j")
    options_ = dict(selection=args.k, jobs=jobs, refresh=args.refresh, history=args.history,
                    selftests=args.selftests, pytest_args=tuple(args.pytest_args))
    if len(specs) > 1:
        safe = [lab_config.file_safe(s.name) for s in specs]
        parent = run_folder.open_run(cfg, args, "+".join(safe))
        return suite.run_many([request.make(cfg, s, parent / f, **options_)
                               for s, f in zip(specs, safe)], parent)
    report_dir = run_folder.open_run(cfg, args, lab_config.file_safe(specs[0].name))
    req = request.make(cfg, specs[0], report_dir, keep_guest=args.keep_guest,
                       gdb_on_failure=args.gdb_on_failure, **options_)
    return suite.run_one(request.run_config(req, cfg), req)


def kernel_specs(cfg: lab_config.LabConfig, args: argparse.Namespace
                 ) -> list[lab_config.KernelSpec]:
    """--kernel resolved, once: one kernel, a comma-separated list, or 'all' (every kernel of
    lab.yaml); each checked, so an unknown name is an error before anything runs."""
    if args.kernel == "all":
        return [cfg.kernels[n] for n in sorted(cfg.kernels)]
    names = [n.strip() for n in (args.kernel or "").split(",") if n.strip()]
    if len(names) > 1:
        if args.modules:
            raise LabError("--modules goes with one --kernel IMAGE, not a list")
        return [cfg.kernel(n) for n in names]
    return [options.kernel_spec(cfg, args)]
