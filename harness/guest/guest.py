"""A booted guest: QEMU with a throw-away overlay, its console, SSH, and the probe runner.

`boot()` either returns a Guest that answers SSH and runs probes, or raises a BootError that
says how far the boot got, with the last console lines; either way no QEMU is left behind.
A guest whose profile was saved before is restored from its snapshot instead of booted
(harness/guest/snapshot.py); a snapshot that does not restore falls back to a boot.
"""
from __future__ import annotations

import logging
import os
import shlex
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness import arch as arches
from harness.errors import (BootError, BootPanic, BootTimeout, GuestHang, KernelOops,
                            LabError, ModuleError, ProbeError, SSHError)
from harness.guest import gcov as coverage
from harness.guest import monitor, qemu, snapshot, workdir as guest_folders
from harness.guest.probe_client import (RUNNER_PORT, Deadlines, ProbeResult, ProbeRunner,
                                        probes_digest)
from harness.guest.rootfs import RootfsImage
from harness.guest.ssh import ClientKey, CommandResult, GuestSSH
from harness.guest.vm import VM
from harness.kernellog import console
from harness.kernels.kernel import BootableKernel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BootPlan:
    """What to boot and how: everything boot() needs, decided by the caller (resources.py)."""
    kernel: BootableKernel
    rootfs: RootfsImage
    key: ClientKey
    cpus: int
    memory_mb: int
    accel: str
    tcg_threads: str
    boot_timeout_s: float
    console_log: Path
    cmdline: str = ""
    extra_probe_dirs: tuple[Path, ...] = ()
    console_log_bytes: int = 16 * 2**20
    snapshots: Path | None = None  # where guest snapshots are kept; None: always boot
    qemu_version: str = ""  # part of the snapshot key
    tcg_cpu: str | None = None  # another TCG CPU model than the arch's (Arch.tcg_cpu)
    gdb_port: int | None = None  # QEMU's gdbstub on this loopback port (./lab boot --gdb)


@dataclass
class BootRecord:
    """How a boot went, for reports and the boot benchmark."""
    ssh_port: int
    boot_s: float  # QEMU start to SSH (and probe runner) ready
    ssh_ready_s: float  # QEMU start to SSH connected
    stages: dict[str, float] = field(default_factory=dict)
    attempts: int = 1
    restored: bool = False  # started from a snapshot (boot_s is then the restore's time)
    snapshot: str | None = None  # the snapshot restored from, or saved by this boot
    fallback: str | None = None  # why a snapshot was not restored, when one failed
    runner_port: int | None = None  # the host port QEMU forwards to the probe runner daemon


