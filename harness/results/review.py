"""`./lab review`: a patch series judged by the suite, base against base + series.

The same test selection runs on both kernels (each in its own `./lab run` process, reports in
base/ and patched/), and the throughput probes measure both; the table then says what the
series changed: tests that newly fail, newly flake, newly pass or newly skip, kernel warnings
only the patched kernel printed, and benchmark figures that moved beyond their noise. The pure
part (compare, interleave, touched_paths) is unit tested on summaries and samples.

Tests: each test's change from base to patched is compare.py's (its module docstring holds
the table), the same words the nightly history uses. A test that passed (or was skipped or
xfailed) on the base kernel and is flaky on the patched one (failed, then passed on its rerun
in a fresh guest) is a regression: the series introduced an intermittent failure. Flaky is
not passing here. NEWLY PASSING lists the tests the series fixed (failing or flaky on base)
and those only it let run (skipped on base); a failure on base that is the known issue's
xfail on patched is NOW KNOWN: not fixed, not a regression.

Benchmarks (every figure is a rate: bigger is better). Under TCG on a loaded host one run per
kernel moves figures of untouched paths by half or more (docs/review-bisect.md), so a figure
only judges a series when its noise was measured, and against figures the series cannot have moved:

1. Order. Samples are taken interleaved, one fresh guest each: base, patched, base, patched,
   ... (`interleave`). Pair i is the i-th base and the i-th patched sample, measured back to
   back, so host drift (a kernel build starting, another guest booting) falls on both sides.
2. Comparison. Each pair gives the ratio patched_i / base_i; a figure is reported as its
   ratios and their min / median / max.
3. Enough runs. A figure with fewer than MIN_PAIRS (3) pairs is shown "not judged" and never
   makes a REGRESSION.
4. Controls. A figure's path is the first word of its name ("perf ...", "tracefs ..."); the
   series touches a path when one of its patches modifies a file of PATH_FILES[path]. A
   figure of a path the series does not touch is a control: never judged, its movement
   |log(median ratio)| is what the host alone did to a figure during this review.
5. The rule. A judged figure is worse when EVERY pair's ratio is below 1 - PAIR_NOISE (0.95)
   AND the median ratio is below 1 - THRESHOLD (0.90); better when every ratio is above
   1 + PAIR_NOISE and the median above 1 + THRESHOLD; otherwise same. With noise alone each
   pair falls below 1 with chance about 1/2, so all n of them do with chance about 2^-n (1/8
   at 3 pairs, 1/32 at 5); a control lowers it further (the simulated false-alarm rates:
   docs/results/2026-11-2x-benchmarks.md): more --bench-runs, a sharper judgement.
6. Too noisy. A worse figure whose movement is matched or exceeded by a control's is "too
   noisy to judge", not a regression: the host moved an untouched path as much.

Verdict: REGRESSION (exit 1) when a test regressed (newly failing, newly flaky, newly
skipped, newly known, a new kernel warning, a test gone) whatever the benchmarks say, or when
a judged figure is worse and no control moved as much; else "too noisy to judge" (exit 4) when a
worse figure was matched by a control; else "no regression" (exit 0).
"""
from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import asdict, dataclass, field

from harness.results import compare as changes, history, known_issues

MIN_PAIRS = 3                # fewer interleaved pairs: the figure is shown, not judged
PAIR_NOISE = 0.05            # every pair's ratio must be beyond 1 -/+ this
THRESHOLD = 0.10             # and the median ratio beyond 1 -/+ this
# Which files of a kernel tree feed which measured path (a prefix ending in / is a folder).
PATH_FILES: dict[str, tuple[str, ...]] = {
    "perf": ("kernel/events/", "include/linux/perf_event.h",
             "include/uapi/linux/perf_event.h"),
    "tracefs": ("kernel/trace/ring_buffer.c", "kernel/trace/trace.c", "kernel/trace/trace.h",
                "include/linux/ring_buffer.h", "include/uapi/linux/trace_mmap.h"),
}
VERDICT_EXIT = {"REGRESSION": 1, "too noisy to judge": 4, "no regression": 0}
_OFFSET = re.compile(r"\+0x[0-9a-f]+/0x[0-9a-f]+|:\d+\b")
_DIFF_FILE = re.compile(r"^(?:diff --git a/\S+ b/(?P<git>\S+)|\+\+\+ b/(?P<plus>\S+))", re.M)


