"""The resources a session's boots share: one lab.yaml, the cache, and what is prepared once
and handed to every boot (kernels, builds, test modules, the rootfs image, the client key, the
KVM verdict, the snapshots folder). The class keeps its name, Lab: it is the lab session that
commands and fixtures hold."""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
from pathlib import Path

from harness import arch as arches, cache, host
from harness.config import BuildKernel, DebianKernel, LabConfig
from harness.debian import mirror
from harness.errors import BootError, HostError, KernelError
from harness.guest import accel, qemu, rootfs, ssh, warm
from harness.guest.guest import BootPlan, Guest, boot
from harness.kernels import debug_symbols, kbuild, kernel, modules
from harness.kernels.kernel import BootableKernel

log = logging.getLogger(__name__)


class Lab:
    def __init__(self, config: LabConfig, refresh: bool = False) -> None:
        self.config = config
        self.refresh = refresh
        self.cache_root = cache.cache_root(config.cache_dir)
        self.layout = cache.Layout(self.cache_root)
        self._kernels: dict[str, BootableKernel] = {}
        self._rootfs: dict[str, rootfs.RootfsImage] = {}  # per arch
        self._rootfs_lock = threading.Lock()  # rootfs() from a thread of rootfs_ahead() too
        self._key: ssh.ClientKey | None = None
        self._accel: tuple[str, str] | None = None
        self._qemu_versions: dict[str, str] = {}  # per qemu-system binary
        self.builds: dict[str, kbuild.BuildReport] = {}  # the build kernels of this session
        self.usage = cache.Usage(self.cache_root)  # what this session holds in the cache
        self._ahead = warm.Warmer()  # profiles booting ahead (boot_ahead)

    def builder(self) -> kbuild.Builder:
        return kbuild.Builder(self.cache_root, lambda: mirror.resolve(self.config.mirror),
                              lambda name: self.kernel(name).config, usage=self.usage,
                              busybox_suite=self.config.rootfs.suite)

    def kernel(self, name: str | None = None) -> BootableKernel:
        spec = self.config.kernel(name)
        if spec.name not in self._kernels:
            host.require(host.KERNEL_TOOLS)
            if isinstance(spec.source, BuildKernel):
                k, report = self.builder().prepare(spec, spec.source)
                self.builds[spec.name] = report
                self._kernels[spec.name] = k
            else:
                self._kernels[spec.name] = kernel.prepare(
                    spec, self.cache_root, self.config.mirror, self.refresh,
                    busybox_suite=self.config.rootfs.suite)
            k = self._kernels[spec.name]
            for path in (k.vmlinuz, k.build_dir, k.source_dir):  # ./lab gc leaves them be
                self.usage.use(path)
        return self._kernels[spec.name]

    def prepared(self, name: str) -> BootableKernel | None:
        """The kernel `name` if this session prepared it already (no fetching)."""
        return self._kernels.get(name)

    def client_key(self) -> ssh.ClientKey:
        if self._key is None:
            self._key = ssh.client_key(self.cache_root)
        return self._key

    def rootfs(self, arch: str = arches.DEFAULT) -> rootfs.RootfsImage:
        """The guest image for kernels of `arch` (one recipe, built per arch); a call while
        rootfs_ahead() makes it waits for that."""
        with self._rootfs_lock:
            if arch not in self._rootfs:
                a = arches.get(arch)
                host.require(host.ROOTFS_TOOLS + host.foreign_rootfs_tools(a))
                self._rootfs[arch] = rootfs.ensure(self.config.rootfs,
                                                   lambda: mirror.resolve(self.config.mirror),
                                                   self.cache_root, self.client_key().public_line,
                                                   arch=a)
            return self._rootfs[arch]

    def rootfs_ahead(self, arch: str) -> threading.Thread:
        """Make the guest image in the background while the kernel is fetched or built and
        the test modules' build root made (a first run paid them one after the other). A
        failure is only logged: the first boot's own rootfs() call meets it again and says it.
        Not a daemon: a lab that stops early (its kernel failed, Ctrl-C, which mmdebstrap gets
        too) lets the image finish or clean its scratch folder before it exits."""
        self.client_key()  # here, before the thread: Lab._key is set by one thread only

        def make() -> None:
            try:
                self.rootfs(arch)
            except Exception as e:  # noqa: BLE001 - the boot's own call reports it
                log.debug("the rootfs made ahead failed (%s); the first boot makes it", e)

        t = threading.Thread(target=make, name="rootfs-ahead")
        t.start()
        return t

    def debug_vmlinux(self, kernel_name: str | None = None) -> Path:
        """The kernel's vmlinux with debug info: a build kernel's own, a Debian kernel's from
        its -dbg package (fetched once: harness/kernels/debug_symbols.py)."""
        spec = self.config.kernel(kernel_name)
        k = self.kernel(spec.name)
        if k.build_dir is not None and (k.build_dir / "vmlinux").exists():
            return k.build_dir / "vmlinux"
        if not isinstance(spec.source, DebianKernel):
            raise KernelError(f"kernel {spec.name}: no vmlinux with symbols beside its image")
        return debug_symbols.vmlinux(k, spec.source, self.cache_root,
                                     lambda: mirror.resolve(self.config.mirror))

    def module(self, name: str, kernel_name: str | None = None) -> Path:
        """kernels/modules/NAME built for the kernel (cached); ModuleUnavailable if the lab
        cannot build modules for it."""
        spec = self.config.kernel(kernel_name)
        return modules.build(name, spec, self.kernel(spec.name), self.cache_root,
                             lambda: mirror.resolve(self.config.mirror))

    def accel(self, k: BootableKernel) -> tuple[str, str]:
        """('kvm'|'tcg', why), decided once per session (and remembered per host) for kernels
        of the host's arch; a guest of another arch is always TCG (KVM runs only the host's)."""
        a = arches.get(k.arch)
        if not arches.is_native(a):
            here = arches.host()
            if self.config.machine.accel == "kvm":
                raise HostError(f"machine.accel is kvm, but kernel {k.name} is {a.name} and this "
                                f"host is {here.name if here else 'another arch'}: KVM runs only "
                                "guests of the host's arch", hint="set machine.accel: auto or tcg")
            return "tcg", f"{a.name} guest on a {here.name if here else 'foreign'} host"
        if self._accel is None:
            self._accel = accel.choose(self.config.machine.accel, k, self.cache_root)
        return self._accel

    def plan(self, kernel_name: str | None, console_log: Path, cpus: int | None = None,
             cmdline: str = "", extra_probe_dirs: tuple[Path, ...] = (),
             memory_mb: int | None = None) -> BootPlan:
        """Prepare everything a boot needs (fetching and building on first use)."""
        k = self.kernel(kernel_name)
        a = arches.get(k.arch)
        host.require(host.boot_tools(a))
        image = self.rootfs(k.arch)
        m = self.config.machine
        chosen, _ = self.accel(k)
        n = cpus or m.cpus
        if a.qemu not in self._qemu_versions:
            self._qemu_versions[a.qemu] = qemu.version(a.qemu)
        return BootPlan(kernel=k, rootfs=image, key=self.client_key(), cpus=n,
                        memory_mb=memory_mb or m.memory_mb, accel=chosen,
                        tcg_threads=qemu.tcg_threads(m.tcg_threads, n),
                        boot_timeout_s=m.boot_timeout_s, console_log=console_log,
                        cmdline=" ".join(filter(None, (m.cmdline, cmdline))),
                        extra_probe_dirs=extra_probe_dirs,
                        console_log_bytes=m.console_log_mb * 2**20,
                        snapshots=self.snapshots_dir(), qemu_version=self._qemu_versions[a.qemu])

    def snapshots_dir(self) -> Path | None:
        """Where guest snapshots are kept (harness/guest/snapshot.py); None with
        RINGLAB_NO_SNAPSHOT=1, which makes every guest boot."""
        if os.environ.get("RINGLAB_NO_SNAPSHOT", "") not in ("", "0"):
            return None
        return self.layout.snapshots()

    def boot(self, kernel_name: str | None, console_log: Path, cpus: int | None = None,
             cmdline: str = "", extra_probe_dirs: tuple[Path, ...] = (),
             memory_mb: int | None = None, gdb_port: int | None = None,
             restored: bool = False) -> Guest:
        """A guest: restored from its profile's snapshot, or cold booted and saved (once
        across processes: a concurrent lab's cold boot of the profile is waited for). With
        `restored`, a guest its caller will warm-reboot: a cold-booted one that was saved is
        stopped and restored, since under TCG only a restored QEMU comes back from its first
        reset (Guest._reset_until_the_kernel_starts); one that could not be saved (or with
        RINGLAB_NO_SNAPSHOT) is kept, and its warm reboot resets twice. A boot
        that fails has the kernel's and rootfs's cache entries checked digest by digest: one
        that changed under its mtime was the cause, and is made again and booted once more."""
        for last in (False, True):
            plan = self.plan(kernel_name, console_log, cpus, cmdline, extra_probe_dirs,
                             memory_mb)
            if gdb_port:
                plan = dataclasses.replace(plan, gdb_port=gdb_port)
            self._ahead.wait(plan)
            try:
                if warm.has_snapshot(plan):
                    return boot(plan)
                with warm.cold_boot_lock(plan) as cold:
                    g = boot(plan)
                    if not (cold and restored and g.record.snapshot and not g.record.restored):
                        return g
                    g.stop()  # saved as the profile's snapshot: the caller gets its restore
                    return boot(plan)
            except BootError:
                if last or not any([kernel.recheck(plan.kernel), rootfs.recheck(plan.rootfs)]):
                    raise
                self._kernels.pop(plan.kernel.name, None)
                self._rootfs.pop(plan.kernel.arch, None)
        raise AssertionError("unreachable")

    def wait_ahead(self) -> None:
        """Wait for the boots ahead still running (a session's end: none is left half-saved)."""
        self._ahead.wait_all()

    def boot_ahead(self, kernel_name: str | None, console_log: Path,
                   profiles: list[tuple[int, int, str]]) -> None:
        """Cold boot, at once in the background, each (cpus, memory_mb, cmdline) profile that
        has no snapshot yet (harness/guest/warm.py); boot() of one waits for its boot ahead."""
        plans = [self.plan(kernel_name, console_log, cpus=c, memory_mb=m, cmdline=cl)
                 for c, m, cl in profiles]
        started = self._ahead.start([dataclasses.replace(
            p, console_log=warm.console_log_for(console_log, p)) for p in plans])
        if started:
            log.info("booting %d more machine profile(s) ahead, at once: %s", len(started),
                     ", ".join(f"{p.cpus} cpu {p.memory_mb} MB" + (" +cmdline" if p.cmdline
                                                                  else "") for p in started))
