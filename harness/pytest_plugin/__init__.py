"""pytest plugin: guests as fixtures, guest dmesg in each test's report, a run summary.

Load with `-p harness.pytest_plugin` (./lab run does). Options: --kernel, --lab-config,
--keep-guest, --lab-report-dir, --lab-refresh, --fresh-guest-per-test. Tests take the `guest`
fixture; a test that needs another machine profile says so with @pytest.mark.guest(cpus=2), one
that must not share its guest with @pytest.mark.guest(fresh=True).
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import config as lab_config
from harness.boot import console, decode, splats
from harness.results import history, kcidb, known_issues, report as report_files, summary, verdicts
from harness.errors import ConfigError, GuestHang, LabError, SSHError
from harness.boot.guest import Guest
from harness.lab import Lab

log = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parents[2]
GUEST_KEY = pytest.StashKey[Guest]()
LOG_MARK_KEY = pytest.StashKey[int]()
PROBE_MARK_KEY = pytest.StashKey[int]()
TAINT_KEY = pytest.StashKey[int]()
CHECKS_KEY = pytest.StashKey[verdicts.Checks]()
VERDICT_KEY = pytest.StashKey[verdicts.Verdict]()
# Why this attempt of a test ended with the guest or the emulator broken, not the test:
# (cause, what happened), cause "emulator" (no kernel splat: QEMU died, SSH dropped, a hang the
# kernel did not report) or "kernel" (the guest died with a kernel splat). Only these rerun.
BROKE_KEY = pytest.StashKey[tuple[str, str]]()
PROPERTY_CHARS = 300  # a probe's output in a JUnit property: a glimpse, report.html has it all


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("ringlab")
    g.addoption("--kernel", default=None, help="kernel name from lab.yaml (default: its "
                "default_kernel)")
    g.addoption("--lab-config", default=None, help="path to lab.yaml (default: the checkout's)")
    g.addoption("--keep-guest", action="store_true",
                help="leave the guest running at the end, until Ctrl-C, to look around")
    g.addoption("--lab-report-dir", default=None, help="where reports and the console log go")
    g.addoption("--known-issues", default=str(known_issues.KNOWN_ISSUES),
                help="the known kernel issues list (default: kernels/known-issues.yaml)")
    g.addoption("--lab-refresh", action="store_true",
                help="look for a newer Debian kernel package instead of using the cached one")
    g.addoption("--lab-series", action="append", default=[], metavar="PATH",
                help="apply this patch series too (the --kernel must be a `build` kernel)")
    g.addoption("--fresh-guest-per-test", action="store_true",
                help="give every test a guest no other test used (restored from the "
                     "profile's snapshot, so about a second each under TCG)")
    g.addoption("--lab-tree", default=None, metavar="DIR",
                help="build the --kernel from this tree instead (a `build` kernel)")


def pytest_configure(config: pytest.Config) -> None:
    # paramiko logs a traceback for every refused attempt while a guest's sshd starts.
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)
    config.addinivalue_line("markers", "guest(cpus, memory_mb, fresh): boot this test's guest "
                            "with N vCPUs and/or M MB of memory; fresh=True: a guest no other "
                            "test used")
    if config.pluginmanager.has_plugin("ringlab-session"):
        return
    try:
        session = LabSession(config)
    except LabError as e:  # a user mistake (lab.yaml, the known-issues list): no traceback
        raise pytest.UsageError(str(e)) from None
    config.pluginmanager.register(session, "ringlab-session")


@dataclass(frozen=True)
class Profile:
    """A machine profile a test asks for with @pytest.mark.guest(cpus=N, memory_mb=M)."""
    cpus: int
    memory_mb: int


class GuestPool:
    """Guests booted on demand, one per machine profile, reused by every test of the session.
    A guest that died is replaced by a fresh one for the next test. Every guest after the
    first of a profile is restored from its snapshot (harness/boot/snapshot.py), not booted."""

    def __init__(self, lab: Lab, kernel: str, report_dir: Path, console_log: Path) -> None:
        self.lab = lab
        self.kernel = kernel
        self.report_dir = report_dir
        self.console_log = console_log
        self.guests: dict[Profile, Guest] = {}
        self.boots: list[dict] = []
        # Profiles whose pooled guest a fresh=True test had: no other test may use it. It is
        # stopped when the next test asks (its teardown still reads its kernel log first).
        self.spent: set[Profile] = set()

    def get(self, cpus: int | None, memory_mb: int | None = None, fresh: bool = False) -> Guest:
        """The pooled guest of this profile; with `fresh`, a new one no other test used."""
        m = self.lab.config.machine
        p = Profile(cpus or m.cpus, memory_mb or m.memory_mb)
        if fresh or p in self.spent:
            self.discard(p)
            self.spent.discard(p)
        g = self.guests.get(p)
        if g is not None and g.health() is not None:
            log.warning("guest (%d cpu, %d MB) is dead (%s); booting a fresh one", p.cpus,
                        p.memory_mb, g.health())
            self.discard(p)
            g = None
        if g is None:
            g = self.lab.boot(self.kernel, self.console_log,
                              cpus=p.cpus, memory_mb=p.memory_mb)
            self.guests[p] = g
            self.boots.append({"cpus": p.cpus, "memory_mb": p.memory_mb,
                               "boot_s": round(g.record.boot_s, 2), "accel": g.plan.accel,
                               "attempts": g.record.attempts, "restored": g.record.restored,
                               **({"snapshot_fallback": g.record.fallback}
                                  if g.record.fallback else {})})
        if fresh:
            self.spent.add(p)
        return g

    def discard(self, profile: Profile) -> None:
        g = self.guests.pop(profile, None)
        if g is not None:
            g.stop()

    def stop_all(self) -> None:
        for n in list(self.guests):
            self.discard(n)


class LabSession:
    """Per-session state of the plugin (registered as a plugin object, so no globals)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.pool: GuestPool | None = None
        self.error: LabError | None = None
        self.results: list[dict] = []
        self.facts: dict[str, str] = {}
        # Under pytest-xdist (./lab run -j N) each worker runs tests and guests, and only the
        # controller writes the run's files: what a worker learns about the run (boots, the
        # kernel, facts, splats after a test, failed boots) travels to it on the test reports
        # as `ringlab_events`. A serial run takes the same path within one process.
        self.worker = getattr(config, "workerinput", {}).get("workerid")
        self._outbox: list[dict] = []
        self._boots_sent = 0
        self._kernel_sent = False
        self.boots: list[dict] = []
        self.kernel_info: dict = {}
        self.commit = _git_commit()
        self.between_tests: list[dict] = []   # splats logged while no test was running
        self.late_failures = 0                # results failed after their report was written
        # Per guest: kernel_log lines already judged, its state when new, its last test.
        self._reviewed: dict[Guest, int] = {}
        self._baseline: dict[Guest, dict[str, str]] = {}
        self._last_test: dict[Guest, str] = {}
        self.started = time.time()
        cfg_path = config.getoption("--lab-config") or os.environ.get("RINGLAB_CONFIG") or \
            str(REPO / "lab.yaml")
        self.lab_config = lab_config.load(Path(cfg_path))
        self.kernel_name = self.lab_config.kernel(config.getoption("--kernel")).name
        series = tuple(Path(s).resolve() for s in config.getoption("--lab-series"))
        tree = config.getoption("--lab-tree")
        if series or tree:  # ./lab review and ./lab bisect vary the user's build kernel
            self.lab_config = lab_config.with_build(self.lab_config, self.kernel_name, series,
                                                    Path(tree).resolve() if tree else None)
        self.known = known_issues.load(Path(config.getoption("--known-issues")))
        rd = config.getoption("--lab-report-dir")
        self.report_dir = Path(rd) if rd else self.lab_config.reports_dir / time.strftime(
            f"%Y%m%d-%H%M%S-{self.kernel_name}")
        try:
            self.report_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"cannot write reports to {self.report_dir}: {e.strerror}") \
                from None
        self.result_log = report_files.ResultLog(
            self.report_dir / ("results.jsonl" if self.worker is None else
                               f".results-{self.worker}.jsonl"))
        self.written: report_files.Written | None = None

    def _pool(self) -> GuestPool:
        if self.error is not None:  # the lab could not boot a guest: fail fast, same reason
            raise self.error
        if self.pool is None:
            lab = Lab(self.lab_config, refresh=self.config.getoption("--lab-refresh"))
            console = f"console-{self.kernel_name}" + \
                (f"-{self.worker}" if self.worker else "") + ".log"
            self.pool = GuestPool(lab, self.kernel_name, self.report_dir,
                                  self.report_dir / console)
        return self.pool

    @pytest.fixture
    def kernel_fact(self) -> Callable[[str, str], None]:
        """Call it with (name, value) to put what a test learnt about the kernel (e.g. which
        mapping ABI it speaks) in the run's summary.txt and summary.json."""
        return lambda name, value: self._emit("fact", name=name, value=value)

    @pytest.fixture
    def lab(self) -> Lab:
        """The session's Lab (kernels, rootfs, test modules); the same object every time."""
        return self._pool().lab

    @pytest.fixture
    def guest(self, request: pytest.FixtureRequest) -> Iterator[Guest]:
        """The booted guest for this test (booted once per session, kernel and cpus)."""
        marker = request.node.get_closest_marker("guest")
        kwargs = marker.kwargs if marker else {}
        try:
            g = self._pool().get(kwargs.get("cpus"), kwargs.get("memory_mb"),
                                 fresh=bool(kwargs.get("fresh")) or
                                 self.config.getoption("--fresh-guest-per-test"))
        except LabError as e:
            if getattr(e, "console_tail", None) is None:  # not a boot failure: same for all
                self.error = e
            pytest.fail(f"no guest: {e}", pytrace=False)
        if BROKE_KEY in request.node.stash:  # a rerun starts with a clean slate
            del request.node.stash[BROKE_KEY]
        g.kmsg()  # what the kernel logged before this test is not this test's
        self._judge_between(g)
        if g not in self._baseline:  # the state of a new guest, to tell a changed one
            self._baseline[g] = g.state()
        self._last_test[g] = request.node.nodeid
        request.node.stash[GUEST_KEY] = g
        request.node.stash[LOG_MARK_KEY] = len(g.kernel_log)
        request.node.stash[PROBE_MARK_KEY] = len(g.probe_log)
        request.node.stash[TAINT_KEY] = g.tainted
        self._note_boot(g)
        yield g

    @pytest.fixture
    def check(self, request: pytest.FixtureRequest) -> verdicts.Checks:
        """check(id, ok, message, **observed): an ABI check that does not stop the test. The
        plugin fails the test with every failed check, unless a known issue of this test
        (kernels/known-issues.yaml) explains exactly that check."""
        checks = verdicts.Checks()
        request.node.stash[CHECKS_KEY] = checks
        return checks

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Rerun a test in a fresh guest only when the guest or the emulator broke under it,
        never after an assertion failure or a splat (those are kernel findings). A user who
        asks for --reruns N gets pytest-rerunfailures' plain reruns instead."""
        if self.config.getoption("reruns", None):
            return
        for item in items:
            item.add_marker(pytest.mark.flaky(reruns=1, condition=_guest_broke_under(item)))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        self._review(item, call, report)
        if call.when == "call":
            item.user_properties.extend(_properties(item, report))
        self._send_events(report)
        return report

    def _review(self, item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport
                ) -> None:
        """What the guest says about this phase of the test: its dmesg, splats, probe output,
        the verdict, and whether the guest died or must be replaced."""
        g = item.stash.get(GUEST_KEY, None)
        if g is None:  # no guest, no splats: its checks are still judged
            if call.when == "call":
                self._judge(item, report, call, [])
            return
        if call.when == "teardown":
            self._judge_late_splats(item, report, g)
            return
        dead = g.health()
        if dead is None and report.failed and call.excinfo is not None and \
                call.excinfo.errisinstance((GuestHang, SSHError)):
            dead = _wait_for_death(g) or f"the guest stopped answering: " \
                f"{call.excinfo.exconly().splitlines()[0]}"
        if call.when == "setup":  # a fixture's probe may be what the guest died under
            if dead is None or report.passed:
                return
        elif dead is None:
            try:
                g.kmsg()
                lines = g.kernel_log[item.stash.get(LOG_MARK_KEY, len(g.kernel_log)):]
            except LabError as e:
                lines, dead = [], f"guest stopped answering: {e}"
            self._reviewed[g] = len(g.kernel_log)
            if lines:
                text = "\n".join(lines) + "\n"
                # On the call report for the terminal; on the item for the teardown report,
                # which is the one the JUnit writer takes captured output from.
                report.sections.append(("Captured stdout guest dmesg call", text))
                item.add_report_section("call", "stdout guest dmesg", text)
            found = self._note_splats(item, report, g, lines)
            probes = g.probe_log[item.stash.get(PROBE_MARK_KEY, len(g.probe_log)):]
            if probes:
                report.sections.append(("probe output", "\n".join(
                    f"{name} {' '.join(args)} (as {user}, {r.duration_s:.2f} s): "
                    f"{json.dumps(r.data, sort_keys=True)[:4000]}"
                    for name, args, user, r in probes) + "\n"))
            if dead is None:
                self._judge(item, report, call, found)
                self._replace_if_changed(item, report, g, found)
        if dead is not None:
            # The test that was running when the guest died is the one that failed; what
            # the kernel said about it on the console goes with it.
            text = g.vm.console_text()
            tail = console.tail(text, 40)
            found = splats.find(text.splitlines()[-400:])
            if found:
                report.ringlab_splats = self._with_decoded(  # type: ignore[attr-defined]
                    g, [s.as_dict() for s in found])
            kernel_said = [s for s in found if not (g.plan.accel == "tcg" and
                                                    console.tcg_artefact_in(s.lines[0]))]
            item.stash[BROKE_KEY] = ("kernel" if kernel_said else "emulator", dead)
            report.ringlab_broke = item.stash[BROKE_KEY]  # type: ignore[attr-defined]
            report.outcome = "failed"
            report.longrepr = f"the guest died during this test: {dead}\n" \
                              f"last console lines:\n{tail}"
            self._discard(g, f"the guest died during {item.nodeid}")

    def _judge(self, item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo,
               found: list[splats.Splat]) -> None:
        """The test's verdict from its failed checks, its exception and its splats, with the
        known issues of this test excusing exactly their own symptom."""
        checks = item.stash.get(CHECKS_KEY, None)
        raised = None
        if report.failed and call.excinfo is not None:
            raised = summary.first_line(call.excinfo.exconly()) or "the test failed"
        elif report.failed:
            raised = _reason(report)
        tcg = GUEST_KEY in item.stash and item.stash[GUEST_KEY].plan.accel == "tcg"
        bugs = [s.title for s in found
                if not (tcg and console.tcg_artefact_in(s.lines[0]))]
        v = verdicts.judge(checks.failures if checks else [], bugs,
                           known_issues.for_test(self.known, item.nodeid), raised)
        item.stash[VERDICT_KEY] = v
        report.ringlab_not_seen = list(v.not_seen)  # type: ignore[attr-defined]
        if v.outcome == "failed" and raised is None:
            report.outcome = "failed"
            report.longrepr = v.reason + "".join(
                f"\n\n{s.text}" for s in found if s.title in bugs)
        elif v.outcome == "failed" and len(v.unexplained) > 1:  # the exception and more
            report.sections.append(("ringlab verdict", v.reason + "\n"))
            report.ringlab_also = v.unexplained[1:]  # type: ignore[attr-defined]
        elif v.outcome == "xfailed":
            report.outcome = "skipped"
            report.wasxfail = v.reason  # type: ignore[attr-defined]

    def _replace_if_changed(self, item: pytest.Item, report: pytest.TestReport, g: Guest,
                            found: list[splats.Splat]) -> None:
        """After a failure, the next test gets a fresh guest only if this one may have left
        the guest changed: a splat, or state (tracefs, sysctls, processes) not as it was when
        the guest was new. An assertion failure alone costs no boot."""
        if report.passed or (report.skipped and not hasattr(report, "wasxfail")):
            return  # a pass, or a skip for a missing feature: nothing went wrong in the guest
        why = f"the kernel splatted ({found[0].title})" if found else None
        if why is None:
            try:
                now = g.state()
            except LabError as e:
                now, why = {}, f"the guest stopped answering ({e})"
            was = self._baseline.get(g, {})
            changed = [f"{k}: {was.get(k, '?')!r} -> {v!r}" for k, v in now.items()
                       if was.get(k) != v]
            if changed and why is None:
                why = "the test left the guest changed: " + "; ".join(changed)
        if why is not None:
            report.ringlab_replaced = why  # type: ignore[attr-defined]
            report.sections.append(("guest replaced", why + "\n"))
            self._discard(g, f"{item.nodeid}: {why}")

    def _judge_late_splats(self, item: pytest.Item, report: pytest.TestReport, g: Guest
                           ) -> None:
        """A splat the kernel logged after the test returned (deferred work: RCU callbacks,
        irq_work, the ring buffer's own deferred frees) fails that test at its teardown."""
        if VERDICT_KEY not in item.stash or not self._pooled(g) or g.health() is not None:
            return
        try:
            g.kmsg()
        except LabError:
            return
        start = self._reviewed.get(g, len(g.kernel_log))
        self._reviewed[g] = len(g.kernel_log)
        late = self._unexplained_bugs(g, g.kernel_log[start:], item.nodeid)
        if late:
            report.ringlab_splats = self._with_decoded(  # type: ignore[attr-defined]
                g, [s.as_dict() for s in late])
            report.outcome = "failed"
            report.longrepr = (f"the kernel splatted after the test returned: "
                               f"{'; '.join(s.title for s in late)}\n{late[0].text}")
            self._discard(g, f"{item.nodeid}: the kernel splatted after the test returned")

    def _unexplained_bugs(self, g: Guest, lines: list[str], nodeid: str | None
                          ) -> list[splats.Splat]:
        issues = known_issues.for_test(self.known, nodeid) if nodeid else []
        return [s for s in splats.find(lines)
                if not (g.plan.accel == "tcg" and console.tcg_artefact_in(s.lines[0]))
                and not any(i.explains_splat(s.title) for i in issues)]

    def _with_decoded(self, g: Guest | None, found: list[dict]) -> list[dict]:
        """Splat dicts with their frames as file:line when the lab built the kernel (its
        vmlinux and decode_stacktrace.sh at hand), else with why not; never fails the run."""
        k = g.kernel if g is not None else \
            (self.pool.lab.prepared(self.kernel_name) if self.pool else None)
        if not found or k is None:
            return found
        try:
            return decode.with_decoded(found, decode.decoder_for(k))
        except Exception as e:  # a bug of ours in decoding must not cost the run its report
            log.warning("decoding splats failed: %s", e)
            return [{**d, "not_decoded": f"decoding failed: {e}"} for d in found]

    def _pooled(self, g: Guest) -> bool:
        return self.pool is not None and any(p is g for p in self.pool.guests.values())

    def _discard(self, g: Guest, why: str) -> None:
        log.debug("replacing the guest: %s", why)
        if self.pool is None:
            return
        for profile, pooled in list(self.pool.guests.items()):
            if pooled is g:
                self.pool.discard(profile)

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_report_title(self, report) -> None:
        report.title = f"ringlab: {self.kernel_name}"

    def _note_boot(self, g: Guest) -> None:
        """The run's facts (some known only once a guest is up) for report.html's environment
        table; set per test, cheap, so a replacement guest updates them too."""
        try:
            from pytest_metadata.plugin import metadata_key
        except ImportError:  # pytest-html not installed: no HTML report to fill
            return
        meta = self.config.stash.get(metadata_key, None)
        if meta is not None:
            meta.update({"lab.yaml": str(self.lab_config.path), "lab commit": self.commit,
                         "host": os.uname().nodename, "host kernel": os.uname().release,
                         "kernel release": g.kernel.release, "kernel": g.kernel.description,
                         **({"kernel commit": g.kernel.commit} if g.kernel.commit else {}),
                         **({"series": ", ".join(g.kernel.series)} if g.kernel.series else {}),
                         **({"kernel config": str(g.kernel.config)} if g.kernel.config else {}),
                         "accel": f"{g.plan.accel} ({g.plan.cpus} cpu, "
                                  f"{g.plan.memory_mb} MB)"})

    def _note_splats(self, item: pytest.Item, report: pytest.TestReport, g: Guest,
                     lines: list[str]) -> list[splats.Splat]:
        """The splats of a test and its taint change, into its report; the verdict on them is
        _judge's. A TCG artefact (harness/boot/console.py) is shown but fails nothing."""
        found = splats.find(lines)
        report.ringlab_splats = self._with_decoded(  # type: ignore[attr-defined]
            g, [s.as_dict() for s in found])
        before, after = item.stash.get(TAINT_KEY, -1), g.tainted
        if before != after:
            report.ringlab_taint = [before, after]  # type: ignore[attr-defined]
            report.sections.append(("guest kernel taint", f"{before} -> {after}\n"))
        if found:
            text = "\n\n".join(s.text + _decoded_text(d) for s, d in
                                 zip(found, report.ringlab_splats)) + "\n"  # type: ignore
            report.sections.append(("guest kernel splats", text))
            item.add_report_section("call", "stdout guest kernel splats", text)
        return found

    def _judge_between(self, g: Guest) -> None:
        """Splats the kernel logged while no test ran: after a test returned, they fail that
        test (its result is amended); before the guest's first test, they fail its boot."""
        start = self._reviewed.get(g, 0)
        self._reviewed[g] = len(g.kernel_log)
        previous = self._last_test.get(g)
        found = self._unexplained_bugs(g, g.kernel_log[start:], previous)
        if not found:
            return
        titles = "; ".join(s.title for s in found)
        found_dicts = [s.as_dict() for s in found]
        if previous is not None:
            self._emit("between", after_test=previous, splats=found_dicts)
            self._emit("amend", test=previous, splats=found_dicts,
                       reason=f"the kernel splatted after the test returned: {titles}")
        else:
            name = f"boot ({g.plan.cpus} cpu, {g.plan.memory_mb} MB)"
            self._emit("result", entry={
                "test": name, "outcome": "failed", "duration_s": round(g.record.boot_s, 3),
                "reason": f"the kernel splatted while booting: {titles}", "splats": found_dicts})

    def _emit(self, kind: str, **data: object) -> None:
        self._outbox.append({"kind": kind, **data})

    def _send_events(self, report: pytest.TestReport) -> None:
        """What this process learnt about the run since its last report, onto this report."""
        if self.pool is not None:
            for b in self.pool.boots[self._boots_sent:]:
                self._emit("boot", record=b)
            self._boots_sent = len(self.pool.boots)
            if not self._kernel_sent and (k := self.pool.lab.prepared(self.kernel_name)):
                self._kernel_sent = True
                self._emit("kernel", info={"release": k.release, "description": k.description,
                                           "commit": k.commit, "series": list(k.series),
                                           "arch": k.arch})
        if self._outbox:
            report.ringlab_events = self._outbox  # type: ignore[attr-defined]
            self._outbox = []

    def _apply(self, event: dict) -> None:
        """An event of _emit, in the process that writes the run's files."""
        kind = event["kind"]
        if kind == "boot":
            self.boots.append(event["record"])
        elif kind == "kernel":
            self.kernel_info = event["info"]
        elif kind == "fact":
            self.facts[event["name"]] = event["value"]
        elif kind == "between":
            self.between_tests.append({"after_test": event["after_test"],
                                       "splats": event["splats"]})
        elif kind == "amend":
            self._amend(event["test"], event["reason"], event["splats"])
        elif kind == "result":
            self._record(event["entry"])
            self.late_failures += 1

    def _record(self, entry: dict) -> None:
        self.results.append(entry)
        self.result_log.append(entry)

    def _amend(self, test: str, reason: str, found: list[dict]) -> None:
        """Fail a test whose report is already written (results.jsonl: the last line of a
        test is its result)."""
        entry = next((r for r in reversed(self.results) if r["test"] == test), None)
        if entry is None:
            return
        entry.update(outcome="failed", reason=reason, splats=entry.get("splats", []) + found)
        self.result_log.append(entry)
        self.late_failures += 1

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.worker is not None:  # the controller records it
            return
        for event in getattr(report, "ringlab_events", None) or []:
            self._apply(event)
        if report.when == "teardown" and report.failed:  # a splat after the test returned
            self._amend(report.nodeid, _reason(report), [])
            return
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            reason, outcome = "", str(report.outcome)
            if hasattr(report, "wasxfail"):  # a known kernel issue (kernels/known-issues.yaml)
                outcome, reason = ("xfailed" if report.skipped else "xpassed"), report.wasxfail
            elif report.skipped and isinstance(report.longrepr, tuple):
                reason = report.longrepr[2]
            elif report.failed or outcome == "rerun":  # rerun: pytest-rerunfailures
                reason = _reason(report)
            entry = {"test": report.nodeid, "outcome": outcome,
                     "duration_s": round(report.duration, 3), "reason": reason}
            for key in ("splats", "taint", "not_seen", "replaced", "also", "broke"):
                if getattr(report, f"ringlab_{key}", None):
                    entry[key] = getattr(report, f"ringlab_{key}")
            self._record(entry)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        try:
            if self.config.getoption("--keep-guest") and self.pool and self.pool.guests:
                self._keep_guest()
        finally:
            if self.pool is not None:
                self.pool.stop_all()
        if self.worker is not None:  # the controller writes the run's files
            return
        for event in self._outbox:  # learnt after the last report (a serial run)
            self._apply(event)
        self._outbox = []
        final = history.outcomes({"results": self.results})
        findings = self.late_failures or sum(o == "flaky" for o in final.values())
        if findings and exitstatus == pytest.ExitCode.OK:
            # A splat after a test's report, a failed boot, or a failure that did not
            # reproduce is a kernel finding: the run does not pass.
            exitstatus = session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self._write_summary(exitstatus)
        if self.written is not None and self.written.error:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def _decode_rest(self, doc: dict) -> None:
        """Decode the splats no test report carried decoded (between tests, at boot), now
        that the run is over: only reported splats cost a decode."""
        for r in doc["results"]:
            if r.get("splats"):
                r["splats"] = self._with_decoded(None, r["splats"])
        for b in doc["splats_between_tests"]:
            b["splats"] = self._with_decoded(None, b["splats"])

    def _keep_guest(self) -> None:
        assert self.pool is not None
        for g in self.pool.guests.values():
            print(f"\nguest kept: ssh -p {g.record.ssh_port} -i {g.plan.key.private} "
                  f"-o HostKeyAlias=ringlab-guest root@127.0.0.1   (Ctrl-C to stop it)",
                  file=sys.stderr)
        if not sys.stdin.isatty():
            print("--keep-guest: no terminal to wait on; stopping the guest", file=sys.stderr)
            return
        try:
            while all(g.health() is None for g in self.pool.guests.values()):
                time.sleep(1)
        except KeyboardInterrupt:
            pass

    def _write_summary(self, exitstatus: int) -> None:
        doc = summary.build(self.kernel_name, self.kernel_info, self.boots, self.facts,
                            self.between_tests, self.results, exitstatus,
                            time.time() - self.started)
        text = summary.render(doc)
        self._decode_rest(doc)
        files = {"summary.json": json.dumps(doc, indent=2),
                 "kcidb.json": json.dumps(kcidb.from_summary(doc, self.started), indent=2),
                 "summary.txt": text}
        if self.result_log.error:  # the per-test log failed: write it whole, with the rest
            files["results.jsonl"] = "".join(json.dumps(r, sort_keys=True) + "\n"
                                             for r in self.results)
        self.written = report_files.write_files(self.report_dir, files,
                                                self.lab_config.cache_dir, self.kernel_name)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        terminalreporter.write_sep("-", "ringlab")
        written = self.written or report_files.Written(self.report_dir)
        if written.error:
            terminalreporter.write_line(f"ERROR: could not write the reports to "
                                        f"{self.report_dir} ({written.error}); the results "
                                        f"are in {written.folder}", red=True, bold=True)
        terminalreporter.write_line(f"reports: {written.folder}")
        summary = written.folder / "summary.txt"
        if summary.exists():
            for line in summary.read_text().splitlines()[:3]:
                terminalreporter.write_line(line)


