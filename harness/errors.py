"""The lab's error types.

Every failure a user can cause or meet (bad config, missing tool, a guest that does not boot)
is a LabError with a one-line message and, where there is one, a hint. The CLI prints those
without a traceback; anything else is a bug of ours and keeps its traceback.
"""
from __future__ import annotations


# How a test that failed for the lab's own fault (a test module that does not build) starts its
# reason: tests/kernel/conftest.py writes it, whoever judges a kernel by failures (mutate's
# kill rule) reads it and does not count that failure against the kernel.
LAB_FAULT = "the lab's error: "


class LabError(Exception):
    """A failure explained to the user in one line, with an optional hint."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class ConfigError(LabError):
    """lab.yaml (or a value given on the command line) is wrong."""


class HostError(LabError):
    """The host lacks a tool or a permission the lab needs."""


class MirrorError(LabError):
    """The Debian mirror cannot be found, reached, or trusted."""


class MirrorFileMissing(MirrorError):
    """The mirror answered 404: it has no such file (or not yet, in the middle of an update)."""


class KernelError(LabError):
    """A kernel cannot be resolved, fetched, or prepared for booting."""


class BuildError(KernelError):
    """A kernel build failed: a bad tree, a bad config fragment, or make itself."""


class PatchError(BuildError):
    """A patch series cannot be read or does not apply."""


class BisectError(LabError):
    """A bisect cannot start or cannot go on (bad revisions, not a git tree)."""


class ModuleError(LabError):
    """A test module could not be built."""


class ModuleUnavailable(ModuleError):
    """The lab cannot build modules for this kernel (no headers, no modules support): tests
    that need the module skip with this reason."""


class RootfsError(LabError):
    """The guest root filesystem cannot be built."""


class BootError(LabError):
    """A guest did not come up; the message carries the last console lines."""

    def __init__(self, message: str, console_tail: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.console_tail = console_tail

    def __str__(self) -> str:
        text = super().__str__()
        if self.console_tail:
            text += "\n  last console lines:\n" + "\n".join(
                "    | " + line for line in self.console_tail.splitlines())
        return text


class BootPanic(BootError):
    """The kernel panicked (or QEMU exited) before the guest was ready."""

    def __init__(self, message: str, console_tail: str = "", hint: str | None = None,
                 tcg_artefact: str | None = None) -> None:
        super().__init__(message, console_tail, hint)
        self.tcg_artefact = tcg_artefact  # a known TCG artefact line seen before the panic


class BootTimeout(BootError):
    """The guest was not ready within the boot timeout."""


class SSHError(LabError):
    """The guest's SSH server did not answer, refused us, or showed the wrong host key."""


class GuestHang(LabError):
    """The guest stopped answering while a command ran."""


class KernelOops(GuestHang):
    """The kernel oopsed while a command ran and the command did not come back: the task that
    hit the Oops was killed holding what it held, so waiting out the command's deadline only
    costs time (the Oops is on the console already)."""


class ProbeError(LabError):
    """A probe did not produce a result: it crashed, hung, or printed something that is not JSON."""

    def __init__(self, probe: str, message: str, stdout: str = "", stderr: str = "") -> None:
        super().__init__(f"probe {probe}: {message}")
        self.probe = probe
        self.stdout = stdout
        self.stderr = stderr


class ProbeCrashed(ProbeError):
    """The probe raised an exception or died from a signal; stderr holds the traceback."""


class ProbeTimeout(ProbeError):
    """The probe ran past its timeout and was killed. `stuck`: where each of its threads was
    in the kernel then ({comm, tid, state, wchan, stack}): a thread in D state is the kernel's
    hang, not the probe's."""

    def __init__(self, probe: str, message: str, stdout: str = "", stderr: str = "",
                 stuck: list[dict] | None = None) -> None:
        super().__init__(probe, message, stdout, stderr)
        self.stuck = stuck or []

    @property
    def in_kernel(self) -> list[dict]:
        """The threads the kernel held in uninterruptible sleep when the probe was killed."""
        return [t for t in self.stuck if str(t.get("state", "")).startswith("D")]


class ProbeOutputError(ProbeError):
    """The probe exited but its stdout is not one JSON document."""
