"""The guests plugin: guests booted on demand and shared by the tests of a session, the
fixtures a test takes (guest, lab, kernel_fact), and what the lab remembers per guest."""
from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness import arch as arches
from harness.config import MachineSpec, file_safe
from harness.errors import LabError
from harness.guest.guest import Guest
from harness.pytest_plugin.context import RunContext
from harness.pytest_plugin.record import Outbox
from harness.resources import Lab

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Profile:
    """A machine profile a test asks for with @pytest.mark.guest(cpus=N, memory_mb=M,
    cmdline="...", warm_reboot=True): the kernel command line is added to the lab's and the
    kernel's own (a marker's `cmdline` may be a function of the kernel's arch, harness/arch.py,
    for a line only some arches take); a guest its tests warm-reboot comes from a snapshot's
    restore (Lab.boot)."""
    cpus: int
    memory_mb: int
    cmdline: str = ""
    warm_reboot: bool = False


@dataclass(frozen=True)
class Start:
    """Where a test began on its guest: its kernel log and probe log lengths, the taint mask,
    so what the test caused is told from what came before."""
    kernel_log: int
    probe_log: int
    taint: int


@dataclass
class Watch:
    """What the lab keeps per guest: how much of its kernel log was judged, its state when it
    was new (to tell a guest a test left changed), and its last test (whom a splat logged
    between tests fails)."""
    reviewed: int = 0
    baseline: dict[str, str] | None = None
    last_test: str | None = None
    tests: int = 0  # tests handed this guest so far (1: it is fresh for the current one)


GUEST_KEY = pytest.StashKey[Guest]()
START_KEY = pytest.StashKey[Start]()


class GuestPool:
    """Guests booted on demand, one per machine profile, reused by every test of the session.
    A guest that died is replaced by a fresh one for the next test. Every guest after the
    first of a profile is restored from its snapshot (harness/guest/snapshot.py), not booted."""

    def __init__(self, lab: Lab, kernel: str, report_dir: Path, console_log: Path,
                 wanted: tuple[Profile, ...] = ()) -> None:
        self.lab = lab
        self.kernel = kernel
        self.report_dir = report_dir
        self.console_log = console_log
        self.guests: dict[Profile, Guest] = {}
        self.boots: list[dict] = []
        # Profiles whose pooled guest a fresh=True test had: no other test may use it. It is
        # stopped when the next test asks (its teardown still reads its kernel log first).
        self.spent: set[Profile] = set()
        # The profiles the session's tests ask for (pytest_collection_finish), booted
        # ahead at once when they have no snapshot yet.
        self.wanted: list[Profile] = list(wanted)
        self._ahead_started = False

    def get(self, cpus: int | None, memory_mb: int | None = None, fresh: bool = False,
            cmdline: str = "", warm_reboot: bool = False) -> Guest:
        """The pooled guest of this profile; with `fresh`, a new one no other test used."""
        m = self.lab.config.machine
        p = Profile(cpus or m.cpus, memory_mb or m.memory_mb, cmdline, warm_reboot)
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
            g = self._boot(p)
            self.guests[p] = g
            self.boots.append({"cpus": p.cpus, "memory_mb": p.memory_mb,
                               **({"cmdline": p.cmdline} if p.cmdline else {}),
                               **({"warm_reboot": True} if p.warm_reboot else {}),
                               "boot_s": round(g.record.boot_s, 2), "accel": g.plan.accel,
                               "attempts": g.record.attempts, "restored": g.record.restored,
                               **({"snapshot_fallback": g.record.fallback}
                                  if g.record.fallback else {})})
        if fresh:
            self.spent.add(p)
        return g

    def _boot(self, p: Profile) -> Guest:
        """A guest of profile p. The session's first boot starts the boots of every other
        profile its tests want and have no snapshot of, at once in the background
        (Lab.boot_ahead)."""
        if not self._ahead_started:
            self._ahead_started = True
            self.lab.boot_ahead(self.kernel, self.console_log,
                                [(q.cpus, q.memory_mb, q.cmdline) for q in self.wanted if q != p])
        return self.lab.boot(self.kernel, self.console_log, cpus=p.cpus, memory_mb=p.memory_mb,
                             cmdline=p.cmdline, restored=p.warm_reboot)

    def discard(self, profile: Profile) -> None:
        g = self.guests.pop(profile, None)
        if g is not None:
            g.stop()

    def stop_all(self) -> None:
        self.lab.wait_ahead()
        for n in list(self.guests):
            self.discard(n)


