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
from harness import host, paths, splat_proof
from harness.commands import options
from harness.runs import child_run, given, request, run_folder
from harness.errors import LabError
from harness.resources import Lab
from harness.results import history, known_issues, matrix, summary
from harness.selftests import build as selftest_build

# Read by harness/cli.py, and as text by harness/host.py (./lab's host check): literals only.
OWN_LOGGING: bool = True
HOST_TOOLS: tuple[str, ...] = ()
HOST_TOOLS_WITH: dict[str, tuple[str, ...]] = {"--selftests": ("build",)}

log = logging.getLogger("ringlab")


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
        return run_one(cfg, req)
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
        return run_many(cfg, args, specs, options_)
    report_dir = run_folder.open_run(cfg, args, lab_config.file_safe(specs[0].name))
    req = request.make(cfg, specs[0], report_dir, keep_guest=args.keep_guest,
                       gdb_on_failure=args.gdb_on_failure, **options_)
    return run_one(request.run_config(req, cfg), req)


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


def run_one(cfg: lab_config.LabConfig, req: request.RunRequest) -> int:
    """One kernel: prepared, its splat detection proved, its selftests built, the suite run.
    `cfg` is the request's (request.run_config)."""
    lab = prepare_kernel(cfg, req)
    prove_splats(lab, req)
    manifest = prepare_selftests(lab, req) if req.selftests else None
    return run_suite(cfg, req, manifest, lab)


def prepare_kernel(cfg: lab_config.LabConfig, req: request.RunRequest) -> Lab:
    """Fetch, build and prepare the kernel before pytest collects anything: progress on
    screen, and a kernel that cannot be had is one `lab: error:` naming it, not an error per
    test. A multi-kernel table and a nightly cell say "not run: why" from the summary.json
    left here."""
    lab = Lab(cfg, refresh=req.refresh)
    try:
        lab.kernel(req.kernel.name)
    except LabError as e:
        _not_run(req, e.message)
        raise
    return lab


def prove_splats(lab: Lab, req: request.RunRequest) -> None:
    """The lab proves it sees this kernel's splats before it judges anything on it
    (harness/splat_proof.py): the proof goes to splat-proof.json, which the run's summary
    reads; a parser blind to what the kernel reported stops the run (exit 2)."""
    log.info("proving splat detection on %s ...", req.kernel.name)
    try:
        proof = splat_proof.prove(lab, req.kernel.name, req.report_dir / "splat-proof")
    except splat_proof.Blind as e:
        _not_run(req, e.message)
        raise
    splat_proof.write(proof, req.report_dir)
    (log.info if proof.proved else log.warning)("%s", summary.detection_line(asdict(proof)))


def prepare_selftests(lab: Lab, req: request.RunRequest) -> Path:
    """Build the kernel's selftests before pytest collects (one case, one test): a tree that
    cannot be had or a build that fails stops the run with the build's own error."""
    try:
        host.require(host.BUILD_TOOLS)
        if req.selftests_from is not None:
            source = selftest_build.Source(req.selftests_from, f"{req.selftests_from} (the "
                                           "patched tree of a review, on both its kernels)")
            fingerprint = f"tree {req.selftests_from}"
        else:
            source, fingerprint = selftest_build.source_for(lab, req.kernel.name)
        manifest = selftest_build.build(source, lab.kernel(req.kernel.name).arch, lab.cache_root,
                                        fingerprint)
    except LabError as e:
        _not_run(req, f"selftests: {e.message}")
        raise
    bundle = selftest_build.load(manifest)
    log.info("selftests: %d cases from %s%s", len(bundle.cases), bundle.source,
             f" (the tree has no {', '.join(bundle.missing)})" if bundle.missing else "")
    return manifest


def _not_run(req: request.RunRequest, why: str) -> None:
    """summary.json of a run that stopped before its suite: "not run: why" for the multi-kernel
    table and the nightly cell (harness/results/matrix.py)."""
    (req.report_dir / "summary.json").write_text(json.dumps(
        {"kernel": req.kernel.name, "not_run": why, "counts": {}}, indent=2))


def run_suite(cfg: lab_config.LabConfig, req: request.RunRequest,
              selftests: Path | None = None, lab: Lab | None = None) -> int:
    """pytest over tests/kernel/ with the lab's plugin (tests/kernel/kselftest too, given the
    built selftests' manifest); the kernel is prepared already."""
    report_dir = req.report_dir
    # The plugin gets the request whole (harness/runs/request.py), the workers too.
    argv = [str(paths.KERNEL_SUITE), "-p", "harness.pytest_plugin",
            "--lab-request", str(request.write(req)),
            "--junitxml", str(report_dir / "junit.xml"), "-o", "junit_logging=system-out",
            "--html", str(report_dir / "report.html"), "--self-contained-html",
            "-o", "junit_suite_name=ringlab", "-p", "no:cacheprovider", "-rfEsxXR"]
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
    code = pytest.main(argv, plugins=[given.Given(lab)] if lab is not None else [])
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


def run_many(cfg: lab_config.LabConfig, args: argparse.Namespace,
             specs: list[lab_config.KernelSpec], options_: dict) -> int:
    """The suite on each kernel, one after the other (each in its own process, with its own
    reports in a sub-folder), then one table with a column per kernel."""
    safe = {s.name: lab_config.file_safe(s.name) for s in specs}
    parent = run_folder.open_run(cfg, args, "+".join(safe.values()))
    codes = {}
    for spec in specs:
        req = request.make(cfg, spec, parent / safe[spec.name], **options_)
        log.info("kernel %s: %s", spec.name, " ".join(child_run.argv(req)))
        codes[spec.name] = child_run.run(req).exit_code
    table = matrix.build({n: parent / safe[n] / "summary.json" for n in safe})
    (parent / "summary.json").write_text(json.dumps(table, indent=2))
    text = matrix.render(table)
    (parent / "summary.txt").write_text(text)
    print(text, end="")
    log.info("reports in %s", parent)
    return max(codes.values())
