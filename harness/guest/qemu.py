"""The QEMU command line: one pure function from a machine description to argv."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness import arch as arches

QEMU = arches.X86_64.qemu
# Kernel arguments every lab guest gets (after the console, which is the arch's: base_cmdline()).
# panic=-1 plus -no-reboot makes a panic end QEMU at once; printk.devkmsg=on lets the harness
# write test markers into the kernel log.
COMMON_CMDLINE = "root=/dev/vda rw panic=-1 printk.devkmsg=on"
BASE_CMDLINE = f"console={arches.X86_64.console},115200 {COMMON_CMDLINE}"
# Under TCG the CPU model is QEMU's conservative default without CMPXCHG16B. QEMU 7.2's TCG
# raises spurious #DB exceptions, and now and then double faults, right after the guest's
# `cmpxchg16b %gs:(%rsi)` in SLUB's allocation fast path (__kmalloc_noprof+0x134): every such
# splat seen here had its RIP there, and a host under load makes them frequent (2 of 12 boots,
# one fatal). Without cx16 the kernel takes SLUB's locked path: 0 of 12, then 0 of 30. `-cpu
# max` was worse still (the same #DB, and sshd-session crashing in ld.so).
TCG_CPU = "qemu64,-cx16"
# arm64 under TCG: neoverse-n1. Measured here (`./lab bench cpu-models --kernel trixie-arm64`,
# 3 boots each, models taking turns, host load 7-9), QEMU start to SSH ready, min/median/max:
# max 33.1/35.9/41.8 s (QARMA pointer authentication emulated on every signed return),
# max,pauth-impdef=on 13.5/16.0/22.9 s, cortex-a72 11.8/12.7/13.2 s, neoverse-n1
# 12.7/12.7/15.1 s; every boot clean (no splat). cortex-a72 has no 16 KiB granule
# (ID_AA64MMFR0.TGran16 = 0), so it cannot boot arm64-16k kernels; neoverse-n1 (v8.2: LSE
# atomics, no pauth, MTE or SVE to emulate) has 4, 16 and 64 KiB granules.
TCG_CPU_ARM64 = "neoverse-n1"
TCG_CPUS = {arches.X86_64.name: TCG_CPU, arches.ARM64.name: TCG_CPU_ARM64}
# The machine per arch: x86's PC, arm64's `virt` (a PL011 UART, PSCI, a generic PCI host:
# the virtio disks and NIC sit on PCI as on x86, so the initramfs loads the same drivers).
MACHINES = {arches.X86_64.name: "pc", arches.ARM64.name: "virt"}
# The root disk's drive name: QEMU names -drive if=virtio without an id `virtio<index>`, and the
# root disk is the first. A snapshot freezes it with blockdev-snapshot-sync.
ROOT_DRIVE = "virtio0"


@dataclass(frozen=True)
class QemuSpec:
    kernel: Path
    initramfs: Path
    cmdline: str
    cpus: int
    memory_mb: int
    accel: str  # "kvm" or "tcg"
    tcg_threads: str = "multi"  # "single" or "multi"
    root_disk: Path | None = None  # a qcow2 overlay; never the cached image itself
    modules_disk: Path | None = None
    ssh_port: int | None = None
    pidfile: Path | None = None
    qmp_socket: Path | None = None  # a QMP server socket (snapshots: harness/guest/snapshot.py)
    incoming: bool = False  # start paused, waiting for `migrate-incoming` over QMP (a restore)
    arch: str = arches.DEFAULT  # the guest's (harness.arch): binary, machine, CPU, console
    tcg_cpu: str | None = None  # another TCG CPU model than TCG_CPUS[arch] (./lab bench boot)
    gdb_port: int | None = None  # QEMU's gdbstub on 127.0.0.1:PORT (./lab boot --gdb)
    # (host port, guest port) of the probe runner's daemon, reached without SSH
    runner_forward: tuple[int, int] | None = None


def base_cmdline(arch: str = arches.DEFAULT) -> str:
    """The kernel arguments every guest of `arch` gets: its serial console, then the rest."""
    return f"console={arches.get(arch).console},115200 {COMMON_CMDLINE}"


def tcg_threads(setting: str, cpus: int) -> str:
    """Resolve machine.tcg_threads: 'auto' is single-threaded TCG when there are several vCPUs,
    because multi-threaded TCG on QEMU 7.2 oopses on kernel text patching (Oops: int3)."""
    if setting != "auto":
        return setting
    return "single" if cpus > 1 else "multi"


def opt_value(value: object) -> str:
    """A value inside a QEMU `key=value,...` option (-drive, -chardev, -netdev, -device): a
    comma ends the value there unless doubled, so a cache path with a comma must be escaped.
    Options that take one bare value (-kernel, -initrd, -append, -pidfile) take it verbatim
    and must not be escaped (QEMU 7.2 then opens '/a,,b')."""
    return str(value).replace(",", ",,")


def command(spec: QemuSpec, binary: str | None = None) -> list[str]:
    """argv for QEMU: no display, serial console on stdio, user networking bound to loopback."""
    if spec.accel == "kvm":
        accel = ["-accel", "kvm", "-cpu", "host"]
    else:
        accel = ["-accel", f"tcg,thread={spec.tcg_threads}",
                 "-cpu", spec.tcg_cpu or TCG_CPUS[spec.arch]]
    argv = [binary or arches.get(spec.arch).qemu, "-machine", MACHINES[spec.arch], *accel,
            "-smp", str(spec.cpus), "-m", str(spec.memory_mb),
            "-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio",
            "-monitor", "none", "-no-reboot",
            "-kernel", str(spec.kernel), "-initrd", str(spec.initramfs),
            "-append", f"{base_cmdline(spec.arch)} {spec.cmdline}".strip()]
    if spec.root_disk is not None:
        argv += ["-drive", f"file={opt_value(spec.root_disk)},if=virtio,format=qcow2,"
                 "cache=unsafe"]
    if spec.modules_disk is not None:
        argv += ["-drive", f"file={opt_value(spec.modules_disk)},if=virtio,format=raw,"
                 "readonly=on"]
    if spec.ssh_port is not None:
        # restrict=on: the guest reaches nothing but the forwarded port; hostfwd binds loopback.
        runner = "" if spec.runner_forward is None else \
            f",hostfwd=tcp:127.0.0.1:{spec.runner_forward[0]}-:{spec.runner_forward[1]}"
        argv += ["-netdev", f"user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:{spec.ssh_port}-:22"
                 f"{runner}", "-device", "virtio-net-pci,netdev=net0"]
    if spec.pidfile is not None:
        argv += ["-pidfile", str(spec.pidfile)]
    if spec.qmp_socket is not None:
        argv += ["-qmp", f"unix:{opt_value(spec.qmp_socket)},server=on,wait=off"]
    if spec.gdb_port is not None:
        argv += ["-gdb", f"tcp:127.0.0.1:{spec.gdb_port}"]
    if spec.incoming:
        # `defer`, not a URI here: a guest saved while stopped stays paused after the load, so
        # the lab drives the load and the `cont` over QMP and sees a failed load as such.
        argv += ["-incoming", "defer"]
    return argv


def version(binary: str = QEMU) -> str:
    """`qemu-system-<arch> --version`'s first line: part of a snapshot's key, since a migration
    stream is only promised to load into the QEMU that wrote it (or a newer one)."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    return (out.stdout.splitlines() or ["unknown"])[0].strip()
