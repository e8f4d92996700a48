"""One report for several kernels: each test's outcome in a column per kernel.

Built from the summary.json each kernel's run wrote; a kernel whose run wrote none (it could
not boot, say) shows in the table with why.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.results.history import outcomes
from harness.results.summary import detection_line

CELL = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "skipped": "skip",
        "xfailed": "xfail", "xpassed": "XPASS", "flaky": "flaky"}


SELFTEST = "kselftest/test_kselftest.py::"  # the node ids of the kernel's own selftests


def build(summaries: dict[str, Path]) -> dict:
    """{"kernels": {name: {release, counts, ...}}, "tests": {test: {kernel: outcome}}}."""
    kernels: dict[str, dict[str, Any]] = {}
    tests: dict[str, dict[str, str]] = {}
    for name, path in summaries.items():
        try:
            s = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            kernels[name] = {"release": None, "error": f"no summary ({e})"}
            continue
        if s.get("not_run"):  # the kernel could not be had: ./lab run said why
            kernels[name] = {"release": None, "error": f"not run: {s['not_run']}"}
            continue
        kernels[name] = {"release": s.get("release"), "arch": s.get("arch"),
                         "page_size": s.get("kernel_facts", {}).get("page size"),
                         "counts": s.get("counts", {}),
                         "boots": s.get("boots", []), "report": str(path.parent),
                         "splat_detection": s.get("splat_detection")}
        for test, outcome in outcomes(s).items():
            tests.setdefault(test, {})[name] = outcome
    return {"kernels": kernels, "tests": dict(sorted(tests.items()))}


def _described(kernel: dict) -> str:
    """release, arch, page size: the columns of one table can differ in all three (issue 16)."""
    if not kernel.get("release"):
        return str(kernel.get("error"))
    parts = [kernel["release"]] + [kernel["arch"]] * bool(kernel.get("arch"))
    if str(kernel.get("page_size") or "").isdigit():
        parts.append(f"{int(kernel['page_size']) // 1024} KiB pages")
    return ", ".join(parts)


def render(table: dict) -> str:
    names = list(table["kernels"])
    width = max([len(t.split("::")[-1]) for t in table["tests"]] + [20])
    cols = [max(len(n), 6) for n in names]
    lines = ["ringlab run on " + ", ".join(
        f"{n} ({_described(k)})" for n, k in table["kernels"].items())]
    # A column whose kernel the lab could not prove it sees splats on is said once, up front.
    lines += [f"{n}: {detection_line(k.get('splat_detection'))}"
              for n, k in table["kernels"].items()
              if k.get("release") and not (k.get("splat_detection") or {}).get("proved")]
    lines.append(" " * width + "  " + "  ".join(n.ljust(c) for n, c in zip(names, cols)))
    differ = 0
    for test, by_kernel in table["tests"].items():
        cells = [CELL.get(by_kernel.get(n, ""), "-") for n in names]
        # A test a column did not run (another selection, a kernel not run) is no outcome.
        differ += len({CELL.get(o, "-") for o in by_kernel.values()}) > 1
        lines.append(test.split("::")[-1].ljust(width) + "  " +
                     "  ".join(c.ljust(w) for c, w in zip(cells, cols)))
    lines.append(f"{len(table['tests'])} tests, {differ} with different outcomes across kernels"
                 " (- : not run there)")
    lines += selftest_counts(table)
    return "\n".join(lines) + "\n"


def selftest_counts(table: dict) -> list[str]:
    """One line per column for the kernel's own selftests (./lab run --selftests), their
    outcomes counted apart from ours: which kernels' own tests pass where ours do not."""
    mine = {t: k for t, k in table["tests"].items() if SELFTEST in t}
    if not mine:
        return []
    lines = ["kernel selftests (tools/testing/selftests, run beside ours):"]
    for name in table["kernels"]:
        counts: dict[str, int] = {}
        for by_kernel in mine.values():
            if (o := by_kernel.get(name)):
                counts[o] = counts.get(o, 0) + 1
        lines.append(f"  {name}: " + (", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
                                      or "not run"))
    return lines