# A booting guest that prints nothing for this long is stalled: every stage of a boot prints
# within a few seconds, even under TCG. One stall was seen here right after the root mount
# (no oops, no output), so a stall is retried once in a fresh guest, as the int3 artefact is.
STALL_S = 30.0
# A guest whose sshd has not answered the heartbeat (harness/guest/ssh.py) for this long while its
# console is silent too is hung: a working kernel, even under TCG with a busy probe, answers
# within a second or two. This bounds hang detection below any command's own timeout. It is
# longer than the kernel's own detectors (soft lockup after 2 * watchdog_thresh = 20 s, RCU
# stall after CONFIG_RCU_CPU_STALL_TIMEOUT = 21 s), which say where the kernel is stuck.
HANG_S = 30.0
# A lockup or stall report (harness/kernellog/splats.py) ends the test this long after its first
# line, so that its call trace reaches the console log first.
LOCKUP_GRACE_S = 3.0
# A command the kernel oopsed under is given this long to come back (the Oops killed a task the
# command may not even wait on) before the wait ends: the Oops is on the console already, and a
# task killed holding a lock leaves the command stuck until its deadline.
OOPS_GRACE_S = 3.0
# A warm reset is followed by the kernel's banner within a few seconds, even on a loaded host
# (docs/results/2026-11-2x-benchmarks.md); past this, the reset is done again, at most RESETS times in all
# (Guest._reset_until_the_kernel_starts says why).
KERNEL_START_S = 20.0
RESETS = 3
# How long Guest.stop() waits for SSH to close before stopping QEMU regardless.
CLOSE_S = 2.0
# A restore that has not answered by then is given up for a boot: a restore takes a fraction
# of this under TCG, and a boot is waiting behind this one.
RESTORE_TIMEOUT_S = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Guest:
    """A running guest. Use as a context manager, or call stop()."""

    def __init__(self, plan: BootPlan, vm: VM, ssh: GuestSSH, runner: ProbeRunner,
                 workdir: Path, record: BootRecord) -> None:
        self.plan = plan
        self.vm = vm
        self.ssh = ssh
        self.runner = runner
        self.workdir = workdir
        self.record = record
        # Every kernel log line read so far, so that a test and the plugin can each take the
        # lines since their own mark (kmsg() itself returns only what is new).
        self.kernel_log: list[str] = []
        self.tainted = -1  # the kernel's taint mask as of the last kmsg()
        self._observed: dict[tuple, ProbeResult] = {}
        # Why the guest is no longer usable though QEMU runs (a warm reboot that did not come
        # back): health() says so, and the test that broke it is rerun on a fresh guest.
        self.broken: str | None = None
        self.coverage_kept = False  # gcov counters read since the last (re)boot
        self.coverage_dumps = 0
        # Every probe run, for the reports (each test shows the ones it ran).
        self.probe_log: list[tuple[str, tuple[str, ...], str, ProbeResult]] = []
        self.deadlines = Deadlines.load()
        ssh.watchdog = self._raise_if_dead
        if ssh.connected:
            ssh.start_heartbeat()
        runner.start_heartbeat()

    def _raise_if_dead(self, since: float) -> None:
        """The watchdog of a wait on the guest that began at `since` (time.monotonic())."""
        if (dead := self.health()) is not None:
            raise GuestHang(f"the guest died: {dead}")
        oops_at = self.vm.oops_at
        if self.vm.oops and oops_at >= since and time.monotonic() - oops_at > OOPS_GRACE_S:
            raise KernelOops(f"the kernel oopsed and the command did not come back within "
                             f"{OOPS_GRACE_S:g} s: {self.vm.oops}")

    @property
    def kernel(self) -> BootableKernel:
        return self.plan.kernel

    def __enter__(self) -> Guest:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def run(self, command: str, timeout: float = 60.0, user: str = "root") -> CommandResult:
        """A shell command in the guest (as `user`, through runuser when not root)."""
        if user != "root":
            command = f"runuser -u {shlex.quote(user)} -- sh -c {shlex.quote(command)}"
        return self.ssh.run(command, timeout=timeout)

    def probe(self, name: str, args: list[str] | tuple[str, ...] = (), user: str = "root",
              timeout: float | None = None) -> ProbeResult:
        """Run probes/<name>.py in the guest and return its parsed JSON; within `timeout`
        seconds, by default the call's deadline (probes/deadlines.json, Deadlines)."""
        if timeout is None:
            timeout = self.deadlines.for_call(name, args, self.kernel.arch)
        result = self.runner.run(name, args, user=user, timeout=timeout)
        self.probe_log.append((name, tuple(args), user, result))
        return result

    def observe(self, name: str, args: list[str] | tuple[str, ...] = (), user: str = "root",
                timeout: float | None = None) -> ProbeResult:
        """probe(), run once per guest for these arguments: when several tests judge one set
        of observations, the guest does the work once (a splat it causes lands in the log of
        the first of those tests)."""
        key = (name, tuple(args), user)
        if key not in self._observed:
            self._observed[key] = self.probe(name, args, user=user, timeout=timeout)
        return self._observed[key]

    def insmod(self, ko: Path, params: str = "") -> None:
        """Load a module built on the host (harness/kernels/modules.py), unless it is loaded already."""
        name = ko.stem
        if self.run(f"test -d /sys/module/{name}").exit_status == 0:
            return
        remote = f"/tmp/{ko.name}"
        self.ssh.push(ko, remote)
        r = self.run(f"insmod {remote} {params}")
        if r.exit_status != 0:
            raise ModuleError(f"insmod {ko.name} failed in the guest: "
                              f"{(r.stderr or r.stdout).strip()}")

    def kmsg(self) -> list[str]:
        """Kernel log lines since the previous call; all are also kept in kernel_log."""
        lines, self.tainted = self.runner.kmsg()
        self.kernel_log.extend(lines)
        return lines

    def state(self) -> dict[str, str]:
        """What a test could leave changed in the guest for the next one: tracefs instances and
        tracer settings, the perf sysctls a probe may set, processes still running. Compared
        after a failed test with the state of the guest when it was new (one SSH command)."""
        parts = {
            "tracefs instances": "ls /sys/kernel/tracing/instances",
            "tracer": "cat /sys/kernel/tracing/current_tracer /sys/kernel/tracing/tracing_on "
                      "/sys/kernel/tracing/buffer_size_kb",
            "perf sysctls": "cat /proc/sys/kernel/perf_event_paranoid "
                            "/proc/sys/kernel/perf_event_mlock_kb",
            # Not kernel threads (children of kthreadd), not this command's own session.
            "processes": "ps --ppid 2 -p 2 --deselect -o comm= | grep -vxE 'ps|sh|sort|sshd-session'"
                         " | sort",
        }
        marker = "::ringlab-state::"
        script = "; ".join(f"echo {marker}{shlex.quote(k)}; {c} 2>&1" for k, c in parts.items())
        out = self.run(script, timeout=30).stdout
        state: dict[str, str] = {}
        for chunk in out.split(marker)[1:]:
            key, _, value = chunk.partition("\n")
            state[key] = " ".join(value.split())
        return state

    def health(self) -> str | None:
        """None if the guest looks alive; otherwise what happened to it."""
        if self.broken:
            return self.broken
        if self.vm.panicked.is_set() and self.vm.panic:
            return f"kernel panic: {self.vm.panic.title}"
        if self.vm.exited.is_set() or not self.vm.alive():
            return f"QEMU exited (status {self.vm.exit_status})"
        if self.vm.lockup and time.monotonic() - self.vm.lockup_at > LOCKUP_GRACE_S:
            return f"the kernel reports a lockup: {self.vm.lockup}"
        answered = max(self.ssh.last_answer, self.runner.last_answer)
        quiet = min(time.monotonic() - answered, self.vm.silent_for())
        if quiet > HANG_S:
            return f"hung (no answer from the guest and no console output for {quiet:.0f} s)"
        return None

    @property
    def gcov(self) -> bool:
        """Whether the kernel counts the lines it runs (the coverage variant of a build)."""
        return self.kernel.config_option("GCOV_KERNEL") == "y"

    def keep_coverage(self, stage: str = "") -> None:
        """Read the gcov counters into the run's report folder (collect.py); a guest that
        cannot be read leaves a `.lost` note saying why. Never raises: coverage is a
        by-product of a run, and a lost dump must not hide what the run found. `stage`
        names a dump taken before the counters are zeroed (boot: what a cold boot ran)."""
        if not self.gcov or self.coverage_kept:
            return
        self.coverage_kept = True
        self.coverage_dumps += 1
        folder = coverage.guest_folder(
            self.plan.console_log,
            f"{self.workdir.name}-{self.coverage_dumps}{'-' + stage if stage else ''}")
        if (why := self.health()) is not None:
            coverage.lost(folder, why)
            return
        try:
            d = coverage.dump(self, folder)
            log.debug("gcov: %d counter files of this guest in %s", d.files, d.folder)
        except (OSError, LabError, ValueError) as e:
            log.warning("the guest's gcov counters could not be read: %s", e)
            coverage.lost(folder, str(e))

    def stop(self) -> None:
        """Close SSH politely, but for at most CLOSE_S: a Ctrl-C that landed inside paramiko
        can leave a lock of the connection held, and waiting on it once kept a QEMU alive
        past the lab's exit (CI, stop 36). QEMU is stopped whatever the close did. A kernel
        with gcov has its counters read first (keep_coverage)."""
        try:
            self.keep_coverage()
            closing = threading.Thread(target=self._close_ssh, name="guest-ssh-close",
                                       daemon=True)
            closing.start()
            closing.join(CLOSE_S)
            if closing.is_alive():
                log.warning("closing the guest's SSH connection took over %.0f s; stopping "
                            "QEMU anyway", CLOSE_S)
        finally:
            self.vm.stop()
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _close_ssh(self) -> None:
        self.runner.close()
        self.ssh.close()

    def warm_reboot(self, timeout: float = 120.0) -> float:
        """Boot the kernel again in the same QEMU, its RAM kept (a reset, not a power cycle):
        what a persistent ring buffer needs (reserve_mem= finds the same memory). SSH and the
        probe runner reconnect; the new boot's log so far is added to kernel_log, and kmsg() goes
        on from there. The seconds it took."""
        try:
            return self._warm_reboot(timeout)
        except LabError as e:
            self.broken = f"a warm reboot did not come back: {e.message}"
            raise

    def _warm_reboot(self, timeout: float) -> float:
        start = time.monotonic()
        deadline = start + timeout
        sock = self.workdir / "qmp.sock"
        self.keep_coverage()  # a reboot zeroes them
        self.coverage_kept = False
        self._close_ssh()
        _console_note(self.plan, f"warm reboot of {self.kernel.name} (same QEMU, RAM kept)")
        self.vm.ready.clear()
        self._reset_until_the_kernel_starts(sock, deadline)
        # SSH only once init says it is up: attempts made while the kernel boots wait out
        # their banner timeouts, several times a boot's length (docs/results/2026-11-26-7x-paths.md).
        if not self.vm.wait_for(self.vm.ready, deadline, stall_s=STALL_S):
            raise _boot_failure(self.vm, self.plan, timed_out=time.monotonic() >= deadline)

        def alive() -> None:
            if self.vm.panicked.is_set() or self.vm.exited.is_set():
                raise _boot_failure(self.vm, self.plan, timed_out=False)

        ssh = GuestSSH(self.record.ssh_port, self.plan.key, self.plan.rootfs.host_key)
        try:
            ssh.connect(deadline, alive)
        except SSHError as e:
            raise BootError(f"the guest did not come back from a warm reboot: {e}",
                            console.tail(self.vm.console_text())) from None
        monitor.reboot_ends_qemu(sock, deadline)
        self.runner.close()
        self.ssh, self.runner = ssh, ProbeRunner(ssh, self.plan.extra_probe_dirs,
                                                 self.record.runner_port)
        ssh.watchdog = self._raise_if_dead
        ssh.start_heartbeat()
        self.runner.start()
        self.runner.start_heartbeat()
        # The new boot's log up to now is judged as what the caller's test caused (a splat of
        # a persistent buffer's validation at boot, say); kmsg() goes on from here.
        lines, self.tainted = self.runner.kmsg(from_boot=True)
        self.kernel_log.extend(lines)
        self._observed.clear()
        took = time.monotonic() - start
        _console_note(self.plan, f"back from the warm reboot in {took:.2f} s")
        return took


    def _reset_until_the_kernel_starts(self, sock: Path, deadline: float) -> None:
        """The machine reset, and reset again if no kernel banner follows within
        KERNEL_START_S. Under TCG the first reset of a QEMU that booted the kernel itself,
        with nokaslr, runs nothing the console shows (silent well past a boot's length, then
        a second reset boots: docs/results/2026-11-2x-benchmarks.md); a QEMU restored from a snapshot boots at the first."""
        for attempt in range(1, RESETS + 1):
            starts = self.vm.kernel_starts
            monitor.warm_reset(sock, deadline)
            until = min(deadline, time.monotonic() + KERNEL_START_S)
            while time.monotonic() < until and self.vm.kernel_starts == starts \
                    and not self.vm.exited.is_set():
                time.sleep(0.1)
            if self.vm.kernel_starts > starts or self.vm.exited.is_set() or attempt == RESETS:
                return
            log.warning("no kernel banner %.0f s after the warm reset of %s; resetting again",
                        KERNEL_START_S, self.kernel.name)
            _console_note(self.plan, f"no kernel banner {KERNEL_START_S:.0f} s after the "
                                     f"reset; reset {attempt + 1}")


