"""pytest plugin: guests as fixtures, guest dmesg in each test's report, a run summary.

Load with `-p harness.pytest_plugin` (./lab run does). Options: --kernel, --lab-config,
--keep-guest, --gdb-on-failure (gdb.py), --lab-report-dir, --lab-refresh, --fresh-guest-per-test. Tests take the `guest`
fixture; a test that needs another machine profile says so with @pytest.mark.guest(cpus=2), one
that must not share its guest with @pytest.mark.guest(fresh=True).

Built as pytest's own plugins are: pytest_configure makes one frozen RunContext (context.py, in
config.stash) and registers one small plugin per concern, each with its own hooks and state:
guests (the pool and the fixtures), observation (dmesg, probes, splats, taint), verdict (checks
and known issues), health (death, hang, a guest left changed, reruns), ledger (results.jsonl,
the events from xdist workers, the summary), html (report.html's metadata) and schedule (the
costliest test files first, the longest split across -j workers). phases.py is the
one place that orders observation, verdict and health on each report; record.py is what they
add to a report (`report.ringlab`).
"""
from __future__ import annotations

import logging
import os
import signal

import pytest

from harness import lifetime
from harness.errors import LabError
from harness.pytest_plugin import context, html
from harness.pytest_plugin.gdb import GdbOnFailure
from harness.pytest_plugin.guests import Guests
from harness.pytest_plugin.health import Health
from harness.pytest_plugin.ledger import Ledger, Sender
from harness.pytest_plugin.observation import Observation
from harness.pytest_plugin.phases import Phases
from harness.pytest_plugin.record import Outbox
from harness.pytest_plugin.schedule import Schedule
from harness.pytest_plugin.verdict import INJECTS_MARKER, Verdict
from harness.results import known_issues

PLUGIN_PREFIX = "ringlab-"
LAB_PID = "RINGLAB_LAB_PID"  # the pytest process whose xdist workers must not outlive it


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("ringlab")
    g.addoption("--lab-request", default=None, metavar="FILE",
                help="the run's request (request.json, written by ./lab run): its kernel, "
                "report folder and options; the options below are for a run by hand")
    g.addoption("--kernel", default=None, help="kernel name from lab.yaml (default: its "
                "default_kernel)")
    g.addoption("--lab-config", default=None, help="path to lab.yaml (default: the checkout's)")
    g.addoption("--keep-guest", action="store_true",
                help="leave the guest running at the end, until Ctrl-C, to look around")
    g.addoption("--lab-report-dir", default=None, help="where reports and the console log go")
    g.addoption("--known-issues", default=str(known_issues.KNOWN_ISSUES),
                help="the known kernel issues list (default: kernels/known-issues.yaml); "
                "'none': no issue excused, a known bug's symptom fails its test")
    g.addoption("--fresh-guest-per-test", action="store_true",
                help="give every test a guest no other test used (restored from the "
                     "profile's snapshot, so about a second each under TCG)")
    g.addoption("--lab-selftests", default=None, metavar="MANIFEST",
                help="the kernel's selftests built for this kernel (harness/selftests/build.py): "
                "tests/kselftest runs one test per case")
    g.addoption("--gdb-on-failure", action="store_true",
                help="stop at the first failing test and keep its guest paused with QEMU's "
                "gdbstub open (the gdb command line on stderr) until Ctrl-C")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        # An xdist worker goes when its lab goes, killed or not, the way Ctrl-C takes it
        # (SIGINT: its guests stopped, their folders removed); it lived on ~20 s otherwise.
        lifetime.die_with_parent_now(signal.SIGINT, int(os.environ.get(LAB_PID) or os.getppid()))
    else:
        os.environ[LAB_PID] = str(os.getpid())  # what the workers it starts check
    # paramiko logs a traceback for every refused attempt while a guest's sshd starts.
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)
    config.addinivalue_line("markers", "guest(cpus, memory_mb, fresh, cmdline, warm_reboot): "
                            "boot this test's guest with N vCPUs and/or M MB of memory and/or "
                            "these kernel arguments; fresh=True: a guest no other test used; "
                            "warm_reboot=True: one restored from its snapshot where one can be "
                            "saved (a restored QEMU's first reset boots under TCG)")
    config.addinivalue_line("markers", "kconfig(*options): skip unless the guest's kernel has "
                            "each CONFIG_ option (=y or =m), naming the one it lacks")
    config.addinivalue_line("markers", f"{INJECTS_MARKER}: the test makes allocations fail "
                            "(probes/fault_inject.py): the kernel's allocation-failure warnings "
                            "are its own doing, shown in its report, failing nothing")
    if context.RUN_KEY in config.stash:
        return
    try:
        ctx = context.build(config)
    except LabError as e:  # a user mistake (lab.yaml, the known-issues list): no traceback
        raise pytest.UsageError(str(e)) from None
    config.stash[context.RUN_KEY] = ctx
    for name, plugin in plugins(ctx, config).items():
        config.pluginmanager.register(plugin, PLUGIN_PREFIX + name)


def plugins(ctx: context.RunContext, config: pytest.Config) -> dict[str, object]:
    """The run's plugins by name, wired to each other; each keeps only its own state."""
    outbox = Outbox()
    guests = Guests(ctx, config, outbox)
    observation = Observation(ctx, guests, outbox)
    verdict = Verdict(ctx)
    health = Health(config, guests, observation)
    found: dict[str, object] = {
        "guests": guests, "observation": observation, "verdict": verdict, "health": health,
        "ledger": Ledger(ctx, outbox, observation),
        "phases": Phases(observation, verdict, health, Sender(ctx, guests, outbox)),
        "schedule": Schedule()}
    if ctx.request.gdb_on_failure:
        found["gdb"] = GdbOnFailure(guests)
    if (key := html.metadata_key()) is not None:
        page = html.Html(ctx, config, key)
        guests.on_handout.append(page.note_boot)
        found["html"] = page
    return found
