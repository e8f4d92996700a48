"""`./lab review`: a patch series judged by the suite, base against base + series.

The same test selection runs on both kernels (each in its own `./lab run` process, reports in
base/ and patched/), and the throughput probes measure both; the table then says what the
series changed: tests that newly fail, newly pass or newly skip, kernel warnings only the
patched kernel printed, and benchmark figures that moved beyond their run-to-run noise. The
pure part (compare) is unit tested on summaries.
"""
from __future__ import annotations

import json
import re
import statistics
from dataclasses import asdict, dataclass, field
from harness.results import history

PASSING = {"passed", "xfailed", "flaky"}
FAILING = history.FAILING
# A benchmark figure moved beyond noise when the two runs' [min, max] ranges do not overlap
# and the medians differ by more than this fraction.
NOISE_FRACTION = 0.10
_OFFSET = re.compile(r"\+0x[0-9a-f]+/0x[0-9a-f]+|:\d+\b")


@dataclass
class BenchDelta:
    figure: str
    base: dict[str, float]
    patched: dict[str, float]

    @property
    def change(self) -> float:
        return self.patched["median"] / self.base["median"] - 1 if self.base["median"] else 0.0

    @property
    def beyond_noise(self) -> bool:
        apart = self.patched["min"] > self.base["max"] or self.patched["max"] < self.base["min"]
        return apart and abs(self.change) > NOISE_FRACTION

    def line(self) -> str:
        return (f"{self.figure}: {self.base['median']:.4g} -> {self.patched['median']:.4g} "
                f"({self.change:+.1%}; base {self.base['min']:.4g}..{self.base['max']:.4g}, "
                f"patched {self.patched['min']:.4g}..{self.patched['max']:.4g})")


@dataclass
class Review:
    base: str                     # kernel descriptions, for the header
    patched: str
    newly_failing: list[str] = field(default_factory=list)
    newly_passing: list[str] = field(default_factory=list)
    newly_skipped: list[str] = field(default_factory=list)
    new_tests: list[str] = field(default_factory=list)
    gone_tests: list[str] = field(default_factory=list)
    new_warnings: list[str] = field(default_factory=list)
    bench: list[BenchDelta] = field(default_factory=list)
    outcomes: dict[str, tuple[str, str]] = field(default_factory=dict)  # test -> (base, patched)
    # Bigger is better for every figure the review measures (rates), so a drop regresses.
    @property
    def bench_regressions(self) -> list[BenchDelta]:
        return [b for b in self.bench if b.beyond_noise and b.change < 0]

    @property
    def regressed(self) -> bool:
        return bool(self.newly_failing or self.newly_skipped or self.new_warnings
                    or self.gone_tests or self.bench_regressions)

    def lines(self) -> list[str]:
        out = [f"base:    {self.base}", f"patched: {self.patched}",
               f"{len(self.outcomes)} tests on both; verdict: "
               + ("REGRESSION" if self.regressed else "no regression")]
        for label, items in (("NEWLY FAILING", self.newly_failing),
                             ("NEWLY SKIPPED", self.newly_skipped),
                             ("NEW WARNING", self.new_warnings), ("GONE", self.gone_tests),
                             ("NEWLY PASSING", self.newly_passing), ("NEW TEST", self.new_tests)):
            for item in items:
                detail = f" ({' -> '.join(self.outcomes[item])})" if item in self.outcomes else ""
                out.append(f"  {label:14s} {item}{detail}")
        for b in self.bench:
            label = "BENCH WORSE" if b in self.bench_regressions else \
                "BENCH BETTER" if b.beyond_noise else "bench same"
            out.append(f"  {label:14s} {b.line()}")
        return out

    def as_json(self) -> str:
        doc = asdict(self)
        doc["regressed"] = self.regressed
        return json.dumps(doc, indent=2)


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


def compare(base: dict, patched: dict, bench_base: dict[str, list[float]] | None = None,
            bench_patched: dict[str, list[float]] | None = None) -> Review:
    """The review of two summary.json documents (and optional benchmark samples)."""
    before, after = history.outcomes(base), history.outcomes(patched)
    r = Review(base=base.get("kernel_description") or base.get("kernel", "?"),
               patched=patched.get("kernel_description") or patched.get("kernel", "?"))
    for test in sorted(before.keys() | after.keys()):
        if test not in after:
            r.gone_tests.append(test)
            continue
        if test not in before:
            r.new_tests.append(test)
            continue
        b, a = before[test], after[test]
        r.outcomes[test] = (b, a)
        if a in FAILING and b not in FAILING:
            r.newly_failing.append(test)
        elif a == "skipped" and b != "skipped":
            r.newly_skipped.append(test)
        elif a in PASSING and b not in PASSING:
            r.newly_passing.append(test)
    wb, wa = _warnings(base), _warnings(patched)
    old = set().union(*wb.values()) if wb else set()
    for test, titles in sorted(wa.items()):
        r.new_warnings += [f"{test}: {t}" for t in sorted(titles - old)]
    for figure in sorted((bench_base or {}).keys() & (bench_patched or {}).keys()):
        r.bench.append(BenchDelta(figure, _stats(bench_base[figure]),
                                  _stats(bench_patched[figure])))
    return r


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values),
            "n": len(values)}
