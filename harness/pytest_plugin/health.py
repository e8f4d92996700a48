"""The guest-health plugin: a guest that died or hung under a test fails that test (and only
such a test is rerun, in a fresh guest), and a guest a failed test left changed is replaced,
judged once the test's fixtures were torn down: a fixture that restores what it changed has
then done so, and a guest is never stopped under a fixture that still needs it."""
from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from harness.errors import GuestHang, KernelOops, LabError, SSHError
from harness.guest.guest import Guest
from harness.kernellog import console, splats
from harness.pytest_plugin.guests import Guests
from harness.pytest_plugin.observation import Observation
from harness.pytest_plugin.record import Record
from harness.results import verdicts

# Why this attempt of a test ended with the guest or the emulator broken, not the test:
# (cause, what happened), cause "emulator" (no kernel splat: QEMU died, SSH dropped, a hang the
# kernel did not report) or "kernel" (the guest died with a kernel splat). Only these rerun.
BROKE_KEY = pytest.StashKey[tuple[str, str]]()
# A test whose call went wrong (failed, or a known issue showed): why its guest must be
# replaced ("" if only a look at the guest's state can tell), judged after its teardown.
SUSPECT_KEY = pytest.StashKey[str]()


class Health:
    """Tells a guest that broke under a test, and replaces one a test left changed."""

    def __init__(self, config: pytest.Config, guests: Guests, observation: Observation
                 ) -> None:
        self.config = config
        self.guests = guests
        self.observation = observation
        # Kernel crash signatures (the splat titles of a guest death) seen on a guest no other
        # test had used, and the first test that crashed so.
        self.crashes: dict[tuple[str, ...], str] = {}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Rerun a test in a fresh guest only when the guest or the emulator broke under it,
        never after an assertion failure or a splat (those are kernel findings). A user who
        asks for --reruns N gets pytest-rerunfailures' plain reruns instead."""
        if self.config.getoption("reruns", None):
            return
        for item in items:
            item.add_marker(pytest.mark.flaky(reruns=1, condition=_guest_broke_under(item)))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """A rerun starts with a clean slate."""
        if BROKE_KEY in item.stash:
            del item.stash[BROKE_KEY]
        if SUSPECT_KEY in item.stash:
            del item.stash[SUSPECT_KEY]

    def death(self, call: pytest.CallInfo, report: pytest.TestReport, g: Guest) -> str | None:
        """How the guest died or stopped answering during this phase; None if it is well."""
        dead = g.health()
        if dead is None and report.failed and call.excinfo is not None and \
                call.excinfo.errisinstance(KernelOops):  # no wait: the Oops is on the console
            dead = str(call.excinfo.value)
        if dead is None and report.failed and call.excinfo is not None and \
                call.excinfo.errisinstance((GuestHang, SSHError)):
            dead = _wait_for_death(g) or f"the guest stopped answering: " \
                f"{call.excinfo.exconly().splitlines()[0]}"
        return dead

    def died(self, item: pytest.Item, report: pytest.TestReport, g: Guest, dead: str,
             record: Record) -> None:
        """The test that was running when the guest died is the one that failed; what the
        kernel said about it on the console goes with it. The guest is replaced."""
        text = g.vm.console_text()
        tail = console.tail(text, 40)
        found = splats.find(text.splitlines()[-400:])
        if found:
            record.splats = self.observation.with_decoded(g, [s.as_dict() for s in found])
        kernel_said = [s for s in found if not (g.plan.accel == "tcg" and s.tcg_artefact)]
        broke = ("kernel" if kernel_said else "emulator", dead)
        record.broke = list(broke)
        said = "".join(f"the kernel splatted: {t}\n"
                       for t in dict.fromkeys(s.title for s in kernel_said))
        # A crash's signature: its splats but lockups and stalls (those are rerun).
        signature = tuple(dict.fromkeys(s.title for s in kernel_said
                                        if s.kind not in splats.LOCKUPS))
        fresh = self.guests.watch(g).tests <= 1
        self.guests.discard(g, f"the guest died during {item.nodeid}")
        known = self._known_crash(item, kernel_said)
        if known is not None:  # the crash a known issue of this test causes: not rerun
            report.outcome = "skipped"
            setattr(report, "wasxfail", f"{known}; the guest died: {dead}")
            report.sections.append(("guest died", f"{said}last console lines:\n{tail}\n"))
            return
        verdict = self._crash_verdict(item, signature, fresh)
        if verdict is None:
            item.stash[BROKE_KEY] = broke
        report.outcome = "failed"
        report.longrepr = f"the guest died during this test: {dead}\n{said}" \
                          f"{verdict or ''}last console lines:\n{tail}"

    def _crash_verdict(self, item: pytest.Item, signature: tuple[str, ...], fresh: bool
                       ) -> str | None:
        """Why a kernel crash is a verdict already (not rerun), or None to rerun it in a
        fresh guest: a crash on a guest no earlier test used came from this test alone, and a
        crash with the signature of one seen so on a fresh guest in this run is that crash
        again. A death without a kernel splat (the emulator's), or with only a lockup or a
        stall (TCG on a loaded host can make those), is always rerun."""
        if not signature:
            return None
        if fresh:
            self.crashes.setdefault(signature, item.nodeid)
            return ("a kernel crash on a guest no other test had used: a verdict, not "
                    "rerun\n")
        if (first := self.crashes.get(signature)) is not None:
            return (f"the same kernel crash as {first} (on a fresh guest there): a verdict, "
                    f"not rerun\n")
        return None

    def _known_crash(self, item: pytest.Item, said: list[splats.Splat]) -> str | None:
        """The known issues' summary if every splat of a guest death is a known issue of this
        test (kernels/known-issues.yaml `splats`); None if any is not, or there was none."""
        issues = self.observation.ctx.issues_for(item.nodeid)
        if not said or not issues:
            return None
        v = verdicts.judge([], [s.title for s in said], issues)
        return v.reason if v.outcome == "xfailed" else None

    def note_call(self, item: pytest.Item, report: pytest.TestReport,
                  found: list[splats.Splat]) -> None:
        """Remember a call that went wrong, for after_teardown. A pass, or a skip for a missing
        feature: nothing went wrong in the guest."""
        if report.passed or (report.skipped and not hasattr(report, "wasxfail")):
            return
        item.stash[SUSPECT_KEY] = f"the kernel splatted ({found[0].title})" if found else ""

    def after_teardown(self, item: pytest.Item, report: pytest.TestReport, g: Guest,
                       record: Record) -> None:
        """After a failure, the next test gets a fresh guest only if this one may have left
        the guest changed: a splat, or state (tracefs, sysctls, processes) not as it was when
        the guest was new, now that the test's fixtures put back what they changed. An
        assertion failure alone costs no boot."""
        if SUSPECT_KEY not in item.stash:
            return
        why = item.stash[SUSPECT_KEY]
        del item.stash[SUSPECT_KEY]
        if not self.guests.pooled(g):  # replaced already (a splat after the test returned)
            return
        if not why:
            try:
                now = g.state()
            except LabError as e:
                now, why = {}, f"the guest stopped answering ({e})"
            was = self.guests.watch(g).baseline or {}
            changed = [f"{k}: {was.get(k, '?')!r} -> {v!r}" for k, v in now.items()
                       if was.get(k) != v]
            if changed and not why:
                why = "the test left the guest changed: " + "; ".join(changed)
        if why:
            record.replaced = why
            report.sections.append(("guest replaced", why + "\n"))
            self.guests.discard(g, f"{item.nodeid}: {why}")


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
