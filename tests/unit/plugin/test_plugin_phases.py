"""The plugins on a fake guest (tests/unit/plugin/fake_guest.py), through pytester: observation,
verdict, health and the ledger in the order phases.py gives them, without QEMU."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.pytest_plugin import guests, record
from fake_guest import FakeLab

pytest_plugins = ["pytester"]

HEADER = '''
import pytest
from fake_guest import MLOCK, PARANOID, WARNING

@pytest.fixture
def paranoid(guest):
    before = guest.run(f"cat {PARANOID}").stdout.strip()
    yield lambda v: guest.run(f"echo {v} > {PARANOID}")
    guest.run(f"echo {before} > {PARANOID}")

@pytest.fixture
def teardown_fails(guest):
    yield guest
    raise AssertionError("the fixture's teardown failed too")
'''


@pytest.fixture
def lab_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Run a suite (test code after HEADER) with the plugin on fake guests; returns the
    outcome, summary.json, summary.txt and the guests booted."""
    monkeypatch.setattr(guests, "Lab", FakeLab)
    monkeypatch.setattr(FakeLab, "booted", [])
    monkeypatch.setattr(FakeLab, "kernel_config", None)
    monkeypatch.delenv("RINGLAB_CONFIG", raising=False)
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    report_dir = tmp_path / "run"

    def run(code: str, *args: str) -> tuple[pytest.RunResult, dict, str, list]:
        pytester.makepyfile(test_suite=HEADER + code)
        result = pytester.runpytest_inprocess("-p", "harness.pytest_plugin", "-p", "no:cacheprovider",
                                              "-W", "ignore::pytest.PytestAssertRewriteWarning",
                                              "--lab-report-dir", str(report_dir), *args)
        doc = json.loads((report_dir / "summary.json").read_text())
        return result, doc, (report_dir / "summary.txt").read_text(), FakeLab.booted
    return run


def _by_test(doc: dict) -> dict[str, dict]:
    return {r["test"].split("::")[-1]: r for r in doc["results"]}


def test_a_failure_under_a_fixture_that_restores_keeps_its_reason_and_its_guest(
        lab_run) -> None:
    result, doc, text, booted = lab_run('''
def test_a(guest, paranoid):
    paranoid(2)
    assert False, "the test's own failure"

def test_b(guest):
    pass
''')
    result.assert_outcomes(passed=1, failed=1)
    a = _by_test(doc)["test_a"]
    assert a["reason"].startswith("AssertionError: the test's own failure"), a
    assert "replaced" not in a and "teardown_error" not in a
    assert "SSHError" not in text and "GUEST REPLACED" not in text
    assert len(booted) == 1 and len(doc["boots"]) == 1


def test_a_test_that_warm_reboots_gets_a_guest_of_its_own_asked_restored(lab_run) -> None:
    """warm_reboot=True is a profile of its own, whose boot asks Lab.boot for a restore."""
    result, doc, text, booted = lab_run('''
import pytest

def test_a(guest):
    pass

@pytest.mark.guest(warm_reboot=True)
def test_b(guest):
    pass
''')
    result.assert_outcomes(passed=2)
    assert [g.asked_restored for g in booted] == [False, True]


def test_a_guest_a_failed_test_left_changed_is_replaced_after_its_teardown(lab_run) -> None:
    result, doc, text, booted = lab_run('''
def test_a(guest):
    guest.run(f"echo 1024 > {MLOCK}")
    assert False, "leaves the guest changed"

def test_b(guest):
    assert guest.run(f"cat {MLOCK}").stdout.strip() == "516"
''')
    result.assert_outcomes(passed=1, failed=1)
    why = "the test left the guest changed: perf sysctls: '3 516' -> '3 1024'"
    assert _by_test(doc)["test_a"]["replaced"] == why
    assert f"  GUEST REPLACED after test_suite.py::test_a: {why}" in text.splitlines()
    assert len(booted) == 2 and booted[0].stopped


def test_a_passing_test_that_changed_the_guest_costs_no_boot(lab_run) -> None:
    result, doc, _, booted = lab_run('''
def test_a(guest):
    guest.run(f"echo 1024 > {MLOCK}")
''')
    result.assert_outcomes(passed=1)
    assert len(booted) == 1 and "replaced" not in doc["results"][0]


def test_a_teardown_error_is_a_second_failure_or_the_first(lab_run) -> None:
    result, doc, text, _ = lab_run('''
def test_c(teardown_fails):
    assert False, "the first failure"

def test_d(teardown_fails):
    pass
''')
    result.assert_outcomes(passed=1, failed=1, errors=2)
    c, d = _by_test(doc)["test_c"], _by_test(doc)["test_d"]
    assert c["reason"].startswith("AssertionError: the first failure"), c
    assert c["teardown_error"].startswith("AssertionError: the fixture's teardown failed"), c
    lines = text.splitlines()
    at = lines.index("  FAILED  test_suite.py::test_c: AssertionError: the first failure")
    assert lines[at + 1] == "          then: AssertionError: the fixture's teardown failed too"
    assert d["outcome"] == "failed" and "teardown failed too" in d["reason"]
    assert "teardown_error" not in d