class Guests:
    """Owns the pool: hands a guest to each test that asks, replaces one on request, stops
    them all at the end (or keeps them for --keep-guest)."""

    def __init__(self, ctx: RunContext, config: pytest.Config, outbox: Outbox) -> None:
        self.ctx = ctx
        self.config = config
        self.outbox = outbox
        self.pool: GuestPool | None = None
        self.error: LabError | None = None
        self.wanted: tuple[Profile, ...] = ()
        self.watches: dict[Guest, Watch] = {}
        # Called with (guest, watch) when a test gets its guest, before the test's start is
        # marked: whoever must look at the guest between tests (splats, report metadata).
        self.on_handout: list[Callable[[Guest, Watch], None]] = []

    def get_pool(self) -> GuestPool:
        """The session's pool, made on first use; after a lab error, the same error again."""
        if self.error is not None:  # the lab could not boot a guest: fail fast, same reason
            raise self.error
        if self.pool is None:
            # The serial run's guests come from `./lab run`'s own Lab; a worker makes its own.
            lab = self.ctx.lab or Lab(self.ctx.lab_config, refresh=self.ctx.request.refresh)
            worker = f"-{self.ctx.worker}" if self.ctx.worker else ""
            self.pool = GuestPool(lab, self.ctx.kernel_name, self.ctx.report_dir,
                                  self.ctx.report_dir /
                                  f"console-{file_safe(self.ctx.kernel_name)}{worker}.log",
                                  self.wanted)
        return self.pool

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The machine profiles the session's tests ask for, for booting them ahead: of the
        tests left once -k and --deselect have had their say (in pytest_collection_modifyitems
        the deselected were still there, and a `-k kselftest` run booted three profiles
        ahead that no test of it used)."""
        self.wanted = wanted_profiles(session.items, self.ctx.lab_config.machine, self._arch())

    def watch(self, g: Guest) -> Watch:

        return self.watches.setdefault(g, Watch())

    def pooled(self, g: Guest) -> bool:
        """Whether g is still a guest the next test may get."""
        return self.pool is not None and any(p is g for p in self.pool.guests.values())

    def discard(self, g: Guest, why: str) -> None:
        """Stop g: the next test of its profile gets a fresh guest."""
        log.debug("replacing the guest: %s", why)
        self.watches.pop(g, None)
        if self.pool is None:
            return
        for profile, pooled in list(self.pool.guests.items()):
            if pooled is g:
                self.pool.discard(profile)

    @pytest.fixture
    def kernel_fact(self) -> Callable[[str, str], None]:
        """Call it with (name, value) to put what a test learnt about the kernel (e.g. which
        mapping ABI it speaks) in the run's summary.txt and summary.json."""
        return lambda name, value: self.outbox.emit("fact", name=name, value=value)

    @pytest.fixture
    def lab(self) -> Lab:
        """The session's Lab (kernels, rootfs, test modules); the same object every time."""
        return self.get_pool().lab

    @pytest.fixture
    def guest(self, request: pytest.FixtureRequest) -> Iterator[Guest]:
        """The booted guest for this test (booted once per session, kernel and cpus)."""
        marker = request.node.get_closest_marker("guest")
        kwargs = marker.kwargs if marker else {}
        if (needs := request.node.get_closest_marker("kconfig")) is not None:
            self._skip_unless_configured(tuple(needs.args))
        try:
            g = self.get_pool().get(kwargs.get("cpus"), kwargs.get("memory_mb"),
                                    fresh=bool(kwargs.get("fresh")) or
                                    self.config.getoption("--fresh-guest-per-test"),
                                    cmdline=marker_cmdline(kwargs, self._arch()),
                                    warm_reboot=bool(kwargs.get("warm_reboot")))
        except LabError as e:
            if getattr(e, "console_tail", None) is None:  # not a boot failure: same for all
                self.error = e
            pytest.fail(f"no guest: {e}", pytrace=False)
        g.kmsg()  # what the kernel logged before this test is not this test's
        w = self.watch(g)
        for look in self.on_handout:
            look(g, w)
        if w.baseline is None:  # the state of a new guest, to tell a changed one
            w.baseline = g.state()
        w.last_test = request.node.nodeid
        w.tests += 1
        request.node.stash[GUEST_KEY] = g
        request.node.stash[START_KEY] = Start(len(g.kernel_log), len(g.probe_log), g.tainted)
        yield g

    def _arch(self) -> str:
        """The arch of the session's kernel, as lab.yaml or the --kernel argument says."""
        try:
            return self.ctx.lab_config.kernel(self.ctx.kernel_name).arch
        except LabError:
            return arches.DEFAULT  # the guest fixture reports the kernel's error

    def _skip_unless_configured(self, options: tuple[str, ...]) -> None:
        """Skip, before any guest boots, when the kernel's .config lacks one of `options`. A
        kernel whose config the lab does not have is not skipped: its test observes."""
        try:
            k = self.get_pool().lab.kernel(self.ctx.kernel_name)
        except LabError:
            return  # the guest fixture reports it
        if k.config is None or not k.config.exists():
            return
        for option in options:
            symbol = option.removeprefix("CONFIG_")
            if (value := k.config_option(symbol)) not in ("y", "m"):
                pytest.skip(f"kernel {k.name} ({k.release}) has no CONFIG_{symbol} "
                            f"({'is not set' if value is None else '=' + value} in {k.config})")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Every guest stops at the end; with --keep-guest, first wait for Ctrl-C."""
        try:
            if self.ctx.request.keep_guest and self.pool and self.pool.guests:
                self._keep_guest()
        finally:
            if self.pool is not None:
                self.pool.stop_all()

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


def marker_cmdline(kwargs: Mapping[str, object], arch: str) -> str:
    """A `guest` marker's kernel command line for a kernel of `arch`: the string it gives, or
    what its function of the arch returns."""
    cmdline = kwargs.get("cmdline", "")
    return str(cmdline(arch) if callable(cmdline) else cmdline)


def wanted_profiles(items: list[pytest.Item], machine: MachineSpec,
                    arch: str = arches.DEFAULT) -> tuple[Profile, ...]:
    """The machine profiles `items` ask for (their `guest` marker, else lab.yaml's machine),
    each once, in order."""
    seen: dict[Profile, None] = {}
    for item in items:
        marker = item.get_closest_marker("guest")
        kw = marker.kwargs if marker else {}
        seen[Profile(kw.get("cpus") or machine.cpus, kw.get("memory_mb") or machine.memory_mb,
                     marker_cmdline(kw, arch), bool(kw.get("warm_reboot")))] = None
    return tuple(seen)
