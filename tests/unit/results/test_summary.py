"""summary.json's document and summary.txt's lines (harness/results/summary.py), from a real
run's summary.json (tests/unit/data/summary-6.12.json) and from results made to order."""
from __future__ import annotations

import copy
import json
from pathlib import Path

from harness.results import summary

DATA = Path(__file__).resolve().parents[1] / "data"
RUN = json.loads((DATA / "summary-6.12.json").read_text())
KERNEL_INFO = {"release": RUN["release"], "description": RUN["kernel_description"]}


def _doc(results: list[dict], **kernel_info: object) -> dict:
    return summary.build(RUN["kernel"], {**KERNEL_INFO, **kernel_info}, RUN["boots"],
                         RUN["kernel_facts"], [], results, 1, 12.34)


def test_the_document_of_a_real_run_is_rebuilt_from_its_parts() -> None:
    doc = summary.build(RUN["kernel"], KERNEL_INFO, RUN["boots"], RUN["kernel_facts"],
                        RUN["splats_between_tests"], RUN["results"], RUN["exit_status"],
                        RUN["duration_s"])
    for key in ("kernel", "release", "kernel_description", "boots", "counts", "exit_status",
                "duration_s", "kernel_facts", "splats_between_tests", "results"):
        assert doc[key] == RUN[key], key
    assert doc["arch"] is None and doc["kernel_commit"] is None and doc["series"] == []


def test_a_real_run_reads_as_its_header_and_each_test_that_did_not_pass() -> None:
    text = summary.render(_doc(RUN["results"], commit="abc123", series=["/s/0001.patch"]))
    lines = text.splitlines()
    assert lines[0] == ("ringlab run on kernel trixie-cloud (Debian trixie "
                        "linux-image-6.12.107+deb13-cloud-amd64 6.12.107-1)")
    assert lines[1] == ("boots: 1 cpu 1024 MB 8.29 s (tcg), 2 cpu 1024 MB 9.71 s (tcg), "
                        "1 cpu 256 MB 8.12 s (tcg)")
    assert lines[2] == "results: 92 passed, 2 skipped, 4 xfailed"
    assert lines[3].startswith("WARNING: splat detection not proved on this kernel: ")
    assert "kernel commit: abc123" in lines and "series: /s/0001.patch" in lines
    assert "kernel: trace_pipe_raw mmap ABI: mainline (GET_READER _IO('R',0x20) answers)" in lines
    outcomes = [line.split()[0] for line in lines[7:] if not line.startswith(" " * 10)]
    assert outcomes == ["SKIPPED", "XFAILED", "SKIPPED", "XFAILED", "XFAILED", "XFAILED"], text
    assert sum(line.startswith(" " * 10 + "splat: WARNING at") for line in lines) == 2
    assert "PASSED" not in text
    for r in RUN["results"]:
        if r["outcome"] != "passed":
            assert f"{r['outcome'].upper():7s} {r['test']}: {summary.first_line(r['reason'])}" \
                in text
    assert text.endswith("\n") and not text.endswith("\n\n")


def test_no_boot_no_tests_and_no_kernel_are_said_so() -> None:
    doc = summary.build("k", {}, [], {}, [], [], 2, 0.0)
    assert summary.render(doc).splitlines() == [
        "ringlab run on kernel k (not prepared)", "boots: none", "results: no tests ran",
        "WARNING: splat detection not proved on this kernel: this run did not try (only "
        "./lab run does)"]


def test_the_splat_proof_is_in_the_header_proved_or_why_not() -> None:
    proved = {"proved": True, "cached": True, "seen": {
        "warn": ["WARNING at x/ringlab_splat.c:30 ringlab_splat_warn"],
        "bug": ["kernel BUG at x/ringlab_splat.c:160"]}}
    doc = summary.build("k", {}, [], {}, [], [], 0, 0.0, proved)
    assert summary.render(doc).splitlines()[3] == (
        "splat detection: proved on this kernel (WARNING at x/ringlab_splat.c:30 "
        "ringlab_splat_warn; kernel BUG at x/ringlab_splat.c:160), cached")
    doc = summary.build("k", {}, [], {}, [], [], 0, 0.0,
                        {"proved": False, "why": "ringlab_splat cannot be built for it"})
    assert summary.render(doc).splitlines()[3] == (
        "WARNING: splat detection not proved on this kernel: ringlab_splat cannot be built "
        "for it")


def test_the_first_failure_is_the_reason_and_a_later_one_its_second_line() -> None:
    splat = {"title": "WARNING at kernel/trace/trace.c:8274",
             "decoded": ["tracing_buffers_mmap_close (kernel/trace/trace.c:8274)"]}
    results = [{"test": "t::a", "outcome": "failed", "duration_s": 1.0,
                "reason": "\nAssertionError: leaked 3 pages\nassert 3 == 0",
                "teardown_error": "harness.errors.SSHError: not connected to the guest",
                "splats": [splat], "not_seen": ["issue-x"],
                "replaced": "the test left the guest changed: perf sysctls: '2 516' -> '3 516'"}]
    lines = summary.render(_doc(results)).splitlines()[-5:]
    assert lines == [
        "  FAILED  t::a: AssertionError: leaked 3 pages",
        "          then: harness.errors.SSHError: not connected to the guest",
        "          splat: WARNING at kernel/trace/trace.c:8274 at "
        "tracing_buffers_mmap_close (kernel/trace/trace.c:8274)",
        "  NOT SEEN known issue issue-x in t::a on this kernel",
        "  GUEST REPLACED after t::a: the test left the guest changed: perf sysctls: "
        "'2 516' -> '3 516'"]


def test_reruns_read_as_rerun_flaky_or_again() -> None:
    results = [
        {"test": "t::died", "outcome": "rerun", "reason": "the guest died", "broke": ["emulator",
                                                                                     "QEMU"]},
        {"test": "t::died", "outcome": "passed", "reason": ""},
        {"test": "t::flaky", "outcome": "rerun", "reason": "assert 1 == 0"},
        {"test": "t::flaky", "outcome": "passed", "reason": ""},
        {"test": "t::again", "outcome": "rerun", "reason": "the guest died", "broke": ["kernel"]},
        {"test": "t::again", "outcome": "failed", "reason": "the guest died again"}]
    lines = summary.render(_doc(copy.deepcopy(results))).splitlines()[-3:]
    assert lines == [
        "  RERUN   t::died: passed on a fresh guest after the emulator broke: the guest died",
        "  FLAKY   t::flaky: failed, then did not reproduce on a rerun in a fresh guest: "
        "assert 1 == 0",
        "  FAILED  t::again: the guest died again (again on a rerun in a fresh guest)"]


def test_a_splat_line_says_where_or_why_not() -> None:
    assert summary.splat_line({"title": "BUG: x"}) == "splat: BUG: x"
    assert summary.splat_line({"title": "BUG: x", "not_decoded": "no vmlinux"}) == \
        "splat: BUG: x (not decoded: no vmlinux)"
    assert len(summary.splat_line({"title": "W" * 1000})) == 400


def test_first_line_skips_blank_lines_and_is_cut() -> None:
    assert summary.first_line("\n  \n  first  \nsecond") == "first"
    assert summary.first_line("") == ""
    assert len(summary.first_line("x" * 1000)) == 300
