"""report.txt of `./lab report` (harness/findings/mail.py), from facts given as arguments."""
from __future__ import annotations

from harness.findings.code import Quote
from harness.findings.mail import ReproRun, report_text
from harness.results.known_issues import KnownIssue

ISSUE = KnownIssue(
    id="perf-mmap-second-mapping-charged",
    tests=("tests/kernel/test_pinning.py::test_a_buffer_mapped_twice_is_charged_once*",),
    checks=("charged-once",), when=None, splats=(), seen_on=("7.2.13",),
    reason="A perf buffer mapped a second time is charged again.\n\nThe pages are lost.",
    link="kernel/events/core.c", subject="perf/core: a perf buffer mapped again is charged "
    "again", fixes='0c8a4e4139ad ("perf/core: Further simplify perf_mmap()")',
    code=("kernel/events/core.c:perf_mmap_rb",))
BAD = ReproRun("sid-cloud", "7.2.13+deb14-cloud-amd64", "Debian sid 7.2.13-1", 1,
               ("ok 0 - open dummy -> ok", "not ok - end: the allowance: EPERM mapping 9 pages"))
GOOD = ReproRun("trixie-cloud", "6.12.117+deb13-cloud-amd64", "Debian trixie 6.12.117-1", 0,
                ("ok 0 - open dummy -> ok", "# PASS"))
QUOTE = Quote("kernel/events/core.c", "perf_mmap_rb", 7293,
              ("static int perf_mmap_rb(void)", "{", "}"))


def test_the_mail_has_subject_runs_both_outputs_fixes_and_code() -> None:
    text = report_text(ISSUE, [BAD, GOOD], [QUOTE], "linux-source-7.2 7.2.13-1", "repro.c",
                       None)
    lines = text.splitlines()
    assert lines[0] == ("Subject: [BUG] perf/core: a perf buffer mapped again is charged "
                        "again")
    assert "  FAIL  7.2.13+deb14-cloud-amd64 (Debian sid 7.2.13-1)" in lines
    assert "  PASS  6.12.117+deb13-cloud-amd64 (Debian trixie 6.12.117-1)" in lines
    bad = lines.index("Its output on 7.2.13+deb14-cloud-amd64 (has the bug):")
    assert lines[bad + 3] == "  not ok - end: the allowance: EPERM mapping 9 pages"
    assert "Its output on 6.12.117+deb13-cloud-amd64 (does not):" in lines
    assert 'Fixes: 0c8a4e4139ad ("perf/core: Further simplify perf_mmap()")' in lines
    assert "kernel/events/core.c, perf_mmap_rb() (linux-source-7.2 7.2.13-1):" in lines
    assert "  7293  static int perf_mmap_rb(void)" in lines
    # Every prose line fits a mail; a test id is never cut in two.
    prose = [x for x in lines if not x.startswith("  ") and not x.startswith("Subject:")]
    assert all(len(x) <= 72 or " " not in x.strip() for x in prose), prose
    assert any(ISSUE.tests[0] in x for x in lines)
    assert "no Signed-off-by" not in text


def test_without_a_reproducer_the_mail_says_why_and_names_the_fix() -> None:
    text = report_text(ISSUE, [], [], "", "none standalone yet: the lab's test shows it",
                       "fix.patch")
    assert "Reproducer: none standalone yet: the lab's test shows it" in text
    assert "FAIL" not in text and "Its output" not in text
    assert "attached as fix.patch" in text and "no Signed-off-by" in text


def test_an_exit_status_outside_kselftests_is_an_error_not_a_verdict() -> None:
    assert ReproRun("k", "r", "d", 139, ()).verdict == "ERROR (exit 139)"
    assert ReproRun("k", "r", "d", 4, ()).verdict == "SKIP"
