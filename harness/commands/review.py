"""`./lab review SERIES`: the kernel built without and with a patch series, the same tests and
benchmarks on both, one table of what the series changed. The command line is read here; the
review itself is harness/bench/review.py (the rule: harness/results/review.py)."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness import config as lab_config
from harness.bench import review as review_run
from harness.commands import options
from harness.kernels import gcov
from harness.runs import run_folder

# The review opens its own run folder (reports/<time>-review-<kernel>/) and lab.log there.
OWN_LOGGING: bool = True
# It builds the kernel twice (without and with the series).
HOST_TOOLS: tuple[str, ...] = ("build",)


def register(sub: argparse._SubParsersAction) -> None:
    rv = sub.add_parser("review", help="a patch series: base vs base+series, one table",
                        description=main.__doc__,
                        epilog="exit status: 0 no regression, 1 REGRESSION, 4 too noisy to "
                        "judge (a control figure moved as much as a judged one), 2 error")
    rv.add_argument("series", help="a folder of *.patch, a series file, or an mbox (b4 am)")
    options.kernel(rv, "the kernel to patch, a build kernel (its own series, if any, is part "
                   "of the base) or a source tree")
    options.selection(rv)
    rv.add_argument("--bench-runs", type=int, default=3, help="throughput runs per kernel, "
                    "interleaved with the other kernel's (0: no benchmark; below 3 the figures "
                    "are shown but not judged; default 3)")
    rv.add_argument("--selftests", action="store_true",
                    help="run the kernel's own selftests of these paths too, on both kernels "
                    "built from the patched tree: a selftest case the series adds must fail "
                    "on the base and pass on the patched kernel")
    rv.add_argument("--coverage", action="store_true",
                    help="build both kernels' gcov variants (the ring-buffer files and the C "
                    "files the series changes profiled) and name the changed lines the patched "
                    "kernel's run did not execute")
    options.pytest_args(rv)
    rv.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Review a patch series: build the kernel without and with it, run the same tests on
    both, measure both (interleaved: base, patched, base, ...; a fresh guest per sample), and
    print what the series changed. Exit 1 (REGRESSION) if a test newly fails, newly flakes or
    newly skips, a new kernel warning appears, or a benchmark figure of a path the series
    touches is worse in every pair (patched/base < 0.95) with a median ratio < 0.90 while no
    figure of an untouched path (a control) moved as much. Exit 4 ("too noisy to judge") when
    a control did move as much; exit 0 otherwise. Figures from fewer than 3 runs per kernel
    are shown, not judged."""
    cfg, spec = options.config_and_kernel(args)
    series = Path(args.series).resolve()
    if args.coverage:  # both sides instrumented alike: the benchmark stays a fair comparison
        spec = gcov.variant(cfg, spec, review_run.changed_c_files(series))
        cfg = cfg.with_kernel(spec)
    patched_cfg = review_run.patched(cfg, spec, series)  # not patchable: said before a folder
    out = run_folder.open_run(cfg, args, f"review-{lab_config.file_safe(spec.name)}")
    return review_run.run(review_run.Plan(
        cfg, patched_cfg, spec, series, out, selection=args.k, bench_runs=args.bench_runs,
        selftests=args.selftests, pytest_args=tuple(args.pytest_args), coverage=args.coverage))
