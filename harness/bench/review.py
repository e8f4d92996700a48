"""`./lab review SERIES`, the run: the kernel built without and with a patch series, the same
tests (child `./lab run`s) and throughput samples (review_figures) on both, one table of what
the series changed (the rule: harness/results/review.py), written through the bench report
writer. The verb (harness/commands/review.py) only reads the command line."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import config as lab_config
from harness.bench import report, review_figures
from harness.coverage import changed, report as coverage_report
from harness.config import KernelSpec, LabConfig
from harness.errors import LabError
from harness.kernels import series as patch_series
from harness.resources import Lab
from harness.results import review
from harness.runs import child_run, request

log = logging.getLogger("ringlab")


@dataclass(frozen=True)
class Plan:
    """A review as asked on the command line."""
    cfg: LabConfig            # with the kernel resolved in it
    patched_cfg: LabConfig    # the same with the series applied (`patched`)
    kernel: KernelSpec        # the base: a build kernel
    series: Path              # the series to review (absolute)
    out: Path                 # the review's run folder
    selection: str | None = None
    bench_runs: int = 3       # 0: no benchmark
    selftests: bool = False
    pytest_args: tuple[str, ...] = ()
    coverage: bool = False    # the kernels are gcov variants: judge the changed lines


def patched(cfg: LabConfig, kernel: KernelSpec, series: Path) -> LabConfig:
    """`cfg` with `kernel` built with `series` after its own patches; a kernel the lab cannot
    patch (not a build kernel) or a series that does not exist is a ConfigError here, before
    the review makes its folder."""
    return cfg.with_kernel(lab_config.varied(kernel, (series,), None, cfg.path))


def suite(plan: Plan, label: str, extra: tuple[Path, ...], patched_tree: Path | None
          ) -> dict[str, Any]:
    """One side's `./lab run` in a child; its summary (a run that could not complete is an
    error: nothing to compare)."""
    req = request.make(plan.cfg, plan.kernel, plan.out / label, selection=plan.selection,
                       series=extra, selftests=plan.selftests,
                       selftests_from=patched_tree if plan.selftests else None,
                       pytest_args=plan.pytest_args)
    log.info("review: %s: %s", label, " ".join(child_run.argv(req)))
    child = child_run.run(req)
    if child.exit_code not in (0, 1) or child.summary is None:
        raise LabError(f"the {label} run could not complete (exit {child.exit_code}); see "
                       f"{plan.out / label}")
    return child.summary


def run(plan: Plan) -> int:
    """Build both kernels, run both suites, sample both, compare; the exit status is the
    verdict's (0 no regression, 1 REGRESSION, 4 too noisy to judge)."""
    name = plan.kernel.name
    # Both builds first: a series that does not apply, or a build error, stops here.
    Lab(plan.cfg).kernel(name)
    patched_tree = Lab(plan.patched_cfg).kernel(name).source_dir
    docs = {label: suite(plan, label, extra, patched_tree)
            for label, extra in (("base", ()), ("patched", (plan.series,)))}
    pairs = review_figures.pairs({"base": plan.cfg, "patched": plan.patched_cfg}, name, plan.out,
                                 plan.bench_runs) if plan.bench_runs else []
    touched = review.touched_paths(review.touched_files(
        [p.text for p in patch_series.read(plan.series)]))
    result = review.compare(docs["base"], docs["patched"], pairs, touched)
    lines, doc = result.lines(), json.loads(result.as_json())
    if plan.coverage:
        assert patched_tree is not None
        judged = changed_lines_run(plan, Lab(plan.cfg).kernel(name).source_dir, patched_tree)
        lines.insert(3, judged.verdict("the patched kernel's run"))
        doc["coverage"] = judged.as_json()
    report.save(plan.out, report.Report([f"review of {plan.series} on {name}", *lines], doc),
                name="review")
    return result.exit_status


def changed_c_files(series: Path) -> tuple[str, ...]:
    """The kernel's .c files a series changes (not tools/, a selftest's own): profiled too in a
    review --coverage."""
    touched = review.touched_files([p.text for p in patch_series.read(series)])
    return tuple(sorted(f for f in touched if f.endswith(".c") and not f.startswith(NOT_KERNEL)))


NOT_KERNEL = ("tools/", "scripts/", "samples/", "Documentation/")


def changed_lines_run(plan: Plan, base_tree: Path | None, patched_tree: Path
                      ) -> changed.Judged:
    """The series' changed lines against the counters of the patched run's guests; its
    coverage report (coverage/suite/: coverage.json, html/) beside the review's."""
    if base_tree is None:
        raise LabError("review --coverage: the base kernel's tree is unknown")
    touched = {f for f in review.touched_files([p.text for p in patch_series.read(plan.series)])
               if not f.startswith(NOT_KERNEL)}  # a selftest's C is no kernel line
    lines = changed.changed_lines(base_tree, patched_tree, touched)
    spec = plan.patched_cfg.kernel(plan.kernel.name)
    profiled = spec.source.profiled if isinstance(spec.source, lab_config.BuildKernel) else ()
    headers = tuple(f for f in lines if f.endswith(".h"))
    cov = coverage_report.write(plan.out / "coverage",
                                [coverage_report.Source("suite", (plan.out / "patched",))],
                                patched_tree, profiled + headers,
                                f"coverage of {plan.kernel.name} + {plan.series.name}")
    if cov.empty:
        raise LabError("review --coverage: no guest of the patched run left gcov data")
    trace = json.loads((plan.out / "coverage" / "suite" / "coverage.json").read_text())
    return changed.judge(lines, trace)
