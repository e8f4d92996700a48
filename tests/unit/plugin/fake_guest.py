"""A guest without QEMU for the plugin's pytester tests: a kernel log a test writes to, perf
sysctls it can change through run("echo V > PATH"), a death it can cause, and an SSH that is
gone once the guest is stopped, as a real guest's is."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness.errors import SSHError
from harness.kernels.kernel import BootableKernel

PARANOID = "/proc/sys/kernel/perf_event_paranoid"
MLOCK = "/proc/sys/kernel/perf_event_mlock_kb"
WARNING = ["WARNING: CPU: 0 PID: 7 at kernel/trace/trace.c:8274 f+0x1/0x2",
           "Call Trace:", " <TASK>", " f+0x1/0x2", " </TASK>", "---[ end trace 0 ]---"]


@dataclass
class Ran:
    stdout: str = ""
    stderr: str = ""
    exit_status: int = 0


@dataclass
class FakeGuest:
    number: int
    kernel_log: list[str] = field(default_factory=list)
    probe_log: list[Any] = field(default_factory=list)
    tainted: int = 0
    pending: list[str] = field(default_factory=list)   # logged, not yet read by kmsg()
    files: dict[str, str] = field(default_factory=lambda: {PARANOID: "3", MLOCK: "516"})
    dead: str | None = None
    stopped: bool = False
    console: str = ""

    def __post_init__(self) -> None:
        self.plan = SimpleNamespace(accel="kvm", cpus=1, memory_mb=1024,
                                    key=SimpleNamespace(private="/k"))
        self.record = SimpleNamespace(boot_s=1.0, attempts=1, restored=False, fallback=None,
                                      ssh_port=2222)
        self.kernel = SimpleNamespace(name="fake", release="6.12-fake", description="fake",
                                      commit=None, series=(), config=None)
        self.vm = SimpleNamespace(console_text=lambda: self.console)

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def log(self, *lines: str, taint: int | None = None) -> None:
        """What the kernel says next (read by the next kmsg())."""
        self.pending += lines
        if taint is not None:
            self.tainted = taint

    def _ssh(self) -> None:
        if self.stopped or self.dead:
            raise SSHError("not connected to the guest")

    def kmsg(self) -> list[str]:
        self._ssh()
        lines, self.pending = self.pending, []
        self.kernel_log += lines
        return lines

    def run(self, cmd: str, timeout: float = 0) -> Ran:
        self._ssh()
        if cmd.startswith("echo ") and " > " in cmd:
            value, path = cmd[5:].split(" > ")
            self.files[path] = value
            return Ran()
        if cmd.startswith("cat "):
            return Ran(stdout=self.files[cmd[4:]] + "\n")
        return Ran()

    def state(self) -> dict[str, str]:
        self._ssh()
        return {"perf sysctls": f"{self.files[PARANOID]} {self.files[MLOCK]}"}

    def health(self) -> str | None:
        return self.dead

    def stop(self) -> None:
        self.stopped = True


class FakeLab:
    """Stands for harness.resources.Lab: boots FakeGuests, numbered, and remembers them; its
    kernel's .config is `kernel_config` (None: the lab has no config for it)."""
    booted: list[FakeGuest] = []
    ahead: list[list[tuple[int, int, str]]] = []  # boot_ahead()'s profiles, per call
    kernel_config: Path | None = None

    def __init__(self, config: Any, refresh: bool = False) -> None:
        self.config = config

    def boot(self, kernel: str, console_log: Path, cpus: int, memory_mb: int,
             cmdline: str = "", restored: bool = False) -> FakeGuest:
        g = FakeGuest(len(FakeLab.booted) + 1)
        g.plan.cmdline = cmdline
        g.asked_restored = restored  # what Lab.boot was asked for (warm_reboot=True)
        FakeLab.booted.append(g)
        return g

    def boot_ahead(self, kernel: str, console_log: Path,
                   profiles: list[tuple[int, int, str]]) -> None:
        FakeLab.ahead.append(profiles)

    def wait_ahead(self) -> None:
        pass

    def kernel(self, name: str | None = None) -> BootableKernel:
        return BootableKernel(name="fake", release="6.12-fake", vmlinuz=Path("/nonexistent"),
                              initramfs=Path("/nonexistent"), modules_image=None,
                              config=FakeLab.kernel_config, description="fake")

    def prepared(self, kernel: str) -> None:
        return None
