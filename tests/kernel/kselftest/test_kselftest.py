"""The kernel's own selftests for the ring-buffer paths, one test per case, in our run.

Collected only when ./lab run --selftests builds them (harness/selftests/) and passes their
manifest as --lab-selftests (tests/kernel/conftest.py ignores this folder otherwise). Each case
runs alone in the guest, killed at its target's timeout, and is judged by what it printed
(harness/selftests/outcome.py); what a program assumes of the machine without checking it is
asked of the guest first (catalog.NEEDS), so a guest without it is a skip saying so.
"""
from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from harness.guest.guest import Guest
from harness.selftests import build, catalog, outcome
from harness.selftests.catalog import SelftestCase

REMOTE = "/root/ringlab-selftests"
NO_LIMIT_S = 900  # our guard for targets whose settings say timeout=0 (ftrace)
KILL_GRACE_S = 10


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" not in metafunc.fixturenames:
        return
    cases = build.load(Path(metafunc.config.getoption("--lab-selftests"))).cases
    # A case that needs more vCPUs (catalog.CPUS: remotes/hotplug offlines one) gets a guest
    # with them instead of skipping itself on ours.
    metafunc.parametrize("case", [pytest.param(c, marks=[pytest.mark.guest(cpus=c.cpus)]
                                               if c.cpus else []) for c in cases],
                         ids=[c.id for c in cases])


@pytest.fixture(scope="session")
def bundle(pytestconfig: pytest.Config) -> build.Bundle:
    return build.load(Path(pytestconfig.getoption("--lab-selftests")))


def pushed(guest: Guest, bundle: build.Bundle) -> str:
    """The bundle's folder in this guest, pushed the first time a test of it needs it."""
    remote = f"{REMOTE}/{bundle.root.parent.name}"
    if guest.run(f"test -d {remote}").exit_status != 0:
        guest.run(f"mkdir -p {REMOTE}")
        guest.ssh.push(bundle.root, remote)
    return remote


def prepared(case: SelftestCase, guest: Guest, request: pytest.FixtureRequest) -> list[str]:
    """Load what the case may use and check what it assumes; notes for a skip's reason."""
    notes = []
    if case.key in catalog.MODULES:
        try:
            request.getfixturevalue("test_pmu")
        except pytest.skip.Exception as e:  # the case still runs: it may not need it
            notes.append(f"the lab's {catalog.MODULES[case.key]} not loaded: {e.msg}")
    if (command := case.setup()) is not None:
        r = guest.run(command)
        if r.exit_status != 0:
            notes.append(f"{command}: {(r.stderr or r.stdout).strip()}")
    if case.key in catalog.NEEDS:
        what, check = catalog.NEEDS[case.key]
        r = guest.run(check)
        if r.exit_status != 0:
            pytest.skip(f"{case.program} needs {what}; this guest has none "
                        f"({(r.stderr or r.stdout).strip()})")
    return notes


def test_selftest(case: SelftestCase, guest: Guest, bundle: build.Bundle,
                  request: pytest.FixtureRequest, kernel_fact) -> None:
    kernel_fact("selftests from", bundle.source)
    notes = prepared(case, guest, request)
    limit = case.timeout_s or NO_LIMIT_S
    command = (f"timeout -k {KILL_GRACE_S} {limit} "
               f"sh -c {shlex.quote(case.command(pushed(guest, bundle)))}")
    r = guest.run(command, timeout=limit + KILL_GRACE_S + 60)
    print(f"$ {command}\n{r.stdout}{r.stderr}exit status {r.exit_status}")  # JUnit system-out
    verdict = outcome.judge(case, r.stdout + r.stderr, r.exit_status, limit)
    if verdict.kind == "skipped":
        pytest.skip(verdict.message + "".join(f"; {n}" for n in notes))
    if verdict.kind == "xfailed":
        pytest.xfail(verdict.message)
    if verdict.kind == "failed":
        pytest.fail(verdict.message, pytrace=False)