def interleave(runs: int) -> list[tuple[int, str]]:
    """(pair, side) in the order the samples are taken: base, patched, base, patched, ...
    so drift of the host lands on both sides of every pair."""
    return [(pair, side) for pair in range(runs) for side in ("base", "patched")]


def touched_files(patch_texts: list[str]) -> set[str]:
    """The files a series' patches modify (their `diff --git` / `+++ b/` lines)."""
    return {m.group("git") or m.group("plus") for text in patch_texts
            for m in _DIFF_FILE.finditer(text)}


def touched_paths(files: set[str]) -> set[str]:
    """The measured paths (keys of PATH_FILES) whose files the series modifies."""
    return {path for path, owned in PATH_FILES.items()
            for f in files for o in owned if f == o or (o.endswith("/") and f.startswith(o))}


def figure_path(figure: str) -> str:
    """A figure's path: the first word of its name ("perf mmap records/s" -> "perf")."""
    return figure.split(" ", 1)[0]


@dataclass
class BenchFigure:
    """One figure's interleaved pairs and what they say."""
    figure: str
    base: list[float]             # pair i's base sample ...
    patched: list[float]          # ... and its patched sample, measured right after it
    control: bool                 # the series touches no file of this figure's path
    status: str = ""              # not judged | control | worse | better | same | too noisy
    note: str = ""

    @property
    def ratios(self) -> list[float]:
        return [p / b for b, p in zip(self.base, self.patched) if b > 0]

    @property
    def median_ratio(self) -> float:
        return statistics.median(self.ratios) if self.ratios else 1.0

    @property
    def movement(self) -> float:
        """How far the figure moved, either way: |log(median ratio)|."""
        return abs(math.log(self.median_ratio)) if self.median_ratio > 0 else math.inf

    def direction(self) -> str:
        """worse / better / same by the pair rule (5. in the module docstring)."""
        r, m = self.ratios, self.median_ratio
        if all(x < 1 - PAIR_NOISE for x in r) and m < 1 - THRESHOLD:
            return "worse"
        if all(x > 1 + PAIR_NOISE for x in r) and m > 1 + THRESHOLD:
            return "better"
        return "same"

    def line(self) -> str:
        r = self.ratios
        if not r:
            return f"{self.figure}: no pair with a base sample"
        each = " ".join(f"{x:.2f}" for x in r)
        return (f"{self.figure}: patched/base per pair {each} (min {min(r):.2f} median "
                f"{self.median_ratio:.2f} max {max(r):.2f}, {self.median_ratio - 1:+.1%}; "
                f"base median {statistics.median(self.base):.4g}, patched median "
                f"{statistics.median(self.patched):.4g})" + (f"; {self.note}" if self.note else ""))


def judge(figures: list[BenchFigure]) -> None:
    """Set each figure's status by the module docstring's rule: controls and figures with
    fewer than MIN_PAIRS pairs are never judged; a worse figure a control moved as much as is
    too noisy."""
    controls = [f for f in figures if f.control and len(f.ratios) >= MIN_PAIRS]
    for f in figures:
        if len(f.ratios) < MIN_PAIRS:
            f.status = "not judged"
            f.note = f"{len(f.ratios)} pair(s); judging needs {MIN_PAIRS}"
        elif f.control:
            f.status = "control"
        else:
            f.status = f.direction()
    for f in figures:
        if f.status != "worse":
            continue
        rival = max(controls, key=lambda c: c.movement, default=None)
        if rival is not None and rival.movement >= f.movement:
            f.status = "too noisy"
            f.note = (f"control {rival.figure!r} moved as much "
                      f"({rival.median_ratio - 1:+.1%}, untouched by the series)")


