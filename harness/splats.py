"""Kernel splats in a kernel log: WARNING, BUG, Oops, GPF, KASAN, UBSAN, lockdep, stalls.

A splat is what the kernel prints when it catches itself misbehaving; a probe that passes while
the kernel WARNs has still found a bug. Pure functions over log lines (dmesg records or console
lines, printk timestamps allowed), tested on real logs in tests/unit/data.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness import console

# The first line of each kind of report (lib/bug.c, kernel/panic.c, arch/x86/kernel/traps.c,
# mm/kasan/report.c, lib/ubsan.c, kernel/locking/lockdep.c, kernel/rcu/tree_stall.h,
# kernel/watchdog.c, kernel/hung_task.c, lib/refcount.c).
_STARTS = re.compile(
    r"^(?:WARNING: CPU: \d+ PID: \d+ at (?P<warn_at>\S+) (?P<warn_fn>\S+)"
    r"|WARNING: (?:possible |inconsistent lock state|suspicious RCU usage|bad unlock balance)"
    r"|(?:kernel )?BUG: |kernel BUG at |Oops: |general protection fault|UBSAN: "
    r"|rcu: INFO: .*detected stalls|watchdog: BUG: soft lockup|watchdog: Watchdog detected hard"
    r"|INFO: task .* blocked for more than |refcount_t: |Kernel panic - not syncing: )")
_TRACE_END = re.compile(r"---\[ end (?:trace|Kernel panic)")
# The "CPU: 0 UID: 0 PID: 168 Comm: x Tainted: G        W          6.12.107" line of a report.
_TAINT = re.compile(r"\b(?:(?P<none>Not tainted)|Tainted: (?P<flags>[A-Z ]+?)\s+\d)")


@dataclass
class Splat:
    title: str
    first_line: int                     # index in the lines given
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


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