def _overlay(image: Path, workdir: Path) -> Path:
    """A qcow2 overlay over the cached image: the guest writes there, never to the cache."""
    overlay = workdir / "root.qcow2"
    overlay.unlink(missing_ok=True)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(image),
                    str(overlay)], check=True, capture_output=True)
    return overlay


def _boot_failure(vm: VM, plan: BootPlan, timed_out: bool) -> BootError:
    text = vm.console_text()
    stage = console.last_stage(text)
    tail = console.tail(text)
    if vm.panic:
        tail = console.excerpt(text, vm.panic.line)
        return BootPanic(f"kernel {plan.kernel.name} ({plan.kernel.release}) panicked during boot "
                         f"(reached: {stage}): {vm.panic.title}", tail,
                         tcg_artefact=vm.tcg_artefact if plan.accel == "tcg" else None)
    if "Could not set up host forwarding rule" in text:
        return BootError("QEMU could not forward the SSH port (port taken)", tail)
    if console.NO_ROOT in text:
        return BootPanic(f"the initramfs could not mount the root disk (reached: {stage})", tail,
                         hint="the kernel may lack virtio_blk or ext4 (built in or as modules)")
    if vm.exited.is_set() or not vm.alive():
        return BootPanic(f"QEMU exited with status {vm.exit_status} before the guest was ready "
                         f"(reached: {stage})", tail)
    if vm.silent_for() > STALL_S:
        return BootTimeout(f"guest stalled: its console was silent for {vm.silent_for():.0f} s "
                           f"before it was ready (reached: {stage}; accel {plan.accel})", tail)
    if timed_out:
        return BootTimeout(f"guest not ready within {plan.boot_timeout_s:g} s (reached: {stage}; "
                           f"accel {plan.accel})", tail,
                           hint="raise machine.boot_timeout_s, or see the console log "
                                f"{plan.console_log}")
    return BootError(f"guest boot failed (reached: {stage})", tail)


