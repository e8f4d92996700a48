"""pytest plugin: guests as fixtures, guest dmesg in each test's report, a run summary.

Load with `-p harness.pytest_plugin` (./lab run does). Options: --kernel, --lab-config,
--keep-guest, --lab-report-dir, --lab-refresh. Tests take the `guest` fixture; a test that
needs another machine profile says so with @pytest.mark.guest(cpus=2).
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import config as lab_config
from harness.boot import console, splats
from harness.results import history, kcidb, known_issues, report as report_files
from harness.errors import ConfigError, GuestHang, LabError
from harness.boot.guest import Guest
from harness.lab import Lab

log = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parent.parent
GUEST_KEY = pytest.StashKey[Guest]()
LOG_MARK_KEY = pytest.StashKey[int]()
PROBE_MARK_KEY = pytest.StashKey[int]()
TAINT_KEY = pytest.StashKey[int]()


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
    g.addoption("--lab-tree", default=None, metavar="DIR",
                help="build the --kernel from this tree instead (a `build` kernel)")


def pytest_configure(config: pytest.Config) -> None:
    # paramiko logs a traceback for every refused attempt while a guest's sshd starts.
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)
    config.addinivalue_line("markers", "guest(cpus, memory_mb): boot this test's guest with N "
                            "vCPUs and/or M MB of memory")
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
    A guest that died is replaced by a fresh one for the next test."""

    def __init__(self, lab: Lab, kernel: str, report_dir: Path) -> None:
        self.lab = lab
        self.kernel = kernel
        self.report_dir = report_dir
        self.guests: dict[Profile, Guest] = {}
        self.boots: list[dict] = []

    def get(self, cpus: int | None, memory_mb: int | None = None) -> Guest:
        m = self.lab.config.machine
        p = Profile(cpus or m.cpus, memory_mb or m.memory_mb)
        g = self.guests.get(p)
        if g is not None and g.health() is not None:
            log.warning("guest (%d cpu, %d MB) is dead (%s); booting a fresh one", p.cpus,
                        p.memory_mb, g.health())
            self.discard(p)
            g = None
        if g is None:
            g = self.lab.boot(self.kernel, self.report_dir / f"console-{self.kernel}.log",
                              cpus=p.cpus, memory_mb=p.memory_mb)
            self.guests[p] = g
            self.boots.append({"cpus": p.cpus, "memory_mb": p.memory_mb,
                               "boot_s": round(g.record.boot_s, 2), "accel": g.plan.accel,
                               "attempts": g.record.attempts})
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
        self.commit = _git_commit()
        self.between_tests: list[dict] = []   # splats logged while no test was running
        self._reviewed: dict[int, int] = {}   # id(guest) -> kernel_log lines already judged
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
        self.result_log = report_files.ResultLog(self.report_dir / "results.jsonl")
        self.written: report_files.Written | None = None

    def _pool(self) -> GuestPool:
        if self.error is not None:  # the lab could not boot a guest: fail fast, same reason
            raise self.error
        if self.pool is None:
            lab = Lab(self.lab_config, refresh=self.config.getoption("--lab-refresh"))
            self.pool = GuestPool(lab, self.kernel_name, self.report_dir)
        return self.pool

    @pytest.fixture
    def kernel_fact(self) -> Callable[[str, str], None]:
        """Call it with (name, value) to put what a test learnt about the kernel (e.g. which
        mapping ABI it speaks) in the run's summary.txt and summary.json."""
        return self.facts.__setitem__

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
            g = self._pool().get(kwargs.get("cpus"), kwargs.get("memory_mb"))
        except LabError as e:
            if getattr(e, "console_tail", None) is None:  # not a boot failure: same for all
                self.error = e
            pytest.fail(f"no guest: {e}", pytrace=False)
        g.kmsg()  # what the kernel logged before this test is not this test's
        self._judge_between(g, request.node.nodeid)
        request.node.stash[GUEST_KEY] = g
        request.node.stash[LOG_MARK_KEY] = len(g.kernel_log)
        request.node.stash[PROBE_MARK_KEY] = len(g.probe_log)
        request.node.stash[TAINT_KEY] = g.tainted
        self._note_boot(g)
        issue = known_issues.matching(self.known, request.node.nodeid, g.kernel.release)
        if issue is not None:
            request.applymarker(pytest.mark.xfail(strict=True, reason=issue.summary))
        yield g

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo
                                  ) -> Iterator[None]:
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        g = item.stash.get(GUEST_KEY, None)
        if g is None or call.when == "teardown":
            return
        dead = g.health()
        if dead is None and report.failed and call.excinfo is not None and \
                call.excinfo.errisinstance(GuestHang):
            dead = _wait_for_death(g)  # the console shows the panic a moment after SSH goes
        if call.when == "setup":  # a fixture's probe may be what the guest died under
            if dead is None or report.passed:
                return
        elif dead is None:
            try:
                g.kmsg()
                lines = g.kernel_log[item.stash.get(LOG_MARK_KEY, len(g.kernel_log)):]
            except LabError as e:
                lines, dead = [], f"guest stopped answering: {e}"
            self._reviewed[id(g)] = len(g.kernel_log)
            if lines:
                text = "\n".join(lines) + "\n"
                # On the call report for the terminal; on the item for the teardown report,
                # which is the one the JUnit writer takes captured output from.
                report.sections.append(("Captured stdout guest dmesg call", text))
                item.add_report_section("call", "stdout guest dmesg", text)
            self._judge_splats(item, report, g, lines)
            probes = g.probe_log[item.stash.get(PROBE_MARK_KEY, len(g.probe_log)):]
            if probes:
                report.sections.append(("probe output", "\n".join(
                    f"{name} {' '.join(args)} (as {user}, {r.duration_s:.2f} s): "
                    f"{json.dumps(r.data, sort_keys=True)[:4000]}"
                    for name, args, user, r in probes) + "\n"))
        if dead is None and call.when == "call" and report.failed:
            # A rerun (./lab run) and the tests after it get a fresh guest, not this one.
            log.info("%s failed: the next test gets a fresh guest", item.nodeid)
            self._discard(g)
        if dead is not None:
            # The test that was running when the guest died is the one that failed; what
            # the kernel said about it on the console goes with it.
            text = g.vm.console_text()
            tail = console.tail(text, 40)
            found = splats.find(text.splitlines()[-400:])
            if found:
                report.ringlab_splats = [s.as_dict() for s in found]  # type: ignore[attr-defined]
            report.outcome = "failed"
            report.longrepr = f"the guest died during this test: {dead}\n" \
                              f"last console lines:\n{tail}"
            self._discard(g)

    def _discard(self, g: Guest) -> None:
        for profile, pooled in list((self.pool.guests if self.pool else {}).items()):
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

    def _judge_splats(self, item: pytest.Item, report: pytest.TestReport, g: Guest,
                      lines: list[str]) -> None:
        """A kernel splat during a test fails it, even if its assertions held; a TCG artefact
        (harness/boot/console.py) is reported but fails nothing. Taint changes are recorded."""
        found = splats.find(lines)
        bugs = [s for s in found if not (g.plan.accel == "tcg" and
                                         console.tcg_artefact_in(s.lines[0]))]
        report.ringlab_splats = [s.as_dict() for s in found]  # type: ignore[attr-defined]
        before, after = item.stash.get(TAINT_KEY, -1), g.tainted
        if before != after:
            report.ringlab_taint = [before, after]  # type: ignore[attr-defined]
            report.sections.append(("guest kernel taint", f"{before} -> {after}\n"))
        if not found:
            return
        text = "\n\n".join(s.text for s in found) + "\n"
        report.sections.append(("guest kernel splats", text))
        item.add_report_section("call", "stdout guest kernel splats", text)
        if bugs and report.passed:
            report.outcome = "failed"
            report.longrepr = (f"the kernel splatted during this test: "
                               f"{'; '.join(s.title for s in bugs)}\n{bugs[0].text}")

    def _judge_between(self, g: Guest, next_test: str) -> None:
        """Splats the kernel logged while no test ran are reported on their own."""
        start = self._reviewed.get(id(g), len(g.kernel_log))
        found = splats.find(g.kernel_log[start:])
        if found:
            self.between_tests.append({"before_test": next_test,
                                       "splats": [s.as_dict() for s in found]})
        self._reviewed[id(g)] = len(g.kernel_log)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            reason, outcome = "", report.outcome
            if hasattr(report, "wasxfail"):  # a known kernel issue (kernels/known-issues.yaml)
                outcome, reason = ("xfailed" if report.skipped else "xpassed"), report.wasxfail
            elif report.skipped and isinstance(report.longrepr, tuple):
                reason = report.longrepr[2]
            elif report.failed or outcome == "rerun":  # rerun: pytest-rerunfailures
                reason = _reason(report)
            entry = {"test": report.nodeid, "outcome": outcome,
                     "duration_s": round(report.duration, 3), "reason": reason}
            if getattr(report, "ringlab_splats", None):
                entry["splats"] = report.ringlab_splats
            if getattr(report, "ringlab_taint", None):
                entry["taint"] = report.ringlab_taint
            self.results.append(entry)
            self.result_log.append(entry)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        try:
            if self.config.getoption("--keep-guest") and self.pool and self.pool.guests:
                self._keep_guest()
        finally:
            if self.pool is not None:
                self.pool.stop_all()
        self._write_summary(exitstatus)
        if self.written is not None and self.written.error:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

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
        counts: dict[str, int] = {}
        for r in self.results:
            counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
        k = self.pool.lab.prepared(self.kernel_name) if self.pool else None
        doc = {"kernel": self.kernel_name, "release": k.release if k else None,
               "kernel_description": k.description if k else None,
               "kernel_commit": k.commit if k else None,
               "series": list(k.series) if k else [],
               "boots": self.pool.boots if self.pool else [], "counts": counts,
               "exit_status": int(exitstatus), "duration_s": round(time.time() - self.started, 1),
               "kernel_facts": self.facts, "splats_between_tests": self.between_tests,
               "results": self.results}
        lines = [f"ringlab run on kernel {self.kernel_name} "
                 f"({doc['kernel_description'] or 'not prepared'})",
                 "boots: " + (", ".join(f"{b['cpus']} cpu {b['memory_mb']} MB {b['boot_s']} s "
                                        f"({b['accel']})"
                                        for b in doc["boots"]) or "none"),
                 "results: " + (", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
                                or "no tests ran")]
        if doc["kernel_commit"]:
            lines.append(f"kernel commit: {doc['kernel_commit']}")
        lines += [f"series: {s}" for s in doc["series"]]
        lines += [f"kernel: {name}: {value}" for name, value in sorted(self.facts.items())]
        for b in self.between_tests:
            lines += [f"  SPLAT between tests (before {b['before_test']}): {s['title']}"
                      for s in b["splats"]]
        final = history.outcomes(doc)
        for r in self.results:
            if r["outcome"] == "rerun" and final.get(r["test"]) == "flaky":
                lines.append(f"  FLAKY   {r['test']}: passed on a rerun in a fresh guest after: "
                             f"{r['reason']}")
            elif r["outcome"] != "passed":
                lines.append(f"  {r['outcome'].upper():7s} {r['test']}: {r['reason']}")
        files = {"summary.json": json.dumps(doc, indent=2),
                 "kcidb.json": json.dumps(kcidb.from_summary(doc, self.started), indent=2),
                 "summary.txt": "\n".join(lines) + "\n"}
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


def _wait_for_death(g: Guest, wait_s: float = 5.0) -> str | None:
    """How the guest died, if it did within wait_s; None if it is still alive."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if (dead := g.health()) is not None:
            return dead
        time.sleep(0.2)
    return None


def _reason(report: pytest.TestReport) -> str:
    """One line on why a test failed: the guest's death if that was it, else the last line."""
    text = str(report.longrepr).strip() if report.longrepr else ""
    died = next((line for line in text.splitlines()
                 if line.startswith(("the guest died during this test",
                                     "the kernel splatted during this test"))), None)
    return (died or (text.splitlines()[-1] if text else ""))[:300]


def _git_commit() -> str:
    """The lab checkout's commit, if it is a git checkout."""
    import subprocess
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=5).stdout.strip() or "?"
    except OSError:
        return "?"
