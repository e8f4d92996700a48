"""A failure's reason is the test's own (issue 23 §1): a guest is judged for replacement only
after the test's fixtures were torn down, and a teardown's error never replaces the first
failure, in summary.txt, summary.json, results.jsonl and kcidb.json alike."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_lab_run import run_suite  # tests/e2e is on sys.path (pytest rootdir-less import)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_stray_qemu")]
SUITE = "tests/suites/suite_masked_reason.py"


def test_a_failure_keeps_its_own_reason_and_only_a_changed_guest_is_replaced(
        tmp_path: Path, make_lab_yaml) -> None:
    p = run_suite("suite_masked_reason.py", tmp_path, make_lab_yaml())
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    by_test = {r["test"].split("::")[-1]: r for r in summary["results"]}
    text = (run / "summary.txt").read_text()

    a = by_test["test_a_fails_while_a_fixture_holds_a_sysctl"]
    assert a["outcome"] == "failed" and "the test's own failure" in a["reason"], a
    assert "replaced" not in a and "teardown_error" not in a, a
    assert f"FAILED  {SUITE}::test_a_fails_while_a_fixture_holds_a_sysctl: AssertionError: " \
           f"the test's own failure" in text, text
    assert "GUEST REPLACED after " + SUITE + "::test_a" not in text, text
    assert "SSHError" not in text and "SSHError" not in (run / "kcidb.json").read_text()

    b = by_test["test_b_leaves_a_sysctl_changed"]
    assert "fails and leaves perf_event_mlock_kb changed" in b["reason"], b
    assert b["replaced"].startswith("the test left the guest changed: perf sysctls: "), b
    assert b["replaced"].endswith(" 1024'"), b
    assert f"GUEST REPLACED after {SUITE}::test_b_leaves_a_sysctl_changed: the test left the " \
           f"guest changed: perf sysctls: " in text, text

    c = by_test["test_c_fails_then_its_teardown_fails"]
    assert c["outcome"] == "failed" and "the first failure" in c["reason"], c
    assert "the fixture's teardown failed too" in c["teardown_error"], c
    line = next(i for i, x in enumerate(text.splitlines()) if "::test_c_fails" in x)
    assert text.splitlines()[line + 1] == \
        "          then: AssertionError: the fixture's teardown failed too", text

    d = by_test["test_d_passes_then_its_teardown_fails"]
    assert d["outcome"] == "failed" and "the fixture's teardown failed too" in d["reason"], d
    assert by_test["test_e_after"]["outcome"] == "passed", text

    # test_a kept its guest; test_b's was replaced: two guests in all.
    assert len(summary["boots"]) == 2, summary["boots"]
    # results.jsonl: the last line of a test is its result, the same as summary.json's.
    last: dict[str, dict] = {}
    for line_text in (run / "results.jsonl").read_text().splitlines():
        entry = json.loads(line_text)
        last[entry["test"]] = entry
    assert list(last.values()) == summary["results"]
