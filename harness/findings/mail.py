"""report.txt: a known issue as the plain-text mail body kernel maintainers expect. A subject
line, what happens, the reproducer and what it printed on a kernel that has the bug and on one
that does not (the lab's own runs, with their release strings), the commit that introduced it
as a Fixes: tag, the code responsible, and what the lab's test checks. Pure: every fact is an
argument, so the text is unit tested without a guest."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

from harness.findings.code import Quote
from harness.results.known_issues import KnownIssue

WIDTH = 72
# What a kselftest-style program's exit status says (tools/testing/selftests/kselftest.h).
VERDICTS = {0: "PASS", 1: "FAIL", 4: "SKIP"}


@dataclass(frozen=True)
class ReproRun:
    """The reproducer on one kernel: its exit status, and the lines it printed."""
    kernel: str          # the lab.yaml name
    release: str         # uname -r
    described: str       # e.g. "Debian sid linux-image-7.2.13+deb14-cloud-amd64 7.2.13-1"
    exit_status: int
    output: tuple[str, ...]

    @property
    def verdict(self) -> str:
        return VERDICTS.get(self.exit_status, f"ERROR (exit {self.exit_status})")


def _wrap(text: str, indent: str = "") -> str:
    """Paragraphs filled to WIDTH; a long word (a test id, a path) is never cut."""
    return "\n".join(textwrap.fill(p, WIDTH, initial_indent=indent, subsequent_indent=indent,
                                    break_long_words=False, break_on_hyphens=False)
                      for p in text.split("\n\n"))


def report_text(issue: KnownIssue, runs: list[ReproRun], quotes: list[Quote], tree: str,
                repro: str, fix: str | None) -> str:
    """The mail body. `repro`: the reproducer's file name, or why there is none; `tree`: what
    the quotes were read from; `fix`: the fix's file name, if there is one."""
    subject = issue.subject or f"{issue.id}"
    out = [f"Subject: [BUG] {subject}", ""]
    out += [_wrap(issue.reason), ""]
    bad = [r for r in runs if r.verdict == "FAIL"]
    good = [r for r in runs if r.verdict == "PASS"]
    if runs:
        out += [f"Reproducer: {repro} (attached). Run as root:", "",
                "  gcc -Wall -pthread -o repro repro.c && ./repro", "",
                _wrap("It exits 0 (KSFT_PASS) when the kernel keeps the ABI, 1 (KSFT_FAIL) "
                      "when it does not. On the kernels tried:"), ""]
        out += [f"  {r.verdict:<5} {r.release} ({r.described})" for r in runs]
        for label, group in (("has the bug", bad), ("does not", good)):
            if group:
                r = group[0]
                out += ["", f"Its output on {r.release} ({label}):", ""]
                out += [f"  {line}" for line in r.output[-25:]]
    else:
        out += [_wrap(f"Reproducer: {repro}")]
    out += [""]
    if issue.fixes:
        out += ["Introduced by:", "", f"Fixes: {issue.fixes}", ""]
    for q in quotes:
        out += [f"{q.file}, {q.function}() ({tree}):", "", textwrap.indent(q.text(), "  "), ""]
    tests = ", ".join(issue.tests)
    out += [_wrap(f"Found and checked by ringlab, a QEMU test lab for the ring-buffer mapping "
                  f"paths: {tests} (kernels/known-issues.yaml: {issue.id})."), ""]
    if fix:
        out += [_wrap(f"A fix to consider is attached as {fix}; it has been tested on the lab "
                      f"only, and carries no Signed-off-by."), ""]
    return "\n".join(out).rstrip("\n") + "\n"