@dataclass
class Review:
    base: str                     # kernel descriptions, for the header
    patched: str
    newly_failing: list[str] = field(default_factory=list)
    newly_flaky: list[str] = field(default_factory=list)
    newly_passing: list[str] = field(default_factory=list)    # fixed, or skipped on base
    now_known: list[str] = field(default_factory=list)        # failing/flaky -> xfailed
    known_not_seen: list[str] = field(default_factory=list)   # xfailed -> passed
    newly_known: list[str] = field(default_factory=list)      # passed/skipped -> xfailed
    known_issue: dict[str, str] = field(default_factory=dict)  # test -> the issue's id
    newly_skipped: list[str] = field(default_factory=list)
    new_tests: list[str] = field(default_factory=list)
    gone_tests: list[str] = field(default_factory=list)
    new_warnings: list[str] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)    # measured paths the series touches
    bench: list[BenchFigure] = field(default_factory=list)
    outcomes: dict[str, tuple[str, str]] = field(default_factory=dict)  # test -> (base, patched)

    @property
    def bench_regressions(self) -> list[BenchFigure]:
        return [b for b in self.bench if b.status == "worse"]

    @property
    def tests_regressed(self) -> bool:
        return bool(self.newly_failing or self.newly_flaky or self.newly_skipped
                    or self.new_warnings or self.gone_tests or self.newly_known)

    @property
    def verdict(self) -> str:
        if self.tests_regressed or self.bench_regressions:
            return "REGRESSION"
        if any(b.status == "too noisy" for b in self.bench):
            return "too noisy to judge"
        return "no regression"

    @property
    def regressed(self) -> bool:
        return self.verdict == "REGRESSION"

    @property
    def exit_status(self) -> int:
        return VERDICT_EXIT[self.verdict]

    def _bench_header(self) -> list[str]:
        if not self.bench:
            return []
        pairs = max(len(b.ratios) for b in self.bench)
        judged = ", ".join(self.touched) or "none (the series touches no file of a measured path)"
        controls = ", ".join(sorted({figure_path(b.figure) for b in self.bench if b.control}))
        head = f"benchmarks: {pairs} interleaved pair(s); judged paths: {judged}; " \
               f"controls: {controls or 'none'}"
        if pairs < MIN_PAIRS:
            head += f"; not judged (fewer than {MIN_PAIRS} runs per kernel)"
        return [head]

    def lines(self) -> list[str]:
        out = [f"base:    {self.base}", f"patched: {self.patched}",
               f"{len(self.outcomes)} tests on both; verdict: {self.verdict}",
               *self._bench_header()]
        for label, items in (("NEWLY FAILING", self.newly_failing),
                             ("NEWLY FLAKY", self.newly_flaky),
                             ("NEWLY SKIPPED", self.newly_skipped),
                             ("NEW WARNING", self.new_warnings), ("GONE", self.gone_tests),
                             ("NEWLY KNOWN", self.newly_known),
                             ("NOT SEEN", self.known_not_seen), ("NOW KNOWN", self.now_known),
                             ("NEWLY PASSING", self.newly_passing), ("NEW TEST", self.new_tests)):
            for item in items:
                detail = f" ({' -> '.join(self.outcomes[item])})" if item in self.outcomes else ""
                if item in self.known_issue:
                    detail = detail[:-1] + f": known issue {self.known_issue[item]})"
                out.append(f"  {label:14s} {item}{detail}")
        labels = {"worse": "BENCH WORSE", "too noisy": "BENCH NOISY", "better": "BENCH BETTER",
                  "same": "bench same", "control": "bench control", "not judged": "not judged"}
        out += [f"  {labels[b.status]:14s} {b.line()}" for b in self.bench]
        return out

    def as_json(self) -> str:
        doc = asdict(self)
        for entry, b in zip(doc["bench"], self.bench):
            entry["ratios"] = b.ratios
            entry["median_ratio"] = b.median_ratio
        doc.update(verdict=self.verdict, regressed=self.regressed, exit_status=self.exit_status)
        return json.dumps(doc, indent=2)


