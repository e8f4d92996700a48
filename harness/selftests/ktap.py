"""A KTAP / TAP 13 reader for what kselftest programs and ftracetest print (pure: text in,
records out), after Documentation/dev-tools/ktap.rst and tools/testing/kunit/kunit_parser.py.

Only the top level is judged: indented lines (a nested subtest's own output) and `# ` lines
are the diagnostics of the result that follows them, which is where kselftest_harness.h and
ftracetest put a case's messages.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

RESULT = re.compile(r"^(?P<ok>ok|not ok)\s+(?P<number>\d+)\s*(?:-\s+)?(?P<rest>.*)$")
# The directive: `# SKIP why`, `# XFAIL why`, ... (ftracetest also writes UNRESOLVED, error).
DIRECTIVE = re.compile(r"\s+#\s*(?P<word>SKIP|XFAIL|XPASS|TODO|UNRESOLVED|ERROR|TIMEOUT)\b"
                       r"\s*(?P<reason>.*)$", re.I)
PLAN = re.compile(r"^1\.\.(\d+)")
VERSION = re.compile(r"^(K?TAP) version (\d+)")
TOTALS = re.compile(r"^# Totals: (.*)$")


@dataclass(frozen=True)
class Case:
    """One top-level result line, with the diagnostics printed before it."""
    number: int
    name: str
    ok: bool
    directive: str | None = None   # SKIP, XFAIL, ... in upper case; None for a plain result
    reason: str = ""
    diagnostics: tuple[str, ...] = ()

    @property
    def outcome(self) -> str:
        """passed, failed, skipped, xfailed or xpassed: what pytest would call it."""
        if self.directive == "SKIP":
            return "skipped"
        if self.directive == "XFAIL":
            return "xfailed" if self.ok else "failed"
        if self.directive == "XPASS":
            return "xpassed"
        return "passed" if self.ok and self.directive in (None, "TODO") else "failed"


@dataclass
class Report:
    """One program's output: its cases in order, the plan, a bail-out, the totals line."""
    version: str | None = None
    planned: int | None = None
    cases: list[Case] = field(default_factory=list)
    bailed_out: str | None = None
    totals: dict[str, int] = field(default_factory=dict)
    trailing: list[str] = field(default_factory=list)  # diagnostics after the last result

    def find(self, name: str) -> Case | None:
        """The case of that name (the first, if a program printed it twice)."""
        return next((c for c in self.cases if c.name == name), None)


def parse(text: str) -> Report:
    """Read KTAP or TAP 13 text (a program's stdout and stderr, in order)."""
    report = Report()
    pending: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line:
            continue
        if line != line.lstrip():        # a nested subtest or an indented message
            pending.append(line.strip())
            continue
        if (m := VERSION.match(line)) and report.version is None:
            report.version = f"{m.group(1)} {m.group(2)}"
        elif (m := PLAN.match(line)) and report.planned is None:
            report.planned = int(m.group(1))
        elif (m := TOTALS.match(line)):
            report.totals = {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", m.group(1))}
        elif line.startswith("Bail out!"):
            report.bailed_out = line[len("Bail out!"):].strip() or "bailed out"
        elif (m := RESULT.match(line)):
            name, directive, reason = _directive(m.group("rest"))
            report.cases.append(Case(int(m.group("number")), name, m.group("ok") == "ok",
                                     directive, reason, tuple(pending)))
            pending = []
        else:
            pending.append(line[2:] if line.startswith("# ") else line)
    report.trailing = pending
    return report


def _directive(rest: str) -> tuple[str, str | None, str]:
    if (m := DIRECTIVE.search(rest)):
        return rest[:m.start()].strip(), m.group("word").upper(), m.group("reason").strip()
    return rest.strip(), None, ""
