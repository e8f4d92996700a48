"""`./lab run`: the kernel suite (tests/kernel/) on a kernel, or on several one after the other
into one table; the reports of each run in its folder under reports.dir."""
from __future__ import annotations

import argparse
import json
import logging
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from harness import config as lab_config
from harness import host, splat_proof
from harness.commands import child_run, options, run_folder
from harness.errors import LabError
from harness.resources import Lab
from harness.results import history, known_issues, matrix, summary
from harness.selftests import build as selftest_build

log = logging.getLogger("ringlab")
SUITE = run_folder.REPO / "tests" / "kernel"


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("run", help="run the kernel test suite on a kernel, write reports",
                       description=main.__doc__)
    options.kernel(r, "the kernel; several joined by commas, or 'all' of lab.yaml, run one "
                   "after the other into one report with a column per kernel")
    # A child run (multi-kernel, review, bisect, mutate, nightly, benches) gets its request
    # whole: harness/commands/child_run.py RunRequest, as JSON.
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
    cfg = run_folder.config(args)
    if args.request:
        req = child_run.RunRequest.from_json(args.request)
        if req.lab_config != cfg.path:
            cfg = lab_config.load(req.lab_config)
        names = [cfg.kernel(req.kernel).name]
    else:
        names = kernel_names(cfg, args.kernel)
        # A guest kept for the user (gdb, --keep-guest) needs the one process with a terminal.
        jobs = args.jobs or ("1" if args.gdb_on_failure or args.keep_guest else "auto")
        req = child_run.RunRequest(cfg.path, names[0], Path(), selection=args.k, jobs=jobs,
                                 refresh=args.refresh, history=args.history,
                                 keep_guest=args.keep_guest, selftests=args.selftests,
                                 gdb_on_failure=args.gdb_on_failure,
                                 pytest_args=tuple(args.pytest_args))
    known_issues.load()  # a broken list is a clear error here, not a pytest INTERNALERROR
    if req.gdb_on_failure and (len(names) > 1 or (req.jobs or "1") != "1"):
        raise LabError("--gdb-on-failure keeps one guest paused: give one kernel and no -j")
    if len(names) > 1:
        return run_many(cfg, args, names)
    if args.request:
        report_dir = run_folder.make(req.report_dir)
        run_folder.setup_logging(args.verbose, report_dir / "lab.log")
    else:
        report_dir = run_folder.open_run(cfg, args, lab_config.file_safe(names[0]))
        req = child_run.RunRequest(**{**req.__dict__, "report_dir": report_dir})
    lab = prepare_kernel(cfg, req)
    prove_splats(lab, req)
    manifest = prepare_selftests(lab, req) if req.selftests else None
    return run_suite(cfg, req, manifest)


def kernel_names(cfg: lab_config.LabConfig, arg: str | None) -> list[str]:
    """--kernel: one kernel, a comma-separated list, or 'all' (every kernel of lab.yaml)."""
    if arg == "all":
        return sorted(cfg.kernels)
    names = [n.strip() for n in (arg or "").split(",") if n.strip()] or [cfg.kernel(None).name]
    return [cfg.kernel(n).name for n in names]  # each checked: unknown names are an error


def prepare_kernel(cfg: lab_config.LabConfig, req: child_run.RunRequest) -> Lab:
    """Fetch, build and prepare the kernel before pytest collects anything: progress on
    screen, and a kernel that cannot be had is one `lab: error:` naming it, not an error per
    test. A multi-kernel table and a nightly cell say "not run: why" from the summary.json
    left here."""
    prepared = cfg
    if isinstance(cfg.kernel(req.kernel).source, lab_config.BuildKernel):
        prepared = lab_config.with_build(cfg, req.kernel, req.series, req.tree)
    lab = Lab(prepared, refresh=req.refresh)
    try:
        lab.kernel(req.kernel)
    except LabError as e:
        _not_run(req, e.message)
        raise
    return lab


def prove_splats(lab: Lab, req: child_run.RunRequest) -> None:
    """The lab proves it sees this kernel's splats before it judges anything on it
    (harness/splat_proof.py): the proof goes to splat-proof.json, which the run's summary
    reads; a parser blind to what the kernel reported stops the run (exit 2)."""
    log.info("proving splat detection on %s ...", req.kernel)
    try:
        proof = splat_proof.prove(lab, req.kernel, req.report_dir / "splat-proof")
    except splat_proof.Blind as e:
        _not_run(req, e.message)
        raise
    splat_proof.write(proof, req.report_dir)
    (log.info if proof.proved else log.warning)("%s", summary.detection_line(asdict(proof)))


