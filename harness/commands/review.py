"""`./lab review SERIES`: the kernel built without and with a patch series, the same tests and
benchmarks on both, one table of what the series changed (rule: harness/results/review.py)."""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from harness import config as lab_config
from harness.commands import bench, options
from harness.runs import child_run, request, run_folder
from harness.errors import LabError
from harness.kernels import series as patch_series
from harness.resources import Lab
from harness.results import review

log = logging.getLogger("ringlab")


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
    name = spec.name
    series = Path(args.series).resolve()
    patched_cfg = lab_config.with_build(cfg, name, (series,))
    out = run_folder.open_run(cfg, args, f"review-{lab_config.file_safe(name)}")
    # Both builds first: a series that does not apply, or a build error, stops here.
    Lab(cfg).kernel(name)
    patched_tree = Lab(patched_cfg).kernel(name).source_dir
    docs: dict[str, dict] = {}
    for label, extra in (("base", ()), ("patched", (series,))):
        req = request.make(cfg, name, out / label, selection=args.k, series=extra,
                                   selftests=args.selftests,
                                   selftests_from=patched_tree if args.selftests else None,
                                   pytest_args=tuple(args.pytest_args))
        log.info("review: %s: %s", label, " ".join(child_run.argv(req)))
        child = child_run.run(req)
        if child.exit_code not in (0, 1) or child.summary is None:
            raise LabError(f"the {label} run could not complete (exit {child.exit_code}); see "
                           f"{out / label}")
        docs[label] = child.summary
    pairs = bench.review_figures({"base": cfg, "patched": patched_cfg}, name, out,
                                 args.bench_runs) if args.bench_runs else []
    touched = review.touched_paths(review.touched_files(
        [p.text for p in patch_series.read(series)]))
    result = review.compare(docs["base"], docs["patched"], pairs, touched)
    text = "\n".join([f"review of {series} on {name}", *result.lines()]) + "\n"
    (out / "review.txt").write_text(text)
    (out / "review.json").write_text(result.as_json())
    print(text, end="")
    log.info("review reports in %s", out)
    return result.exit_status