def test_a_splat_fails_a_passing_test_and_its_guest_is_replaced(lab_run) -> None:
    result, doc, text, booted = lab_run('''
def test_a(guest):
    guest.log(*WARNING, taint=512)
''')
    result.assert_outcomes(failed=1)
    [a] = doc["results"]
    assert a["reason"].startswith("the kernel splatted during this test: WARNING at "
                                  "kernel/trace/trace.c:8274"), a
    assert a["taint"] == [0, 512] and a["splats"][0]["title"].startswith("WARNING at")
    assert a["replaced"].startswith("the kernel splatted (WARNING at"), a
    assert booted[0].stopped


def test_a_known_issue_excuses_exactly_its_check(lab_run, tmp_path: Path) -> None:
    known = tmp_path / "known.yaml"
    known.write_text('''
issues:
  - id: rule-broken
    test: "*test_suite.py::*"
    checks: [abi-rule]
    when: "got == 1"
    reason: the kernel gives 1
    link: https://example.invalid/rule-broken
''')
    result, doc, text, _ = lab_run('''
def test_shows(guest, check):
    check("abi-rule", False, "wants 0", got=1)

def test_and_another(guest, check):
    check("abi-rule", False, "wants 0", got=1)
    check("other-rule", False, "a second bug")

def test_absent(guest, check):
    check("abi-rule", True, "fixed", got=0)
''', "--known-issues", str(known))
    r = _by_test(doc)
    assert r["test_shows"]["outcome"] == "xfailed" and "rule-broken" in r["test_shows"]["reason"]
    assert r["test_and_another"]["outcome"] == "failed"
    assert r["test_and_another"]["reason"].startswith("check other-rule: a second bug")
    assert r["test_absent"]["outcome"] == "passed"
    assert r["test_absent"]["not_seen"] == ["rule-broken"]
    assert "NOT SEEN known issue rule-broken in " in text and "test_suite.py::test_absent on" in text


def test_a_guest_that_dies_is_its_tests_failure_and_only_that_reruns(lab_run) -> None:
    result, doc, text, booted = lab_run('''
died = []

def test_dies_once(guest):
    if not died:
        died.append(1)
        guest.dead = "QEMU exited (status -9)"
    assert guest.run("true").exit_status == 0

def test_fails(guest):
    assert False, "an assertion is never rerun"
''')
    r = [(x["test"].split("::")[-1], x["outcome"]) for x in doc["results"]]
    assert r == [("test_dies_once", "rerun"), ("test_dies_once", "passed"),
                 ("test_fails", "failed")]
    rerun = doc["results"][0]
    assert rerun["broke"] == ["emulator", "QEMU exited (status -9)"]
    assert rerun["reason"].startswith("the guest died during this test: QEMU exited")
    assert "  RERUN   test_suite.py::test_dies_once: passed on a fresh guest after the " \
           "emulator broke" in text
    assert len(booted) == 2


def test_a_crash_a_known_issue_causes_is_xfailed_once_and_any_other_fails(lab_run,
                                                                          tmp_path: Path) -> None:
    known = tmp_path / "known.yaml"
    known.write_text('''
issues:
  - id: crash-known
    test: "*test_suite.py::test_known_crash"
    splats: ["^Oops: int3 in __rb_free_aux$", "^Kernel panic - not syncing: Fatal exception"]
    reason: the munmap calls into an unloaded module
    link: https://example.invalid/crash-known
'''
    )
    oops = ("Oops: int3: 0000 [#1] SMP NOPTI\\nRIP: 0010:0xffffffffc0418031\\nCall Trace:\\n"
            " <TASK>\\n ? __rb_free_aux+0x3a/0xf0\\n ? perf_mmap_close+0x348/0x390\\n </TASK>\\n"
            "Kernel panic - not syncing: Fatal exception in interrupt\\n")
    result, doc, text, booted = lab_run(f'''
def test_known_crash(guest):
    guest.plan.accel = "tcg"
    guest.console += "{oops}"
    guest.dead = "kernel panic: Fatal exception in interrupt"
    guest.run("true")

def test_other_crash(guest):
    guest.plan.accel = "tcg"
    guest.console += "{oops}"
    guest.dead = "kernel panic: Fatal exception in interrupt"
    guest.run("true")
''', "--known-issues", str(known))
    r = [(x["test"].split("::")[-1], x["outcome"]) for x in doc["results"]]
    # Under TCG too: an int3 at an address that is no text is not the emulator's artefact;
    # on a guest no other test had used (the known crash's was replaced), it is not rerun.
    assert r == [("test_known_crash", "xfailed"), ("test_other_crash", "failed")], r
    assert "a kernel crash on a guest no other test had used" in result.stdout.str()
    known_crash = doc["results"][0]
    assert "crash-known" in known_crash["reason"] and "the guest died" in known_crash["reason"]
    assert [s["title"] for s in known_crash["splats"]][0] == "Oops: int3 in __rb_free_aux"