def _spec(plan: BootPlan, workdir: Path, port: int, root_disk: Path, save: bool,
          incoming: bool = False, runner_port: int | None = None) -> qemu.QemuSpec:
    """The QEMU machine of `plan`, its monitor on workdir/qmp.sock (snapshots, warm reboots)."""
    return qemu.QemuSpec(
        kernel=plan.kernel.vmlinuz, initramfs=plan.kernel.initramfs,
        cmdline=" ".join(filter(None, (plan.kernel.cmdline, plan.cmdline))),
        cpus=plan.cpus, memory_mb=plan.memory_mb, accel=plan.accel, tcg_threads=plan.tcg_threads,
        root_disk=root_disk, modules_disk=plan.kernel.modules_image,
        ssh_port=port, pidfile=workdir / "qemu.pid",
        qmp_socket=workdir / "qmp.sock", incoming=incoming,
        arch=plan.kernel.arch, tcg_cpu=plan.tcg_cpu, gdb_port=plan.gdb_port,
        runner_forward=None if runner_port is None else (runner_port, RUNNER_PORT))


def _accel_key(plan: BootPlan) -> str:
    """The accelerator and, under TCG, the CPU model: a stream saved on one model does not
    load on another. x86's default model adds nothing, so the keys saved before arches hold."""
    a = arches.get(plan.kernel.arch)
    cpu = plan.tcg_cpu or a.tcg_cpu
    plain = cpu == a.tcg_cpu and not a.named_in_keys
    return plan.accel if plan.accel != "tcg" or plain else f"tcg,cpu={cpu}"