def _issue_of(summary: dict, test: str) -> str:
    """The known issue an xfailed test's reason names ("known kernel issue ID: ...")."""
    for r in summary.get("results", []):
        if r["test"] == test and r["outcome"] == "xfailed":
            if (issue := known_issues.named_in(r.get("reason") or "")):
                return issue
    return "?"


def _warnings(summary: dict) -> dict[str, set[str]]:
    """Splat titles per test (offsets and line numbers left out, so a patch that moves code
    does not make an old warning look new)."""
    found: dict[str, set[str]] = {}
    for r in summary.get("results", []):
        for s in r.get("splats", []):
            found.setdefault(r["test"], set()).add(_OFFSET.sub("", s["title"]))
    for b in summary.get("splats_between_tests", []):
        for s in b["splats"]:
            found.setdefault("(between tests)", set()).add(_OFFSET.sub("", s["title"]))
    return found


def bench_figures(pairs: list[dict[str, dict[str, float]]], touched: set[str]
                  ) -> list[BenchFigure]:
    """Per figure, its samples of the pairs where both kernels gave it, in pair order.
    `pairs[i]` is {"base": {figure: value}, "patched": {figure: value}}."""
    names = sorted({name for p in pairs for side in p.values() for name in side})
    out = []
    for name in names:
        both = [(p["base"][name], p["patched"][name]) for p in pairs
                if name in p.get("base", {}) and name in p.get("patched", {})]
        if both:
            out.append(BenchFigure(name, [b for b, _ in both], [a for _, a in both],
                                   control=figure_path(name) not in touched))
    judge(out)
    return out


def compare(base: dict, patched: dict,
            bench: list[dict[str, dict[str, float]]] | None = None,
            touched: set[str] | None = None) -> Review:
    """The review of two summary.json documents, with the benchmark's interleaved pairs (see
    bench_figures) and the measured paths the series touches (touched_paths)."""
    r = Review(base=base.get("kernel_description") or base.get("kernel", "?"),
               patched=patched.get("kernel_description") or patched.get("kernel", "?"),
               touched=sorted(touched or ()))
    lists = {changes.GONE: r.gone_tests, changes.NEW_TEST: r.new_tests,
             changes.NEW_FAILURE: r.newly_failing, changes.NEWLY_FLAKY: r.newly_flaky,
             changes.NEWLY_SKIPPED: r.newly_skipped, changes.FIXED: r.newly_passing,
             changes.NEWLY_PASSING: r.newly_passing, changes.KNOWN_NOT_SEEN: r.known_not_seen,
             changes.NEWLY_KNOWN: r.newly_known, changes.FAILURE_NOW_KNOWN: r.now_known}
    for c in changes.changes(history.outcomes(base), history.outcomes(patched)):
        if c.before is not None and c.after is not None:
            r.outcomes[c.test] = (c.before, c.after)
        if c.kind in lists:
            lists[c.kind].append(c.test)
        if c.kind in (changes.KNOWN_NOT_SEEN, changes.NEWLY_KNOWN, changes.FAILURE_NOW_KNOWN):
            r.known_issue[c.test] = _issue_of(base if c.kind == changes.KNOWN_NOT_SEEN
                                              else patched, c.test)
    wb, wa = _warnings(base), _warnings(patched)
    old = set().union(*wb.values()) if wb else set()
    for test, titles in sorted(wa.items()):
        r.new_warnings += [f"{test}: {t}" for t in sorted(titles - old)]
    r.bench = bench_figures(bench or [], touched or set())
    return r