def test_splats_after_the_test_fail_it_at_teardown_or_at_the_next_test(lab_run) -> None:
    result, doc, text, _ = lab_run('''
import pytest

@pytest.fixture
def warns_after(guest):
    yield guest
    guest.log(*WARNING)

def test_late(warns_after):
    pass

def test_deferred(guest):
    pass

def test_no_guest():  # the kernel logs while no test uses the guest
    from fake_guest import FakeLab
    FakeLab.booted[-1].log(*WARNING)

def test_next(guest):
    pass
''')
    r = _by_test(doc)
    assert r["test_late"]["outcome"] == "failed"
    assert r["test_late"]["reason"].startswith("the kernel splatted after the test returned")
    assert r["test_deferred"]["outcome"] == "failed"
    assert r["test_deferred"]["reason"].startswith("the kernel splatted after the test returned")
    [between] = doc["splats_between_tests"]
    assert between["after_test"] == "test_suite.py::test_deferred"
    assert r["test_next"]["outcome"] == "passed" and r["test_no_guest"]["outcome"] == "passed"
    result.assert_outcomes(passed=4, errors=1)


def test_the_record_crosses_xdist_as_json(lab_run, pytester: pytest.Pytester) -> None:
    """A worker's report reaches the controller through pytest's report serialisation: the
    record must come back whole."""
    from _pytest.reports import TestReport
    rec = record.Record(splats=[{"title": "WARNING at x", "text": "t"}], taint=[0, 512],
                        not_seen=["i"], replaced="why", also=["more"],
                        broke=["kernel", "panic"], events=[{"kind": "fact", "name": "n",
                                                            "value": "v"}])
    report = TestReport("t.py::t", ("t.py", 1, "t"), {}, "failed", "boom", "call")
    record.save(report, rec)
    wire = json.loads(json.dumps(report._to_json()))
    back = TestReport._from_json(wire)
    assert record.of(back) == rec
    assert record.of(TestReport("t.py::u", ("t.py", 2, "u"), {}, "passed", None,
                                "call")) == record.Record()


def test_a_guest_that_dies_under_a_passing_test_body_is_rerun_not_lost(lab_run) -> None:
    # The body returns before anything notices the guest is gone: only the plugin's check
    # after the call finds it. pytest-rerunfailures must still see a failed attempt (it
    # records failures inside its own makereport wrapper) and rerun it on a fresh guest.
    result, doc, text, booted = lab_run('''
died = []

def test_dies_quietly(guest):
    if not died:
        died.append(1)
        guest.dead = "QEMU exited (status -9)"

def test_after(guest):
    assert guest.run("true").exit_status == 0
''')
    r = [(x["test"].split("::")[-1], x["outcome"]) for x in doc["results"]]
    assert r == [("test_dies_quietly", "rerun"), ("test_dies_quietly", "passed"),
                 ("test_after", "passed")]
    assert doc["results"][0]["broke"] == ["emulator", "QEMU exited (status -9)"]
    assert len(booted) == 2


def test_a_test_asks_for_its_kernel_command_line_and_shares_the_guest_of_the_same_one(
        lab_run) -> None:
    result, doc, _, booted = lab_run("""
@pytest.mark.guest(cmdline="reserve_mem=20M:2M:trace")
def test_a(guest):
    assert guest.plan.cmdline == "reserve_mem=20M:2M:trace"

@pytest.mark.guest(cmdline="reserve_mem=20M:2M:trace")
def test_b(guest):
    assert guest.plan.cmdline == "reserve_mem=20M:2M:trace"

def test_c(guest):
    assert guest.plan.cmdline == ""
""")
    result.assert_outcomes(passed=3)
    assert [g.plan.cmdline for g in booted] == ["reserve_mem=20M:2M:trace", ""]
    assert [b.get("cmdline") for b in doc["boots"]] == ["reserve_mem=20M:2M:trace", None]


def test_a_cmdline_given_as_a_function_of_the_arch_gets_the_kernels_arch(lab_run) -> None:
    result, doc, _, booted = lab_run("""
@pytest.mark.guest(cmdline=lambda arch: f"for-{arch}")
def test_a(guest):
    assert guest.plan.cmdline == "for-x86_64"
""")
    result.assert_outcomes(passed=1)
    assert [g.plan.cmdline for g in booted] == ["for-x86_64"]