def snapshot_key(plan: BootPlan) -> snapshot.SnapshotKey:
    """What a saved guest of `plan` depends on (harness/guest/snapshot.py)."""
    k = plan.kernel
    return snapshot.SnapshotKey(
        qemu=plan.qemu_version,
        kernel=tuple(snapshot.file_id(p) for p in (k.vmlinuz, k.initramfs, k.modules_image)),
        rootfs=snapshot.file_id(plan.rootfs.image), host_key=plan.rootfs.host_key,
        cpus=plan.cpus, memory_mb=plan.memory_mb, accel=_accel_key(plan),
        tcg_threads=plan.tcg_threads,
        cmdline=" ".join(filter(None, (qemu.base_cmdline(k.arch), k.cmdline, plan.cmdline))),
        probes=probes_digest())


def _console_note(plan: BootPlan, text: str) -> None:
    """A line of the lab's own in the console log, between the guests' output."""
    plan.console_log.parent.mkdir(parents=True, exist_ok=True)
    with plan.console_log.open("a") as f:
        f.write(f"\n==== ringlab: {text} ====\n")


def _save(plan: BootPlan, vm: VM, ssh: GuestSSH, workdir: Path, overlay: Path,
          key: snapshot.SnapshotKey) -> str | None:
    """Save the just-booted guest as its profile's snapshot; the guest goes on either way. A
    failed save is a warning: the next guest of the profile boots (and tries again)."""
    assert plan.snapshots is not None
    t = time.monotonic()
    try:
        warm = ssh.run(snapshot.WARM_COMMAND, timeout=60)
        if warm.exit_status != 0:
            raise snapshot.SnapshotError(f"reading boot_id failed: {warm.stderr.strip()}")
        snap = snapshot.save(plan.snapshots, key, workdir / "qmp.sock", frozen_overlay=overlay,
                             live_overlay=workdir / "live.qcow2")
    except Exception as e:  # noqa: BLE001 - a snapshot is an optimisation, never a failure
        if not vm.alive():
            raise _boot_failure(vm, plan, timed_out=False) from e
        log.warning("could not save a snapshot of the guest (%s); later guests of this "
                    "profile boot", snapshot.fallback_reason(e))
        return None
    _console_note(plan, f"snapshot {snap.name} saved in {time.monotonic() - t:.2f} s")
    log.info("guest saved as snapshot %s in %.2f s", snap.name, time.monotonic() - t)
    return snap.name


