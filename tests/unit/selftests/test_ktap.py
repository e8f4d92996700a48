"""The KTAP reader and the verdicts it gives, on real output of the kernel's selftests
(tests/unit/data/ktap/: kept from lab runs on 6.12.117, and from the build host, which has
neither an AUX PMU nor a hardware PMU, for a SKIP and a FAIL of the same programs)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.selftests import catalog, ktap, outcome
from harness.selftests.catalog import SelftestCase

DATA = Path(__file__).resolve().parents[1] / "data" / "ktap"


def output(name: str) -> tuple[str, int]:
    """A kept output and its exit status (its last line)."""
    text = (DATA / name).read_text()
    body, _, status = text.rstrip().rpartition("exit status ")
    return body, int(status)


def test_a_harness_pass_is_one_ok_case_with_its_messages_before_it() -> None:
    report = ktap.parse(output("harness-pass-mmap-aux-6.12.117.txt")[0])
    assert report.version == "TAP 13" and report.planned == 1
    [case] = report.cases
    assert (case.name, case.ok, case.directive, case.outcome) == (
        "perf_mmap.aux.map", True, None, "passed")
    assert "RUN           perf_mmap.aux.map ..." in case.diagnostics[-2]
    assert report.totals == {"pass": 1, "fail": 0, "xfail": 0, "xpass": 0, "skip": 0,
                             "error": 0}


def test_a_harness_skip_keeps_the_kernels_reason() -> None:
    [case] = ktap.parse(output("harness-skip-mmap-aux.txt")[0]).cases
    assert (case.ok, case.directive, case.reason, case.outcome) == (
        True, "SKIP", "No AUX event found.", "skipped")


def test_a_harness_failure_carries_the_assertion_that_failed() -> None:
    [case] = ktap.parse(output("harness-fail-remove-on-exec.txt")[0]).cases
    assert not case.ok and case.outcome == "failed"
    assert any("Expected self->fd (-1) != -1" in d for d in case.diagnostics)


def test_ftracetest_prints_the_instance_run_as_a_second_case() -> None:
    report = ktap.parse(output("ftrace-pass-instance-6.12.117.txt")[0])
    assert [c.name for c in report.cases] == ["Change the ringbuffer size",
                                              "(instance) Change the ringbuffer size"]
    assert report.planned == 2 and all(c.outcome == "passed" for c in report.cases)


@pytest.mark.parametrize("line, want", [
    ("ok 3 name # SKIP why not", ("name", "SKIP", "why not", "skipped")),
    ("not ok 2 Basic test # UNRESOLVED", ("Basic test", "UNRESOLVED", "", "failed")),
    ("ok 1 (instance) x # XFAIL", ("(instance) x", "XFAIL", "", "xfailed")),
    ("not ok 4 - dashed # error", ("dashed", "ERROR", "", "failed")),
    ("ok 5 a#b", ("a#b", None, "", "passed")),
])
def test_directives(line: str, want: tuple[str, str | None, str, str]) -> None:
    [case] = ktap.parse(f"KTAP version 1\n1..1\n{line}\n").cases
    assert (case.name, case.directive, case.reason, case.outcome) == want


def test_nested_subtests_are_diagnostics_of_their_parent() -> None:
    text = ("KTAP version 1\n1..1\n    KTAP version 1\n    1..1\n    not ok 1 inner\n"
            "not ok 1 outer\nBail out! gone\n")
    report = ktap.parse(text)
    assert [c.name for c in report.cases] == ["outer"]
    assert "not ok 1 inner" in report.cases[0].diagnostics and report.bailed_out == "gone"


@pytest.mark.parametrize("name, want", [
    ("listing-mmap.txt", ["perf_mmap.rb.remap", "perf_mmap.rb.unmap", "perf_mmap.rb.map",
                          "perf_mmap.aux.remap", "perf_mmap.aux.unmap", "perf_mmap.aux.map"]),
    ("listing-map_test.txt", ["map.subbuf_size_4k.meta_page_check",
                              "map.subbuf_size_4k.data_mmap",
                              "map.subbuf_size_8k.meta_page_check",
                              "map.subbuf_size_8k.data_mmap",
                              "snapshot.excludes_map", "snapshot.excluded_by_map"]),
    ("listing-watermark_signal.txt", ["global.watermark_signal"]),
])
def test_harness_listings_give_every_test_under_every_variant(name: str, want: list[str]) -> None:
    assert catalog.harness_cases((DATA / name).read_text()) == want


def test_a_name_longer_than_its_column_pushes_the_next_one_right() -> None:
    listing = ("# FIXTURE            VARIANT                   TEST\n"
               "a_fixture_name_of_25_chars a_variant_name_longer_than_25 t1\n"
               "                     v2                        t2\n")
    assert catalog.harness_cases(listing) == [
        "a_fixture_name_of_25_chars.a_variant_name_longer_than_25.t1",
        "a_fixture_name_of_25_chars.a_variant_name_longer_than_25.t2",
        "a_fixture_name_of_25_chars.v2.t1", "a_fixture_name_of_25_chars.v2.t2"]


MMAP = SelftestCase("perf_events", "mmap", "perf_mmap.aux.map", 120)
REMOTE = SelftestCase("ftrace", "ftracetest", "remotes/trace.tc", 0, "remotes/test")


def test_verdicts_of_kept_outputs() -> None:
    assert outcome.judge(MMAP, *output("harness-pass-mmap-aux-6.12.117.txt"), 120).kind \
        == "passed"
    skip = outcome.judge(MMAP, *output("harness-skip-mmap-aux.txt"), 120)
    assert (skip.kind, skip.message) == ("skipped", "mmap: SKIP No AUX event found.")
    roe = SelftestCase("perf_events", "remove_on_exec", "remove_on_exec.fork_only", 120)
    fail = outcome.judge(roe, *output("harness-fail-remove-on-exec.txt"), 120)
    assert fail.kind == "failed" and "Expected self->fd" in fail.message
    size = SelftestCase("ftrace", "ftracetest", "00basic/ringbuffer_size.tc", 0)
    assert outcome.judge(size, *output("ftrace-pass-instance-6.12.117.txt"), 900).kind \
        == "passed"


def test_a_case_without_its_result_line_fails_saying_why() -> None:
    text = "TAP version 13\n1..1\n# Starting 1 tests from 1 test cases.\n#  RUN  x ...\n"
    got = outcome.judge(MMAP, text, outcome.TIMEOUT_STATUS, 120)
    assert got.kind == "failed"
    assert "no KTAP result for perf_mmap.aux.map (killed at its 120 s timeout)" in got.message
    half = "TAP version 13\n1..2\nok 1 Change\n"  # ftracetest died before the instance run
    size = SelftestCase("ftrace", "ftracetest", "00basic/ringbuffer_size.tc", 0)
    assert outcome.judge(size, half, 1, 900).kind == "failed"


def test_an_ftrace_skip_without_words_names_what_the_case_requires() -> None:
    text = "TAP version 13\n1..1\nok 1 Test trace remote # SKIP\n"
    assert outcome.judge(REMOTE, text, 0, 900).message == (
        "ftracetest: SKIP, no reason printed (the case requires: remotes/test; it may check "
        "more itself)")
    assert REMOTE.setup() == "modprobe remote_test" and MMAP.setup() is None


def test_case_ids_and_commands() -> None:
    assert MMAP.id == "perf_events/mmap/perf_mmap.aux.map"
    assert REMOTE.id == "ftrace/remotes/trace"
    assert MMAP.command("/r") == "cd /r/perf_events && ./mmap -r perf_mmap.aux.map 2>&1"
    assert "./ftracetest -K" in REMOTE.command("/r") and "test.d/remotes/trace.tc" in \
        REMOTE.command("/r")


def test_a_kept_ftrace_skip_is_a_skip_naming_the_requirement() -> None:
    got = outcome.judge(REMOTE, *output("ftrace-skip-remote-7.2.13.txt"), 900)
    assert got == outcome.Outcome("skipped", "ftracetest: SKIP, no reason printed (the case "
                                  "requires: remotes/test; it may check more itself)")


def test_a_bare_ftrace_skip_is_explained_by_the_check_its_log_ends_on() -> None:
    text = ("TAP version 13\n1..1\nok 1 Test trace remote read with an offline CPU # SKIP\n"
            "# Totals: pass:0 fail:0 xfail:0 xpass:0 skip:1 error:0\n"
            "# log: + get_cpu_ids\n# log: + wc -l\n# log: + [ 2 -ge 2 ]\n"
            "# log: + echo 0\n# log: ./ftracetest: 11: cannot create "
            "/sys/devices/system/cpu/cpu0/online: Permission denied\n# log: + return 1\n"
            "# log: + exit_unsupported\n")
    got = outcome.judge(REMOTE, text, 0, 900)
    assert got.kind == "skipped" and got.message == (
        "ftracetest: SKIP (UNSUPPORTED after: echo 0; ./ftracetest: 11: cannot create "
        "/sys/devices/system/cpu/cpu0/online: Permission denied; return 1)")
