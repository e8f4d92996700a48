"""`./lab coverage`: which lines of the ring-buffer files the suite, the explorer and the
kernel's own selftests ran, on the gcov variant of a build kernel (harness/kernels/gcov.py);
the counters and reports are harness/coverage/."""
from __future__ import annotations

import argparse
import logging
import subprocess
import sys
from pathlib import Path

from harness import config as lab_config, lifetime, paths
from harness.commands import options
from harness.explore.session import parse_budget
from harness.coverage import report
from harness.errors import LabError
from harness.kernels import gcov
from harness.resources import Lab
from harness.runs import child_run, request, run_folder

log = logging.getLogger("ringlab")

OWN_LOGGING: bool = True
HOST_TOOLS: tuple[str, ...] = ("build",)

SELFTESTS = "kselftest"  # the kernel's own selftests' tests (tests/kernel/kselftest/)


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("coverage", help="which kernel lines the suite, explorer and selftests "
                       "ran (gcov), per function and as annotated HTML", description=main.__doc__)
    options.kernel(c, "a build kernel; its gcov variant is built (Debian kernels have no gcov)")
    options.selection(c, "only the suite's tests matching EXPR (pytest -k)")
    c.add_argument("--explore", metavar="BUDGET", help="run the explorer too, BUDGET per path "
                   "(60s, 10m), seed 0")
    c.add_argument("--seed", default="0", help="the explorer's seed (default 0)")
    c.add_argument("--steer", action="store_true", help="the explorer steered by the edges it "
                   "has run (./lab explore --steer)")
    c.add_argument("--selftests", action="store_true", help="run the kernel's own selftests of "
                   "these paths too, as a third source")
    c.add_argument("--no-suite", action="store_true", help="do not run the suite (with "
                   "--explore or --selftests)")
    options.pytest_args(c)
    c.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Build the gcov variant of a build kernel (its ring-buffer files profiled, the rest as
    before), run the suite, and with --explore and --selftests the explorer and the kernel's
    selftests, each guest's counters read before it stops; write per source and for their
    union coverage.json, html/index.html and summary.txt's table per function (the mapping
    functions first). Exit 1 if a run failed (its coverage is still written), 0 otherwise."""
    cfg, spec = options.config_and_kernel(args)
    cov = gcov.variant(cfg, spec)
    if args.no_suite and not (args.explore or args.selftests):
        raise LabError("--no-suite leaves nothing to run: add --explore BUDGET or --selftests")
    budget = parse_budget(args.explore) if args.explore else None
    cfg = cfg.with_kernel(cov)
    out = run_folder.open_run(cfg, args, f"coverage-{lab_config.file_safe(spec.name)}")
    k = Lab(cfg).kernel(cov.name)
    if k.source_dir is None:
        raise LabError(f"kernel {cov.name}: the lab built it but recorded no source tree")
    failed: list[str] = []
    sources: list[report.Source] = []
    if not args.no_suite:
        sel = f"({args.k}) and not {SELFTESTS}" if args.k else f"not {SELFTESTS}"
        sources.append(_suite(cfg, cov, out / "runs" / "suite", "suite", sel,
                              tuple(args.pytest_args), False, failed))
    if args.selftests:
        sources.append(_suite(cfg, cov, out / "runs" / "selftests", "selftests", SELFTESTS,
                              (), True, failed))
    if budget is not None:
        sources.append(_explore(cfg, cov, out / "runs" / "explorer", budget, args.seed,
                                args.steer, failed))
    cov_result = report.write(out, sources, k.source_dir, gcov.FILES,
                              f"coverage of {spec.name} ({k.release})")
    print(report.summary(cov_result, f"coverage of {spec.name} ({k.release})", mapping_only=True))
    print(f"every function: {out / 'summary.txt'}")
    for name in cov_result.empty:
        print(f"lab: warning: the {name} left no coverage data (no guest of it was read)",
              file=sys.stderr)
    print(f"reports: {out}" + "".join(f"\n  {s.name}: {out / s.name / 'html' / 'index.html'}"
                                      for s in sources if s.name not in cov_result.empty))
    for f in failed:
        print(f"lab: {f}", file=sys.stderr)
    return 1 if failed else 0


def _suite(cfg: lab_config.LabConfig, spec: lab_config.KernelSpec, folder: Path, name: str,
           selection: str, pytest_args: tuple[str, ...], selftests: bool, failed: list[str]
           ) -> report.Source:
    req = request.make(cfg, spec, folder, selection=selection, selftests=selftests,
                       pytest_args=pytest_args)
    log.info("coverage: the %s: %s", name, " ".join(child_run.argv(req)))
    child = child_run.run(req)
    if child.exit_code != 0:
        failed.append(f"the {name} run exited {child.exit_code}: see {folder}")
    return report.Source(name, (folder,))


def _explore(cfg: lab_config.LabConfig, spec: lab_config.KernelSpec, folder: Path,
             budget_s: float, seed: str, steer: bool, failed: list[str]) -> report.Source:
    req = request.make(cfg, spec, folder)
    argv = [sys.executable, "-m", "harness.cli", "--lab-config", str(cfg.path), "explore",
            "--request", req.to_json(), "--budget", f"{budget_s:g}s", "--seed", seed,
            *(["--steer"] if steer else [])]
    log.info("coverage: the explorer: %s", " ".join(argv[:5] + ["..."] + argv[-4:]))
    code = subprocess.call(argv, cwd=paths.REPO, preexec_fn=lifetime.stop_with_parent)
    if code != 0:
        failed.append(f"the explorer exited {code}: see {folder}")
    return report.Source("explorer", (folder,))
