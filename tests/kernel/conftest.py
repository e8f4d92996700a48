"""Fixtures shared by the kernel suite."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.errors import LAB_FAULT, ModuleError, ModuleUnavailable
from harness.guest.guest import Guest
from harness.kernellog import splats
from harness.resources import Lab


@pytest.fixture
def new_splats(guest: Guest) -> Callable[[], list[str]]:
    """Call it to get the titles of the kernel splats logged since this test began: a probe
    that gets the right errno while the kernel WARNs has still found a bug."""
    guest.kmsg()
    start = len(guest.kernel_log)

    def since() -> list[str]:
        guest.kmsg()
        return [s.title for s in splats.find(guest.kernel_log[start:])]
    return since


class ProbeCheck:
    """Runs a check of a probe on the test's guest and returns its observations. A check that
    answers {"skip": why} (probes: probelib.Skip, the kernel lacks what the check needs)
    skips the test with that reason instead."""

    def __init__(self, guest: Guest) -> None:
        self.guest = guest

    def __call__(self, probe: str, *args: str, user: str = "root",
                 timeout: float | None = None, once: bool = True) -> dict:
        """probes/<probe>.py ARGS as `user`. With once, guest.observe(): run once per guest
        for these arguments and shared by the tests that judge the same observations (the
        checks make their own events, so a rerun would see the same); once=False, where the
        outcome depends on guest state the test sets, runs it again (guest.probe())."""
        __tracebackhide__ = True  # a skip's location is the test's line that ran the check
        run = self.guest.observe if once else self.guest.probe
        data = run(probe, list(args), user=user, timeout=timeout).data
        if "skip" in data:
            pytest.skip(data["skip"])
        return data


@pytest.fixture
def probe_check(guest: Guest) -> ProbeCheck:
    """ProbeCheck on this test's guest: probe_check("probe_x", CHECK, *ARGS, ...)."""
    return ProbeCheck(guest)


@dataclass
class ModuleBuilds:
    """The test modules (kernels/modules/) built for this run's kernels, each built once
    (a failed build is not tried again by every test: 1-2 s each in a build root)."""
    built: dict[tuple[str, str], Path | ModuleError] = field(default_factory=dict)
    first: dict[tuple[str, str], str] = field(default_factory=dict)

    def build(self, lab: Lab, name: str, kernel: str, nodeid: str) -> Path:
        """The .ko; else ModuleUnavailable (the lab cannot build modules for this kernel) or
        the build's ModuleError, the same one for every test that asks."""
        key = (name, kernel)
        if key not in self.built:
            try:
                self.built[key] = lab.module(name, kernel)
            except ModuleError as e:  # ModuleUnavailable included
                self.built[key], self.first[key] = e, nodeid
        got = self.built[key]
        if isinstance(got, ModuleError):
            raise got
        return got

    def lab_error(self, name: str, kernel: str, nodeid: str, e: ModuleError) -> None:
        """A module that does not build is the lab's error, not the kernel's: the first test
        that needed it fails with the compiler's first error; every later one skips naming
        that test, so the run fails once for it rather than once per test."""
        first = self.first.get((name, kernel), nodeid)
        if first != nodeid:
            pytest.skip(f"not run: test module {name} does not build for {kernel} (the lab's "
                        f"error, reported once, at {first})")
        pytest.fail(f"{LAB_FAULT}{e}", pytrace=False)


@pytest.fixture(scope="session")
def test_modules() -> ModuleBuilds:
    return ModuleBuilds()


@pytest.fixture
def test_pmu(guest: Guest, lab: Lab, test_modules: ModuleBuilds,
             request: pytest.FixtureRequest) -> int:
    """The lab's test PMU (kernels/modules/ringlab_aux) built for the guest's kernel and
    loaded; its perf type. Skips with the reason when the lab cannot build modules for this
    kernel; a module that does not build is the lab's error (ModuleBuilds), not a skip."""
    try:
        ko = test_modules.build(lab, "ringlab_aux", guest.kernel.name, request.node.nodeid)
    except ModuleUnavailable as e:
        pytest.skip(f"no test PMU for this kernel: {e.message}")
    except ModuleError as e:
        test_modules.lab_error("ringlab_aux", guest.kernel.name, request.node.nodeid, e)
    guest.insmod(ko)
    return int(guest.run("cat /sys/bus/event_source/devices/ringlab_aux/type").stdout)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/kernel/kselftest runs the kernel's own selftests: only with --lab-selftests
    (./lab run --selftests builds them)."""
    if collection_path.name == "kselftest" and not config.getoption("--lab-selftests"):
        return True
    return None
