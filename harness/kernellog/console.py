"""Reading a guest's serial console: boot stages, the ready marker, panics.

Pure functions over console text, so they are tested on real console logs (tests/unit/data).
vm.py feeds them line by line while a guest runs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# Markers printed by rootfs/initramfs-init and rootfs/ringlab-init.
READY = "ringlab: ready"
CHECK_OK = "ringlab: check ok"
NO_ROOT = "ringlab: cannot mount the root disk"

# Boot stages in order; the last one seen tells how far a failed boot got.
STAGES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("kernel", re.compile(r"Linux version \S+")),
    ("initramfs", re.compile(r"Run \S+ as init process|ringlab: initramfs")),
    ("init", re.compile(r"ringlab: init$")),
    ("ready", re.compile(re.escape(READY))),
)

_PANIC = re.compile(r"Kernel panic - not syncing: ?(?P<why>.*)")
_OOPS = re.compile(r"(?:Oops|BUG|general protection fault)[:,]? ?(?P<why>.*)")
_TIMESTAMP = re.compile(r"^\[\s*\d+\.\d+\]\s?")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


# Console lines that QEMU 7.2's TCG produces on its own, seen on this kind of host: an int3
# oops from a race in kernel text patching (multi-threaded TCG), and a spurious #DB warning
# in exc_debug_kernel right after a cmpxchg16b (qemu64 with cx16; harness/guest/qemu.py now turns
# cx16 off). A failure after one is rerun in a fresh guest before anyone calls it a kernel bug.
TCG_ARTEFACTS = (re.compile(r"Oops: int3"),
                 # 6.x "WARNING: CPU: 0 PID: 1 at arch/x86/kernel/traps.c:1 exc_debug_kernel+...",
                 # 7.x "WARNING: arch/x86/kernel/traps.c:1 at exc_debug_kernel+..., CPU#0: ..."
                 re.compile(r"WARNING: .*arch/x86/kernel/traps\.c:\d+ (?:at )?exc_debug_kernel"))


def tcg_artefact_in(line: str) -> str | None:
    """The line, cleaned, if it is one of the known TCG artefacts."""
    text = clean(line)
    return text if any(p.search(text) for p in TCG_ARTEFACTS) else None


@dataclass(frozen=True)
class Panic:
    """A fatal kernel message seen on the console."""
    title: str
    line: str
    # A known TCG artefact line seen before the panic (see TCG_ARTEFACTS), if any.
    tcg_artefact: str | None = None


def clean(line: str) -> str:
    """A console line without carriage returns, colour codes, or the printk timestamp; a
    /dev/kmsg record's escaped newline (lockdep's "\\x0a-> #0 ...") as a space, so the
    line reads as the console prints it."""
    return _TIMESTAMP.sub("", _ANSI.sub("", line)).rstrip("\n").replace("\\x0a", " ")


def stage_of(line: str) -> str | None:
    """The boot stage a console line announces, if any."""
    for name, pattern in STAGES:
        if pattern.search(line):
            return name
    return None


def panic_in(line: str, context: str = "") -> Panic | None:
    """A Panic if `line` is a kernel panic; `context` (earlier lines) refines the title."""
    text = clean(line)
    m = _PANIC.search(text)
    if not m:
        return None
    suspect = next(filter(None, map(tcg_artefact_in, context.splitlines())), None)
    oops = None
    for earlier in reversed(context.splitlines()):
        if _OOPS.match(clean(earlier)):
            oops = clean(earlier)
            break
    title = m.group("why").strip() or "kernel panic"
    if oops and oops not in title:
        title = f"{title} (after: {oops})"
    return Panic(title=title, line=text, tcg_artefact=suspect)


def find_panic(text: str) -> Panic | None:
    """The first panic in a whole console log."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if (p := panic_in(line, "\n".join(lines[max(0, i - 80):i]))):
            return p
    return None


def last_stage(text: str) -> str:
    """How far a boot got: the last stage seen in the log ('firmware' if none)."""
    reached = "firmware"
    for line in text.splitlines():
        reached = stage_of(line) or reached
    return reached


def excerpt(text: str, needle: str, before: int = 8, after: int = 30) -> str:
    """Lines around the last line containing `needle` (e.g. a panic), or the tail if absent."""
    kept = [_ANSI.sub("", line) for line in text.splitlines() if line.strip()]
    hits = [i for i, line in enumerate(kept) if needle in line]
    if not hits:
        return tail(text)
    i = hits[-1]
    return "\n".join(kept[max(0, i - before):i + after])


def tail(text: str, lines: int = 25) -> str:
    """The last `lines` non-empty lines, cleaned of control characters (keeping timestamps)."""
    kept = [_ANSI.sub("", line) for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])
