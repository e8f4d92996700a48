"""The observation plugin: what the guest said during a test (its dmesg, the probes' output,
kernel splats and the taint mask) into the test's report, and the splats the kernel logged
after a test returned or between tests, which fail the test that ran before them."""
from __future__ import annotations

import json
import logging

import pytest

from harness.errors import LabError
from harness.guest.guest import Guest
from harness.kernellog import decode, splats
from harness.pytest_plugin.context import RunContext
from harness.pytest_plugin.guests import GUEST_KEY, START_KEY, Guests, Watch
from harness.pytest_plugin.record import Outbox, Record
from harness.pytest_plugin.verdict import VERDICT_KEY

log = logging.getLogger(__name__)
PROPERTY_CHARS = 300  # a probe's output in a JUnit property: a glimpse, report.html has it all


class Observation:
    """Reads the guest's kernel log and probe log at each phase's report."""

    def __init__(self, ctx: RunContext, guests: Guests, outbox: Outbox) -> None:
        self.ctx = ctx
        self.guests = guests
        self.outbox = outbox
        guests.on_handout.append(self.judge_between)

    def observe(self, item: pytest.Item, report: pytest.TestReport, g: Guest, record: Record
                ) -> tuple[list[splats.Splat], str | None]:
        """The call's dmesg, splats, taint change and probe output into its report. Returns
        the splats, and why the guest stopped answering if it did while being read."""
        start, lost = item.stash[START_KEY], None
        try:
            g.kmsg()
            lines = g.kernel_log[start.kernel_log:]
        except LabError as e:
            lines, lost = [], f"guest stopped answering: {e}"
        self.guests.watch(g).reviewed = len(g.kernel_log)
        if lines:
            text = "\n".join(lines) + "\n"
            # On the call report for the terminal; on the item for the teardown report,
            # which is the one the JUnit writer takes captured output from.
            report.sections.append(("Captured stdout guest dmesg call", text))
            item.add_report_section("call", "stdout guest dmesg", text)
        found = self._note_splats(item, report, g, lines, record)
        probes = g.probe_log[start.probe_log:]
        if probes:
            report.sections.append(("probe output", "\n".join(
                f"{name} {' '.join(args)} (as {user}, {r.duration_s:.2f} s): "
                f"{json.dumps(r.data, sort_keys=True)[:4000]}"
                for name, args, user, r in probes) + "\n"))
        return found, lost

    def _note_splats(self, item: pytest.Item, report: pytest.TestReport, g: Guest,
                     lines: list[str], record: Record) -> list[splats.Splat]:
        """The splats of a test and its taint change, into its report; the verdict on them is
        the verdict plugin's. A TCG artefact (harness/kernellog/console.py) is shown, fails
        nothing."""
        found = splats.find(lines)
        record.splats = self.with_decoded(g, [s.as_dict() for s in found])
        before, after = item.stash[START_KEY].taint, g.tainted
        if before != after:
            record.taint = [before, after]
            report.sections.append(("guest kernel taint", f"{before} -> {after}\n"))
        if found:
            text = "\n\n".join(s.text + _decoded_text(d) for s, d in
                                 zip(found, record.splats)) + "\n"
            report.sections.append(("guest kernel splats", text))
            item.add_report_section("call", "stdout guest kernel splats", text)
        return found

    def late_splats(self, item: pytest.Item, report: pytest.TestReport, g: Guest,
                    record: Record) -> None:
        """A splat the kernel logged after the test returned (deferred work: RCU callbacks,
        irq_work, the ring buffer's own deferred frees) fails that test at its teardown."""
        if VERDICT_KEY not in item.stash or not self.guests.pooled(g) or \
                g.health() is not None:
            return
        try:
            g.kmsg()
        except LabError:
            return
        w = self.guests.watch(g)
        start, w.reviewed = w.reviewed, len(g.kernel_log)
        late = self.unexplained_bugs(g, g.kernel_log[start:], item.nodeid)
        if late:
            record.splats = self.with_decoded(g, [s.as_dict() for s in late])
            report.outcome = "failed"
            report.longrepr = (f"the kernel splatted after the test returned: "
                               f"{'; '.join(s.title for s in late)}\n{late[0].text}")
            self.guests.discard(g, f"{item.nodeid}: the kernel splatted after the test "
                                   f"returned")

    def judge_between(self, g: Guest, w: Watch) -> None:
        """Splats the kernel logged while no test ran: after a test returned, they fail that
        test (its result is amended); before the guest's first test, they fail its boot."""
        start, w.reviewed = w.reviewed, len(g.kernel_log)
        found = self.unexplained_bugs(g, g.kernel_log[start:], w.last_test)
        if not found:
            return
        titles = "; ".join(s.title for s in found)
        found_dicts = [s.as_dict() for s in found]
        if w.last_test is not None:
            self.outbox.emit("between", after_test=w.last_test, splats=found_dicts)
            self.outbox.emit("amend", test=w.last_test, splats=found_dicts,
                             reason=f"the kernel splatted after the test returned: {titles}")
        else:
            name = f"boot ({g.plan.cpus} cpu, {g.plan.memory_mb} MB)"
            self.outbox.emit("result", entry={
                "test": name, "outcome": "failed", "duration_s": round(g.record.boot_s, 3),
                "reason": f"the kernel splatted while booting: {titles}", "splats": found_dicts})

    def unexplained_bugs(self, g: Guest, lines: list[str], nodeid: str | None
                         ) -> list[splats.Splat]:
        """The splats of these lines that fail a test: not a TCG artefact, not a known issue
        of that test."""
        issues = self.ctx.issues_for(nodeid) if nodeid else []
        return [s for s in splats.find(lines)
                if not (g.plan.accel == "tcg" and s.tcg_artefact)
                and not any(i.explains_splat(s.title) for i in issues)]

    def with_decoded(self, g: Guest | None, found: list[dict]) -> list[dict]:
        """Splat dicts with their frames as file:line when the lab built the kernel (its
        vmlinux and decode_stacktrace.sh at hand), else with why not; never fails the run."""
        pool = self.guests.pool
        k = g.kernel if g is not None else (pool.lab.prepared(self.ctx.kernel_name) if pool else None)
        if not found or k is None:
            return found
        try:
            return decode.with_decoded(found, decode.decoder_for(k))
        except Exception as e:  # a bug of ours in decoding must not cost the run its report
            log.warning("decoding splats failed: %s", e)
            return [{**d, "not_decoded": f"decoding failed: {e}"} for d in found]