def test_a_kernel_without_a_needed_option_skips_naming_it_before_any_boot(
        lab_run, tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("CONFIG_RING_BUFFER=y\n# CONFIG_TRACE_REMOTE_TEST is not set\n"
                      "CONFIG_FOO=m\n")
    FakeLab.kernel_config = config
    result, doc, _, booted = lab_run("""
@pytest.mark.kconfig("CONFIG_TRACE_REMOTE_TEST")
def test_remote(guest):
    pass

@pytest.mark.kconfig("RING_BUFFER", "CONFIG_FOO")
def test_present(guest):
    pass
""")
    result.assert_outcomes(passed=1, skipped=1)
    skipped = _by_test(doc)["test_remote"]
    assert "has no CONFIG_TRACE_REMOTE_TEST (is not set in" in skipped["reason"], skipped
    assert len(booted) == 1


def test_a_kernel_whose_config_the_lab_lacks_is_observed_not_skipped(lab_run) -> None:
    result, _, _, booted = lab_run("""
@pytest.mark.kconfig("CONFIG_TRACE_REMOTE_TEST")
def test_remote(guest):
    pass
""")
    result.assert_outcomes(passed=1)


def test_a_kernel_crash_reruns_only_when_an_earlier_test_could_have_caused_it(lab_run) -> None:
    """Issue 31: a deterministic kernel crash is a verdict. A crash on a guest earlier tests
    used is rerun in a fresh guest (their leftovers may be the cause); one on a guest no
    other test used, or with the signature of such a crash seen before, is not."""
    oops = ("BUG: kernel NULL pointer dereference, address: 0000000000000008\\n"
            "Oops: Oops: 0000 [#1] SMP NOPTI\\nRIP: 0010:perf_mmap_close+0x2f/0x390\\n"
            "Call Trace:\\n <TASK>\\n remove_vma+0x2f/0x70\\n </TASK>\\n"
            "Kernel panic - not syncing: Fatal exception\\n")
    result, doc, text, booted = lab_run(f'''
def test_first(guest):
    guest.run("true")

def test_crashes(guest):
    guest.console += "{oops}"
    guest.dead = "kernel panic: Fatal exception"
    guest.run("true")

def test_between(guest):
    guest.run("true")

def test_crashes_the_same(guest):
    guest.console += "{oops}"
    guest.dead = "kernel panic: Fatal exception"
    guest.run("true")
''')
    r = [(x["test"].split("::")[-1], x["outcome"]) for x in doc["results"]]
    assert r == [("test_first", "passed"), ("test_crashes", "rerun"), ("test_crashes", "failed"),
                 ("test_between", "passed"), ("test_crashes_the_same", "failed")], r
    out = result.stdout.str()
    assert "the same kernel crash as test_suite.py::test_crashes (on a fresh guest" in out
    assert out.count("a verdict, not rerun") == 2, out  # the rerun of test_crashes, and the last


def test_the_first_boot_starts_the_other_profiles_ahead(lab_run) -> None:
    """Issue 31: a run on a new kernel boots the profiles its tests want at once, not one cold
    boot after another: the session's first boot hands the other profiles to boot_ahead."""
    from fake_guest import FakeLab
    FakeLab.ahead.clear()
    result, doc, text, booted = lab_run('''
import pytest

def test_default(guest):
    guest.run("true")

@pytest.mark.guest(cpus=2)
def test_two(guest):
    guest.run("true")

@pytest.mark.guest(memory_mb=256, cmdline="nokaslr")
def test_small(guest):
    guest.run("true")
''')
    assert [x["outcome"] for x in doc["results"]] == ["passed"] * 3
    assert len(FakeLab.ahead) == 1, FakeLab.ahead
    ahead = FakeLab.ahead[0]
    assert [(c, cl) for c, _, cl in ahead] == [(2, ""), (1, "nokaslr")], ahead
    assert ahead[1][1] == 256


def test_a_guest_that_died_with_only_a_lockup_is_rerun_even_when_fresh(lab_run) -> None:
    """A soft lockup or an RCU stall alone can be TCG's on a loaded host: rerun, not a
    verdict, though no other test had used the guest."""
    stall = ("watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [sh:181]\\n"
             "RIP: 0010:hang_set+0x3f/0x60 [ringlab_splat]\\n")
    result, doc, text, booted = lab_run(f'''
def test_stalls(guest):
    guest.console += "{stall}"
    guest.dead = "the kernel reports a lockup: watchdog: BUG: soft lockup"
    guest.run("true")
''')
    r = [(x["test"].split("::")[-1], x["outcome"]) for x in doc["results"]]
    assert r == [("test_stalls", "rerun"), ("test_stalls", "failed")], r
    assert "a verdict, not rerun" not in result.stdout.str()