def _guest_broke_under(item: pytest.Item) -> Callable[[], bool]:
    """pytest-rerunfailures' rerun condition for item (called with no argument)."""
    return lambda: BROKE_KEY in item.stash


def _wait_for_death(g: Guest, wait_s: float = 5.0) -> str | None:
    """How the guest died, if it did within wait_s; None if it is still alive."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if (dead := g.health()) is not None:
            return dead
        time.sleep(0.2)
    return None


def _reason(report: pytest.TestReport) -> str:
    """Why a test failed, what first: the rule's own message (an assertion's first line, the
    plugin's verdict) rather than where it was raised."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return crash.message[:2000]
    return (str(report.longrepr).strip() if report.longrepr else "")[:2000]


def _properties(item: pytest.Item, report: pytest.TestReport) -> list[tuple[str, str]]:
    """The test's splats, taint change and probe runs as short user_properties, so JUnit
    consumers (CI dashboards) see them as <properties> without parsing system-out."""
    props = []
    found = getattr(report, "ringlab_splats", None)
    if found:
        props.append(("ringlab_splats", json.dumps(
            [{"title": s["title"][:200], "rip": s.get("rip"),
              **({"at": decode.top_frame(s)} if decode.top_frame(s) else {})}
             for s in found[:5]])))
    if getattr(report, "ringlab_taint", None):
        props.append(("ringlab_taint", json.dumps(report.ringlab_taint)))  # type: ignore
    g = item.stash.get(GUEST_KEY, None)
    if g is not None:
        for name, args, user, r in g.probe_log[item.stash.get(PROBE_MARK_KEY,
                                                               len(g.probe_log)):]:
            props.append(("ringlab_probe", json.dumps(
                {"probe": name, "args": list(args), "user": user, "s": round(r.duration_s, 2),
                 "output": json.dumps(r.data, sort_keys=True)[:PROPERTY_CHARS]})))
    return props


def _decoded_text(splat: dict) -> str:
    """The decoded frames under a splat's text in the report, or why there are none."""
    if splat.get("decoded"):
        return "\ndecoded:\n" + "\n".join(f"  {f}" for f in splat["decoded"])
    return f"\nnot decoded: {splat['not_decoded']}" if splat.get("not_decoded") else ""


def _git_commit() -> str:
    """The lab checkout's commit, if it is a git checkout."""
    import subprocess
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=5).stdout.strip() or "?"
    except OSError:
        return "?"