def properties(item: pytest.Item, record: Record) -> list[tuple[str, str]]:
    """The test's splats, taint change and probe runs as short user_properties, so JUnit
    consumers (CI dashboards) see them as <properties> without parsing system-out."""
    props = []
    if record.splats:
        props.append(("ringlab_splats", json.dumps(
            [{"title": s["title"][:200], "rip": s.get("rip"),
              **({"at": decode.top_frame(s)} if decode.top_frame(s) else {})}
             for s in record.splats[:5]])))
    if record.taint:
        props.append(("ringlab_taint", json.dumps(record.taint)))
    g = item.stash.get(GUEST_KEY, None)
    if g is not None:
        start = item.stash.get(START_KEY, None)
        for name, args, user, r in g.probe_log[start.probe_log if start else len(g.probe_log):]:
            props.append(("ringlab_probe", json.dumps(
                {"probe": name, "args": list(args), "user": user, "s": round(r.duration_s, 2),
                 "output": json.dumps(r.data, sort_keys=True)[:PROPERTY_CHARS]})))
    return props


def _decoded_text(splat: dict) -> str:
    """The decoded frames under a splat's text in the report, or why there are none."""
    if splat.get("decoded"):
        return "\ndecoded:\n" + "\n".join(f"  {f}" for f in splat["decoded"])
    return f"\nnot decoded: {splat['not_decoded']}" if splat.get("not_decoded") else ""
