"""The QEMU command line: one pure function from a machine description to argv."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness import arch as arches

# The default arch's binary: what version() and accel.host_id() ask when given none.
QEMU = arches.get(arches.DEFAULT).qemu
# Kernel arguments every lab guest gets (after the console, which is the arch's: base_cmdline()).
# panic=-1 plus -no-reboot makes a panic end QEMU at once; printk.devkmsg=on lets the harness
# write test markers into the kernel log.
COMMON_CMDLINE = "root=/dev/vda rw panic=-1 printk.devkmsg=on"
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
    tcg_cpu: str | None = None  # another TCG CPU model than the Arch's (./lab bench boot)
    gdb_port: int | None = None  # QEMU's gdbstub on 127.0.0.1:PORT (./lab boot --gdb)
    # (host port, guest port) of the probe runner's daemon, reached without SSH
    runner_forward: tuple[int, int] | None = None


def base_cmdline(arch: str = arches.DEFAULT) -> str:
    """The kernel arguments every guest of `arch` gets: its serial console, then the rest."""
    return f"console={arches.get(arch).console},115200 {COMMON_CMDLINE}"


def tcg_threads(setting: str, cpus: int) -> str:
    """Resolve machine.tcg_threads: 'auto' is single-threaded TCG when there are several vCPUs,
    because multi-threaded TCG on QEMU 7.2 oopses on kernel text patching (Oops: int3): 3 of 8
    2-vCPU boots of 7.2.13 and 7.3~rc7 under `./lab bench tcg-threads`, none of 4
    single-threaded (docs/results/2026-12-05-races.md)."""
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
    a = arches.get(spec.arch)
    if spec.accel == "kvm":
        accel = ["-accel", "kvm", "-cpu", "host"]
    else:
        accel = ["-accel", f"tcg,thread={spec.tcg_threads}", "-cpu", spec.tcg_cpu or a.tcg_cpu]
    argv = [binary or a.qemu, "-machine", a.machine, *accel,
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