def _start(plan: BootPlan, workdir: Path, attempt: int,
           save_as: snapshot.SnapshotKey | None = None) -> Guest:
    port, runner_port = free_port(), free_port()
    overlay = _overlay(plan.rootfs.image, workdir)
    spec = _spec(plan, workdir, port, overlay, save=save_as is not None, runner_port=runner_port)
    _console_note(plan, f"boot {plan.kernel.name} ({plan.kernel.release}), accel {plan.accel}, "
                        f"{plan.cpus} cpu(s), attempt {attempt}, "
                        f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
    vm = VM(qemu.command(spec), plan.console_log, plan.console_log_bytes)
    start = time.monotonic()
    deadline = start + plan.boot_timeout_s
    vm.start()
    try:
        if not vm.wait_for(vm.ready, deadline, stall_s=STALL_S):
            raise _boot_failure(vm, plan, timed_out=time.monotonic() >= deadline)
        ssh = GuestSSH(port, plan.key, plan.rootfs.host_key)

        def alive() -> None:
            if vm.panicked.is_set() or vm.exited.is_set():
                raise _boot_failure(vm, plan, timed_out=False)

        ssh.connect(deadline, alive)
        ssh_ready = time.monotonic() - start
        runner = ProbeRunner(ssh, plan.extra_probe_dirs, runner_port)
        if save_as:
            runner.launch()  # saved with the guest: a restored guest's probes are ready at once
        saved = _save(plan, vm, ssh, workdir, overlay, save_as) if save_as else None
        runner.start()
        record = BootRecord(ssh_port=port, boot_s=time.monotonic() - start,
                            ssh_ready_s=ssh_ready, stages=dict(vm.stages), attempts=attempt,
                            snapshot=saved, runner_port=runner_port)
        log.info("guest %s up in %.1f s (ssh at %.1f s, accel %s, port %d)", plan.kernel.name,
                 record.boot_s, ssh_ready, plan.accel, port)
        return Guest(plan, vm, ssh, runner, workdir, record)
    except BaseException:
        vm.stop()
        raise


def _restore(plan: BootPlan, snap: snapshot.Snapshot, workdir: Path) -> Guest:
    """A guest restored from `snap` on its own overlay and SSH port, its clock stepped to the
    host's and its random pool reseeded; SnapshotError (or a BootError) if it does not answer
    SSH within RESTORE_TIMEOUT_S. The ready marker is not printed again: SSH is the sign."""
    port, runner_port = free_port(), free_port()
    spec = _spec(plan, workdir, port, snapshot.overlay(snap, workdir), save=False,
                 incoming=True, runner_port=runner_port)
    _console_note(plan, f"restore {plan.kernel.name} ({plan.kernel.release}), accel "
                        f"{plan.accel}, {plan.cpus} cpu(s), from snapshot {snap.name}, "
                        f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
    vm = VM(qemu.command(spec), plan.console_log, plan.console_log_bytes)
    start = time.monotonic()
    deadline = start + min(RESTORE_TIMEOUT_S, plan.boot_timeout_s)
    vm.start()
    try:
        def alive() -> None:
            if vm.panicked.is_set() or vm.exited.is_set():
                raise snapshot.SnapshotError(
                    f"the restored guest died: {vm.panic.title if vm.panic else 'QEMU exited'}"
                    f" (status {vm.exit_status})", console.tail(vm.console_text()))

        try:
            snapshot.restore(workdir / "qmp.sock", snap, deadline)
            loaded = time.monotonic() - start
        except snapshot.SnapshotError as e:
            vm.wait_for(vm.exited, time.monotonic() + 1)  # QEMU's own words reach the log
            e.console_tail = console.tail(vm.console_text(), 5)
            raise
        # SSH connects when first used (a test's shell command, a push): the probe runner's
        # daemon, up in the snapshot, answers straight through QEMU's forward well before an
        # SSH handshake would (probes/runner.py says why).
        ssh = GuestSSH(port, plan.key, plan.rootfs.host_key)
        ssh.connect_on_first_use(plan.boot_timeout_s, alive)
        runner = ProbeRunner(ssh, plan.extra_probe_dirs, runner_port)
        runner.start()
        ssh_ready = time.monotonic() - start
        log.debug("restore: probe runner ready at %.2f s", ssh_ready)
        try:
            runner.refresh(time.time_ns(), os.urandom(64))
        except ProbeError as e:
            raise snapshot.SnapshotError(f"the restored guest: {e}") from None
        log.debug("restore: clock and random pool set at %.2f s", time.monotonic() - start)
        record = BootRecord(ssh_port=port, boot_s=time.monotonic() - start,
                            ssh_ready_s=ssh_ready, restored=True, snapshot=snap.name,
                            stages={"state loaded": loaded, "runner": ssh_ready},
                            runner_port=runner_port)
        _console_note(plan, f"restored in {record.boot_s:.2f} s (answering at {ssh_ready:.2f} "
                            f"s, SSH port {port})")
        log.info("guest %s restored in %.1f s (answering at %.1f s, accel %s, port %d)",
                 plan.kernel.name, record.boot_s, ssh_ready, plan.accel, port)
        return Guest(plan, vm, ssh, runner, workdir, record)
    except BaseException:
        vm.stop()
        raise


def boot(plan: BootPlan) -> Guest:
    """A guest per `plan` (_boot); on a kernel with gcov, its counters zeroed (what the boot
    ran is no test's) and read back when it stops (harness/coverage/collect.py). What a cold
    boot ran is kept first, as a dump of its own: the persistent ring buffer is set up only
    at boot, from the command line the test's profile asked for (a restore has nothing new)."""
    g = _boot(plan)
    if g.gcov:
        if not g.record.restored:
            g.keep_coverage("boot")
            g.coverage_kept = False
        try:
            coverage.reset(g)
        except (OSError, LabError) as e:
            g.stop()
            raise BootError(f"the guest's gcov counters could not be zeroed: {e}", "") from None
    return g


def _boot(plan: BootPlan) -> Guest:
    """A guest per `plan`: restored from its profile's snapshot when there is one, else
    booted (and saved as that snapshot when `plan.snapshots`). A restore that fails becomes a
    boot with a warning, and the snapshot is remade. A boot that panics under TCG, stalls, or
    finds its port taken is retried once in a fresh guest; a second failure is reported as
    reproduced. The folders of guests whose labs were killed are swept first (workdir.py)."""
    guest_folders.sweep_orphans()
    workdir = guest_folders.make()
    try:
        key = snapshot_key(plan) if plan.snapshots is not None else None
        snap = snapshot.find(plan.snapshots, key) if plan.snapshots and key else None
        fallback = None
        if snap is None and plan.snapshots and key and \
                (why := snapshot.unusable(snapshot.Snapshot(plan.snapshots / key.digest()),
                                          key)) != "absent":
            fallback = f"snapshot {key.digest()} is unusable: {why}"
            log.warning("%s; booting instead, and saving a new snapshot", fallback)
        if snap is not None:
            try:
                return _restore(plan, snap, workdir)
            except BaseException as e:
                if (fallback := snapshot.fallback_reason(e)) is None:
                    raise
                log.warning("the guest snapshot %s did not restore (%s); booting instead, "
                            "and saving a new snapshot", snap.name, fallback)
                _console_note(plan, f"snapshot {snap.name} did not restore ({fallback}); "
                                    f"booting instead")
                snapshot.discard(snap)
        for attempt in (1, 2):
            try:
                g = _start(plan, workdir, attempt, save_as=key)
                g.record.fallback = fallback
                return g
            except BootError as e:
                # Under TCG an early-boot panic is as likely the emulator's as the kernel's
                # (seen here: int3 oopses, spurious #DB warnings, a double fault, all under
                # host load), and so is a stall: rerun once before reporting it.
                tcg_panic = isinstance(e, BootPanic) and plan.accel == "tcg"
                stalled = e.message.startswith("guest stalled")
                retry = tcg_panic or stalled or "port taken" in e.message
                if attempt == 2 and retry:
                    e.message += " (and again on a rerun in a fresh guest)"
                if attempt == 2 or not retry:
                    raise
                why = f" after a known TCG artefact: {e.tcg_artefact}" \
                    if isinstance(e, BootPanic) and e.tcg_artefact else ""
                log.warning("boot failed (%s)%s; retrying once in a fresh guest", e.message, why)
        raise AssertionError("unreachable")
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise

