"""KVM or TCG: use KVM only where it really boots a guest, and remember the verdict per host.

An openable /dev/kvm proves little: nested KVM can hang in the guest's early boot, or QEMU can
abort on an MSR it cannot set (both seen on machines like ours). So `accel: auto` boots the
lab's kernel under KVM to its initramfs, bounded in time, and falls back to TCG with a warning.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import cache
from harness.guest import qemu
from harness.guest.vm import VM
from harness.kernels.kernel import BootableKernel

log = logging.getLogger(__name__)
CHECK_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Verdict:
    kvm_works: bool
    reason: str
    checked_at: float
    host: str


def host_id(qemu_binary: str = qemu.QEMU) -> str:
    """Identifies this host for the verdict: machine id, host kernel, QEMU version."""
    try:
        machine_id = Path("/etc/machine-id").read_text().strip()
    except OSError:
        machine_id = platform.node()
    try:
        version = subprocess.run([qemu_binary, "--version"], capture_output=True, text=True,
                                 timeout=10).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        version = "unknown"
    raw = json.dumps([machine_id, platform.node(), platform.release(), version])
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def _verdict_path(cache_root: Path, host: str) -> Path:
    return cache.Layout(cache_root).kvm_verdict(host)


def check_kvm(kernel: BootableKernel, workdir: Path, timeout_s: float = CHECK_TIMEOUT_S
              ) -> tuple[bool, str]:
    """Boot `kernel` under KVM up to the initramfs marker; (works, why) within `timeout_s`."""
    if not os.path.exists("/dev/kvm"):
        return False, "/dev/kvm does not exist"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm is not readable and writable by this user"
    spec = qemu.QemuSpec(kernel=kernel.vmlinuz, initramfs=kernel.initramfs,
                         cmdline="ringlab.check", cpus=1, memory_mb=256, accel="kvm")
    vm = VM(qemu.command(spec), workdir / "kvm-check-console.log")
    start = time.monotonic()
    vm.start()
    try:
        ok = vm.wait_for(vm.check_ok, start + timeout_s)
    finally:
        vm.stop()
    took = time.monotonic() - start
    if ok:
        return True, f"a KVM guest reached its initramfs in {took:.1f} s"
    text = vm.console_text().strip().splitlines()
    last = text[-1] if text else "no console output"
    if took >= timeout_s:
        return False, f"a KVM guest did not reach its initramfs in {timeout_s:g} s (last: {last})"
    return False, f"QEMU with KVM exited before the guest booted: {last}"


def choose(setting: str, kernel: BootableKernel, cache_root: Path) -> tuple[str, str]:
    """('kvm'|'tcg', why) for machine.accel = `setting` (auto, kvm, tcg)."""
    if setting != "auto":
        return setting, f"machine.accel is {setting}"
    host = host_id()
    path = _verdict_path(cache_root, host)
    try:
        v = Verdict(**json.loads(path.read_text()))
        log.debug("kvm verdict from %s: %s", path, v)
    except (OSError, ValueError, TypeError):
        with tempfile.TemporaryDirectory(prefix="ringlab-kvm-check-") as tmp:
            works, why = check_kvm(kernel, Path(tmp))
        v = Verdict(kvm_works=works, reason=why, checked_at=time.time(), host=host)
        cache.write_atomic(path, json.dumps(asdict(v), indent=2).encode())
    if not v.kvm_works:
        log.warning("KVM does not work on this host (%s); using TCG, which is slower. "
                    "Verdict kept in %s: delete it to check again.", v.reason, path)
    if v.kvm_works:
        return "kvm", f"KVM works here ({v.reason})"
    return "tcg", f"KVM does not work here: {v.reason}"
