"""The ledger plugin: every test's result in results.jsonl as it comes (the last line of a test
is its result), and the run's summary.json, summary.txt and kcidb.json at the end. Only the
process that writes the run's files (a serial run, or the xdist controller) records: a worker's
tests reach it as reports, and what a worker learnt about the run as the events on them."""
from __future__ import annotations

import json
import time

import pytest

from harness import splat_proof
from harness.pytest_plugin import record
from harness.pytest_plugin.context import RunContext
from harness.pytest_plugin.guests import Guests
from harness.pytest_plugin.observation import Observation
from harness.pytest_plugin.verdict import reason
from harness.results import history, kcidb, report as report_files, summary


class Sender:
    """The events side, in every process that runs tests: what it learnt since its last report
    (new boots, the prepared kernel, the outbox) onto the next one."""

    def __init__(self, ctx: RunContext, guests: Guests, outbox: record.Outbox) -> None:
        self.ctx = ctx
        self.guests = guests
        self.outbox = outbox
        self._boots_sent = 0
        self._kernel_sent = False

    def send(self, rec: record.Record) -> None:
        pool = self.guests.pool
        if pool is not None:
            for b in pool.boots[self._boots_sent:]:
                self.outbox.emit("boot", record=b)
            self._boots_sent = len(pool.boots)
            if not self._kernel_sent and (k := pool.lab.prepared(self.ctx.kernel_name)):
                self._kernel_sent = True
                self.outbox.emit("kernel", info={"release": k.release,
                                                 "description": k.description,
                                                 "commit": k.commit, "series": list(k.series),
                                                 "arch": k.arch})
        rec.events = self.outbox.take()


class Ledger:
    """The recording side: results, boots, facts and splats between tests, then the files."""

    def __init__(self, ctx: RunContext, outbox: record.Outbox, observation: Observation
                 ) -> None:
        self.ctx = ctx
        self.outbox = outbox
        self.observation = observation
        self.results: list[dict] = []
        self.facts: dict[str, str] = {}
        self.boots: list[dict] = []
        self.kernel_info: dict = {}
        self.between_tests: list[dict] = []   # splats logged while no test was running
        self.late_failures = 0                # results failed after their report was written
        self.result_log = report_files.ResultLog(
            ctx.report_dir / ("results.jsonl" if ctx.worker is None else
                              f".results-{ctx.worker}.jsonl"))
        self.written: report_files.Written | None = None

    def _apply(self, event: dict) -> None:
        """An event of the Outbox, in the process that writes the run's files."""
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
            self._amend(self._entry(event["test"]), event["reason"], event["splats"])
        elif kind == "result":
            self._record(event["entry"])
            self.late_failures += 1

    def _record(self, entry: dict) -> None:
        self.results.append(entry)
        self.result_log.append(entry)

    def _entry(self, test: str) -> dict | None:
        return next((r for r in reversed(self.results) if r["test"] == test), None)

    def _amend(self, entry: dict | None, why: str, found: list[dict]) -> None:
        """Fail a test whose report is already written (results.jsonl: the last line of a
        test is its result). A test that had failed keeps its first failure as the reason;
        this one is its teardown_error."""
        if entry is None:
            return
        if entry["outcome"] in ("failed", "rerun"):
            entry.setdefault("teardown_error", why)
        else:
            entry.update(outcome="failed", reason=why)
        entry["splats"] = entry.get("splats", []) + found
        self.result_log.append(entry)
        self.late_failures += 1

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.ctx.worker is not None:  # the controller records it
            return
        rec = record.of(report)
        for event in rec.events:
            self._apply(event)
        if report.when == "teardown":
            self._teardown(report, rec)
        elif report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            why, outcome = "", str(report.outcome)
            if hasattr(report, "wasxfail"):  # a known kernel issue (kernels/known-issues.yaml)
                outcome, why = ("xfailed" if report.skipped else "xpassed"), report.wasxfail
            elif report.skipped and isinstance(report.longrepr, tuple):
                why = report.longrepr[2]
            elif report.failed or outcome == "rerun":  # rerun: pytest-rerunfailures
                why = reason(report)
            self._record({"test": report.nodeid, "outcome": outcome,
                          "duration_s": round(report.duration, 3), "reason": why,
                          **rec.entry_fields()})

    def _teardown(self, report: pytest.TestReport, rec: record.Record) -> None:
        """What the teardown added to a test's result: its failure (a fixture's error, a splat
        after the test returned), and the guest's replacement."""
        entry = self._entry(report.nodeid)
        if entry is None:
            return
        if rec.replaced:
            entry["replaced"] = rec.replaced
        if report.failed:
            self._amend(entry, reason(report), [])
        elif rec.replaced:
            self.result_log.append(entry)

    @pytest.hookimpl(trylast=True)  # after the guests plugin stopped every guest
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.ctx.worker is not None:  # the controller writes the run's files
            return
        for event in self.outbox.take():  # learnt after the last report (a serial run)
            self._apply(event)
        final = history.outcomes({"results": self.results})
        findings = self.late_failures or sum(o == "flaky" for o in final.values())
        if findings and exitstatus == pytest.ExitCode.OK:
            # A splat after a test's report, a failed boot, or a failure that did not
            # reproduce is a kernel finding: the run does not pass.
            exitstatus = session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self._write_summary(exitstatus)
        if self.written is not None and self.written.error:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def _write_summary(self, exitstatus: int) -> None:
        doc = summary.build(self.ctx.kernel_name, self.kernel_info, self.boots, self.facts,
                            self.between_tests, self.results, exitstatus,
                            time.time() - self.ctx.started,
                            splat_proof.read(self.ctx.report_dir))
        text = summary.render(doc)
        # Decode the splats no test report carried decoded (between tests, at boot), now
        # that the run is over: only reported splats cost a decode.
        for r in doc["results"]:
            if r.get("splats"):
                r["splats"] = self.observation.with_decoded(None, r["splats"])
        for b in doc["splats_between_tests"]:
            b["splats"] = self.observation.with_decoded(None, b["splats"])
        files = {"summary.json": json.dumps(doc, indent=2),
                 "kcidb.json": json.dumps(kcidb.from_summary(doc, self.ctx.started), indent=2),
                 "summary.txt": text}
        if self.result_log.error:  # the per-test log failed: write it whole, with the rest
            files["results.jsonl"] = "".join(json.dumps(r, sort_keys=True) + "\n"
                                             for r in self.results)
        self.written = report_files.write_files(self.ctx.report_dir, files,
                                                self.ctx.lab_config.cache_dir, self.ctx.kernel_name)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_sep("-", "ringlab")
        written = self.written or report_files.Written(self.ctx.report_dir)
        if written.error:
            terminalreporter.write_line(f"ERROR: could not write the reports to "
                                        f"{self.ctx.report_dir} ({written.error}); the results "
                                        f"are in {written.folder}", red=True, bold=True)
        terminalreporter.write_line(f"reports: {written.folder}")
        path = written.folder / "summary.txt"
        if path.exists():
            for line in path.read_text().splitlines()[:4]:  # header, with the splat proof
                terminalreporter.write_line(line)