def prepare_selftests(lab: Lab, req: child_run.RunRequest) -> Path:
    """Build the kernel's selftests before pytest collects (one case, one test): a tree that
    cannot be had or a build that fails stops the run with the build's own error."""
    try:
        host.require(host.BUILD_TOOLS)
        if req.selftests_from is not None:
            source = selftest_build.Source(req.selftests_from, f"{req.selftests_from} (the "
                                           "patched tree of a review, on both its kernels)")
            fingerprint = f"tree {req.selftests_from}"
        else:
            source, fingerprint = selftest_build.source_for(lab, req.kernel)
        manifest = selftest_build.build(source, lab.kernel(req.kernel).arch, lab.cache_root,
                                        fingerprint)
    except LabError as e:
        _not_run(req, f"selftests: {e.message}")
        raise
    bundle = selftest_build.load(manifest)
    log.info("selftests: %d cases from %s%s", len(bundle.cases), bundle.source,
             f" (the tree has no {', '.join(bundle.missing)})" if bundle.missing else "")
    return manifest


def _not_run(req: child_run.RunRequest, why: str) -> None:
    """summary.json of a run that stopped before its suite: "not run: why" for the multi-kernel
    table and the nightly cell (harness/results/matrix.py)."""
    (req.report_dir / "summary.json").write_text(json.dumps(
        {"kernel": req.kernel, "not_run": why, "counts": {}}, indent=2))


def run_suite(cfg: lab_config.LabConfig, req: child_run.RunRequest,
              selftests: Path | None = None) -> int:
    """pytest over tests/kernel/ with the lab's plugin (tests/kernel/kselftest too, given the
    built selftests' manifest); the kernel is prepared already."""
    report_dir = req.report_dir
    argv = [str(SUITE), "-p", "harness.pytest_plugin", "--lab-config", str(cfg.path),
            "--kernel", req.kernel, "--lab-report-dir", str(report_dir),
            "--junitxml", str(report_dir / "junit.xml"), "-o", "junit_logging=system-out",
            "--html", str(report_dir / "report.html"), "--self-contained-html",
            "-o", "junit_suite_name=ringlab", "-p", "no:cacheprovider", "-rfEsxXR"]
    for s in req.series:
        argv += ["--lab-series", str(s)]
    if req.tree:
        argv += ["--lab-tree", str(req.tree)]
    if req.keep_guest:
        argv.append("--keep-guest")
    if req.gdb_on_failure:
        argv.append("--gdb-on-failure")
    if selftests:
        argv += ["--lab-selftests", str(selftests)]
    if req.selection:
        argv += ["-k", req.selection]
    try:
        jobs = child_run.run_jobs(cfg.machine.cpus, req.jobs or "1", cfg.machine.memory_mb)
    except ValueError as e:
        raise LabError(str(e)) from None
    if req.jobs == "auto":
        log.info("running %d guest%s at once (-j auto: %d cores, %d MB available, %d vCPU and "
                 "%d MB a guest, two guests a core; -j 1 runs one after the other)", jobs, "s" * (jobs > 1),
                 os.cpu_count() or 1, child_run.available_memory_mb(), cfg.machine.cpus,
                 cfg.machine.memory_mb)
    if jobs > 1:  # pytest-xdist: a guest pool per worker, a test file stays on one worker
        argv += ["-n", str(jobs), "--dist", "loadfile"]
    argv += req.pytest_args
    log.debug("pytest %s", " ".join(argv))
    code = pytest.main(argv)
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        log.error("no test was selected (check -k / the test path)")
    elif req.history and (report_dir / "summary.json").exists():
        kept, comparison = history.record(Path(req.history), report_dir / "summary.json")
        text = "\n".join(comparison.lines()) + "\n"
        (report_dir / "history.txt").write_text(text)
        (report_dir / "history.json").write_text(history.as_json(comparison))
        print(text, end="")
        log.info("run kept in %s", kept)
    log.info("reports in %s", report_dir)
    return int(code)


def run_many(cfg: lab_config.LabConfig, args: argparse.Namespace, names: list[str]) -> int:
    """The suite on each kernel, one after the other (each in its own process, with its own
    reports in a sub-folder), then one table with a column per kernel."""
    safe = {n: lab_config.file_safe(n) for n in names}
    parent = run_folder.open_run(cfg, args, "+".join(safe.values()))
    codes = {}
    for name in names:
        req = child_run.RunRequest(
            cfg.path, name, parent / safe[name], selection=args.k, jobs=args.jobs or "auto",
            refresh=args.refresh, history=args.history, selftests=args.selftests,
            pytest_args=tuple(args.pytest_args))
        log.info("kernel %s: %s", name, " ".join(child_run.argv(req)))
        codes[name] = child_run.run(req).exit_code
    table = matrix.build({n: parent / safe[n] / "summary.json" for n in names})
    (parent / "summary.json").write_text(json.dumps(table, indent=2))
    text = matrix.render(table)
    (parent / "summary.txt").write_text(text)
    print(text, end="")
    log.info("reports in %s", parent)
    return max(codes.values())
