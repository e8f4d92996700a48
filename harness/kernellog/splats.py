"""Kernel splats in a kernel log: WARNING, BUG, Oops, GPF, KASAN, UBSAN, lockdep, stalls.

A splat is what the kernel prints when it catches itself misbehaving; a probe that passes while
the kernel WARNs has still found a bug. Pure functions over log lines (dmesg records or console
lines, printk timestamps allowed), tested on real logs in tests/unit/data.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.kernellog import console

# The first line of each kind of report (lib/bug.c, kernel/panic.c, arch/x86/kernel/traps.c,
# mm/kasan/report.c, lib/ubsan.c, kernel/locking/lockdep.c, kernel/rcu/tree_stall.h,
# kernel/watchdog.c, kernel/hung_task.c, lib/refcount.c).
_STARTS = re.compile(
    r"^(?:WARNING: CPU: \d+ PID: \d+ at (?P<warn_at>\S+) (?P<warn_fn>\S+)"
    r"|WARNING: (?:possible |inconsistent lock state|suspicious RCU usage|bad unlock balance)"
    r"|(?:kernel )?BUG: |kernel BUG at |Oops: |general protection fault|UBSAN: "
    r"|rcu: INFO: .*detected stalls|watchdog: BUG: soft lockup|watchdog: Watchdog detected hard"
    r"|INFO: task .* blocked for more than |refcount_t: |Kernel panic - not syncing: )")
# The reports of a CPU or task that stopped making progress (kernel/rcu/tree_stall.h,
# kernel/watchdog.c, kernel/hung_task.c): the kernel will not finish what the test asked, so
# the harness ends the test at once instead of waiting for its command timeout.
_LOCKUP = re.compile(r"rcu: INFO: .*detected stalls|rcu: .*self-detected stall"
                     r"|watchdog: BUG: soft lockup|watchdog: Watchdog detected hard LOCKUP"
                     r"|INFO: task .* blocked for more than ")
_TRACE_END = re.compile(r"---\[ end (?:trace|Kernel panic)")
# The "CPU: 0 UID: 0 PID: 168 Comm: x Tainted: G        W          6.12.107" line of a report.
_TAINT = re.compile(r"\b(?:(?P<none>Not tainted)|Tainted: (?P<flags>[A-Z ]+?)\s+\d)")


# "Modules linked in: ringlab_aux(OE) virtio_net": a flag in parentheses marks a module that
# taints the kernel (O out of tree, E unsigned, P proprietary, ...: kernel/panic.c taint_flags).
_MODULES = re.compile(r"^Modules linked in:(?P<mods>.*)$")
_MODULE = re.compile(r"(?P<name>[\w-]+)(?:\((?P<flags>[A-Z]+)\))?")
# A call trace frame: " remove_vma+0x2f/0x70" (a "? " prefix marks an unreliable one).
# Where a CPU was in kernel mode: "RIP: 0010:hang_set+0x3f/0x60 [ringlab_splat]".
_RIP = re.compile(r"^RIP: 0010:(?P<fn>[\w.]+\+0x[0-9a-f]+/0x[0-9a-f]+(?: \[\w+\])?)")
_FRAME = re.compile(r"^\s*(?:\? )?(?P<fn>[\w.]+)\+0x[0-9a-f]+/0x[0-9a-f]+(?: \[(?P<mod>\w+)\])?")


@dataclass
class Splat:
    title: str
    first_line: int                     # index in the lines given
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def call_trace(self) -> list[str]:
        """The reliable frames after 'Call Trace:', innermost first ('? ' frames left out)."""
        return [_FRAME.match(f).group("fn") for f in trace_frames(self.lines)]  # type: ignore

    @property
    def rip(self) -> str | None:
        """The first kernel-mode instruction pointer of the report ("fn+0x3f/0x60 [mod]")."""
        for line in self.lines:
            if (m := _RIP.match(line.strip())):
                return m.group("fn")
        return None

    @property
    def modules(self) -> dict[str, str]:
        """Modules linked in when it happened, with their taint flags ('' for none)."""
        for line in self.lines:
            m = _MODULES.match(line)
            if m:
                return {x.group("name"): x.group("flags") or ""
                        for x in _MODULE.finditer(m.group("mods"))}
        return {}

    @property
    def tainting_modules(self) -> list[str]:
        """The modules that taint the kernel (out of tree, unsigned, proprietary...)."""
        return [name for name, flags in self.modules.items() if flags]

    def as_dict(self) -> dict:
        return {"title": self.title, "rip": self.rip, "call_trace": self.call_trace[:16],
                "tainting_modules": self.tainting_modules, "text": self.text}


def trace_frames(lines: list[str]) -> list[str]:
    """The reliable frames after 'Call Trace:' as printed, offsets and module kept
    ("hang_set+0x3f/0x60 [ringlab_splat]"): what decode_stacktrace.sh needs."""
    frames, inside = [], False
    for line in lines:
        text = line.strip()
        if text == "Call Trace:":
            inside = True
        elif inside and (text == "</TASK>" or text.startswith("---[ end")):
            break
        elif inside and not text.startswith("? ") and _FRAME.match(line):
            frames.append(text)
    return frames


def find(lines: list[str]) -> list[Splat]:
    """Every splat in order, each with its report lines up to its end marker (or 60 lines)."""
    out: list[Splat] = []
    current: Splat | None = None
    for i, raw in enumerate(lines):
        line = console.clean(raw)
        m = _STARTS.match(line)
        if m:
            current = Splat(_title(m, line), i, [line])
            out.append(current)
        elif current is not None:
            current.lines.append(line)
            if _TRACE_END.search(line) or len(current.lines) >= 60:
                current = None
    return out


def lockup_in(line: str) -> str | None:
    """The cleaned line if it starts a lockup, stall or hung-task report, else None."""
    text = console.clean(line)
    return text if _LOCKUP.search(text) else None


def _title(m: re.Match[str], line: str) -> str:
    if m.group("warn_at"):
        return f"WARNING at {m.group('warn_at')} {m.group('warn_fn')}"
    return line


def taint(lines: list[str]) -> str | None:
    """The taint flags of the last report's CPU line ('GW'), '' if 'Not tainted', None if no
    such line."""
    flags = None
    for raw in lines:
        m = _TAINT.search(console.clean(raw))
        if m:
            flags = "" if m.group("none") else m.group("flags").replace(" ", "")
    return flags
