"""A run of the kernel suite on one kernel, as `./lab run` does it: the kernel prepared before
pytest collects anything, splat detection proved on it, its selftests built, then pytest over
tests/kernel/ with the lab's plugin given the request; or several kernels, each a child run,
into one table."""
from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from harness import config as lab_config
from harness import host, paths, splat_proof
from harness.errors import LabError
from harness.resources import Lab
from harness.results import history, matrix, summary
from harness.runs import child_run, given, request
from harness.selftests import build as selftest_build

log = logging.getLogger("ringlab")


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
        lab.rootfs_ahead(cfg.kernel(req.kernel.name).arch)
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


def run_many(reqs: list[request.RunRequest], parent: Path) -> int:
    """The suite on each kernel, one after the other (each in its own process, with its own
    reports in a sub-folder of `parent`), then one table with a column per kernel."""
    codes = {}
    for req in reqs:
        log.info("kernel %s: %s", req.kernel.name, " ".join(child_run.argv(req)))
        codes[req.kernel.name] = child_run.run(req).exit_code
    table = matrix.build({r.kernel.name: r.report_dir / "summary.json" for r in reqs})
    (parent / "summary.json").write_text(json.dumps(table, indent=2))
    text = matrix.render(table)
    (parent / "summary.txt").write_text(text)
    print(text, end="")
    log.info("reports in %s", parent)
    return max(codes.values())
