"""Kernel splats in a kernel log: WARNING, BUG, Oops, GPF, KASAN, KCSAN, KFENCE, UBSAN, lockdep, stalls,
lockups, hung tasks, list corruption, refcount_t, bad page state, allocation failures, panics.

A splat is what the kernel prints when it catches itself misbehaving; a probe that passes while
the kernel WARNs has still found a bug. Pure functions over log lines (dmesg records or console
lines, printk timestamps allowed), tested on real logs of every kernel line the lab runs
(tests/unit/data/console-*). The banner of each kind, per kernel line and with the commit that
changed it, is in docs/splats.md.

A splat's title names its kind and its site (file:line and function, or the function the CPU
was in), never the banner's shape, addresses, PIDs or timings: the same bug has the same title
on 6.12 and 7.x, so a known issue and the explorer tell failures apart by it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.kernellog import console
from harness.probe_modules import probe_module

splat_banners = probe_module("splat_banners")

# The banner of each kind of report, in the order tried: probes/splat_banners.py, the one list
# the explorer and the reproducers notice a splat by too (its sources there, the banners per
# kernel line in docs/splats.md).
_FN = splat_banners.FN
_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (k, re.compile(p)) for k, p in splat_banners.BANNERS)
# A banner that is part of the report open before it, not a splat of its own: the Oops line
# after "BUG: kernel NULL pointer dereference", the WARNING or BUG that lib/refcount.c and
# lib/list_debug.c raise after their own line (CHECK_DATA_CORRUPTION: WARN, or BUG with
# CONFIG_BUG_ON_DATA_CORRUPTION).
_PART_OF = {"BUG": ("BUG",), "UBSAN": ("BUG",), "refcount_t": ("WARNING", "BUG"),
            "list corruption": ("WARNING", "BUG")}
_PART_WITHIN = 30  # lines (arm64 prints ~15 of "Mem abort info" first): further on, another
# The kinds that report a kernel stuck rather than crashed (under TCG a loaded host can make
# one of its own: a guest death with only these is rerun, pytest_plugin/health.py).
LOCKUPS = ("soft lockup", "hard lockup", "RCU stall", "hung task")
# The kind of warn_alloc()'s report: what a test that makes allocations fail causes itself.
ALLOCATION_FAILURE = "allocation failure"
# Their banners, found anywhere in a console line (lockup_in()).
_LOCKUP_ANYWHERE = tuple(re.compile(p.pattern.removeprefix("^")) for k, p in _KINDS
                         if k in LOCKUPS)
_TRACE_END = re.compile(r"---\[ end (?:trace|Kernel panic)")
# KCSAN's report ends with the rule it starts with (kernel/kcsan/report.c print_report()).
_RULE = re.compile(r"^={40,}$")
# Its two stacks (up to 64 frames each, NUM_STACK_ENTRIES) run past the 60 lines other reports
# are cut at; a console that splits each line in two (\r\r\n) doubles them.
_KCSAN_LINES = 400
# A circular-dependency report prints every chain (~260 lines, twice that in a console log
# with its blank lines): its #0 chain says why.
_LOCKDEP_LINES = 600
# A function of a KCSAN banner: "ringlab_splat_race_read [ringlab_splat]", "f+0x71/0xd0".
_KCSAN_FN = re.compile(rf"^{_FN}$")
# One side of a KCSAN report: "read-write to 0xffff888003a1c0c8 of 8 bytes by interrupt on cpu
# 0:" or "race at unknown origin, with read to ... by task 212 on cpu 1:", its stack after it.
_KCSAN_ACCESS = re.compile(r"^(?:race at unknown origin, with )?(?P<access>.+?) to 0x[0-9a-f]+ "
                           r"of \d+ bytes by (?P<who>task \d+|interrupt) on cpu \d+:$")
# The "CPU: 0 UID: 0 PID: 168 Comm: x Tainted: G        W          6.12.107" line of a report.
_TAINT = re.compile(r"\b(?:(?P<none>Not tainted)|Tainted: (?P<flags>[A-Z ]+?)\s+\d)")
# Parts of a banner that change from one occurrence of the same bug to the next.
_VOLATILE: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), r) for p, r in (
    (r"\+0x[0-9a-f]+/0x[0-9a-f]+(?: \[[\w-]+(?: [0-9a-f]+)?\])?", ""),   # fn+0x1/0x2 [mod]
    (r", probably for non-canonical address 0x[0-9a-f]+", ""),         # GPF
    # arm64's words for x86's (arch/arm64/mm/fault.c die_kernel_fault(), x86/mm/fault.c)
    (r"^Unable to handle kernel NULL pointer dereference", "BUG: kernel NULL pointer dereference"),
    (r"^Unable to handle kernel paging request", "BUG: unable to handle page fault"),
    (r",? (?:address|for address|at virtual address):? [0-9a-fx]+", ""),
    (r"(?:: [0-9a-f]{4,})?(?: \[#\d+\].*)?$", ""),                        # Oops: 0000 [#1] SMP
    (r" - CPU#\d+ stuck for \d+s! \[.*\]$", ""),                         # soft lockup
    (r"^(?:watchdog: )?(?:CPU\d+: )?(Watchdog detected hard LOCKUP) on cpu \d+", r"\1"),
    (r"^(INFO: task \S+?):\d+ (blocked.*?) for more than \d+ seconds\.", r"\1 \2"),
    (r" in process \S+ +(?:pfn|\S+):\S+$", ""),                          # Bad page state
    (r" at /\S*/([^/\s]+:\d+)", r" at \1"),                                # a module's path
    (r"^\[ (BUG: .*) \]$", r"\1"),                                       # lockdep box
    (r"kernel NULL pointer dereference 0x[0-9a-f]+", "kernel NULL pointer dereference"),
    (r"^(list_\w+ corruption)(\. [^,(]*?)?\s*[,(].*$", r"\1\2"),          # addresses
    (r"^\S+: (page allocation failure: order:\d+).*", r"\1"),
    (r"^\S+: (vmalloc error): .*", r"\1"),
    (r": [^\s/]+/\d+(?:/0x[0-9a-f]+|/\d+)?$", ""),                       # : comm/pid
    (r"^(WARNING: )\S+/\d+ (still has locks held)", r"\1\2"),
    (r" \[[0-9a-f]{8}\]", ""),                                           # preempt count
    (r"^rcu: INFO: \S+ (detected (?:expedited )?stalls on CPUs/tasks).*", r"rcu: INFO: \1"),
    (r"^rcu: INFO: \S+ (self-detected stall on CPU)", r"rcu: INFO: \1"),
))
# Frames that report a bug rather than make it: the site is the first frame past them.
_REPORTERS = re.compile(r"^(?:dump_stack|show_stack|__dump_stack|dump_backtrace|warn_alloc"
                        r"|__alloc_pages|alloc_pages|__vmalloc|vmalloc|__warn|warn_slowpath"
                        r"|report_bug|handle_bug|exc_invalid_op|asm_exc|refcount_warn_saturate"
                        r"|__refcount|__list_\w+_valid|__list_\w+_report|kasan_|__kasan"
                        r"|print_report|ubsan_|__ubsan|panic|check_panic_on_warn|die\b"
                        r"|__switch_to|__schedule|schedule|io_schedule)")

# "Modules linked in: ringlab_aux(OE) virtio_net": a flag in parentheses marks a module that
# taints the kernel (O out of tree, E unsigned, P proprietary, ...: kernel/panic.c taint_flags).
_MODULES = re.compile(r"^Modules linked in:(?P<mods>.*)$")
_MODULE = re.compile(r"(?P<name>[\w-]+)(?:\((?P<flags>[A-Z]+)\))?")
# Where a CPU was in kernel mode: x86 "RIP: 0010:hang_set+0x3f/0x60 [ringlab_splat]", arm64
# "pc : hang_set+0x3c/0x50 [ringlab_splat]".
_RIP = re.compile(r"^(?:RIP: 0010:|pc : )(?P<fn>[\w.]+\+0x[0-9a-f]+/0x[0-9a-f]+)"
                  r"(?: \[(?P<mod>[\w-]+)(?: [0-9a-f]+)?\])?")
# A call trace frame: " remove_vma+0x2f/0x70" (a "? " prefix marks an unreliable one; arm64
# may add " (P)" and a module's build id: " f+0x1/0x2 [mod 0123abcd] (P)").
_FRAME = re.compile(r"^\s*(?:\? )?(?P<fn>[\w.]+)\+0x[0-9a-f]+/0x[0-9a-f]+"
                    r"(?: \[(?P<mod>[\w-]+)(?: [0-9a-f]+)?\])?")
# x86 "RIP: 0010:0xffffffffc0418031": the CPU was at an address that is no kernel text.
_BARE_RIP = re.compile(r"^RIP: 0010:0x[0-9a-f]+$")
_CLONE = re.compile(r"(?:\.(?:isra|constprop|part|cold|llvm|lto_priv)(?:\.\d+)?)+$")
_TRACE_HEADERS = ("Call Trace:", "Call trace:")  # x86, arm64 (arch/*/kernel/*stack*.c)


@dataclass
class Splat:
    title: str
    first_line: int                     # index in the lines given
    lines: list[str] = field(default_factory=list)
    kind: str = "BUG"                   # WARNING, BUG, KASAN, lockdep, RCU stall, ...

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def task(self) -> str | None:
        """The task an allocation failure's report names ("python3: vmalloc error: ..."),
        else None: warn_alloc() prints current->comm first."""
        if self.kind != ALLOCATION_FAILURE or not self.lines:
            return None
        return self.lines[0].split(": ", 1)[0]

    @property
    def call_trace(self) -> list[str]:
        """The reliable frames after 'Call Trace:', innermost first ('? ' frames left out); a
        KCSAN report's stacks, one after the other."""
        return [_FRAME.match(f).group("fn") for f in trace_frames(self.lines)]  # type: ignore

    @property
    def rip(self) -> str | None:
        """The first kernel-mode instruction pointer of the report ("fn+0x3f/0x60 [mod]")."""
        for line in self.lines:
            if (m := _RIP.match(line.strip())):
                return m.group("fn") + (f" [{m.group('mod')}]" if m.group("mod") else "")
        return None

    @property
    def site(self) -> str | None:
        """The function the bug is in: where the CPU was, or the first frame that is not the
        kernel's own reporting code (warn_alloc, refcount_warn_saturate, ...). With no
        reliable frame (a jump to an address that is no text leaves the unwinder guessing),
        the first '? ' frame: the caller is still the best lead."""
        fns = ([self.rip.split("+")[0]] if self.rip else []) + \
            (self.call_trace or self.guessed_trace)
        return next((_fn(f) for f in fns if not _REPORTERS.match(f)), None)

    @property
    def accesses(self) -> list[dict]:
        """A KCSAN report's racing accesses, as printed: the other side first, then the one
        that found it; each with its access type, task or interrupt, and frames. [] for any
        other kind."""
        out: list[dict] = []
        stack: list[str] | None = None
        for line in self.lines:
            text = line.strip()
            if (m := _KCSAN_ACCESS.match(text)):
                stack = []
                out.append({"access": m.group("access"), "frames": stack,
                            "in": "interrupt" if m.group("who") == "interrupt" else "task"})
            elif stack is not None and (f := _FRAME.match(text)):
                stack.append(f.group("fn"))
            elif text:      # blank lines come between a console's lines; anything else ends it
                stack = None
        return out

    @property
    def guessed_trace(self) -> list[str]:
        """The '? ' frames after 'Call Trace:', innermost first."""
        return [m.group("fn") for f in trace_frames(self.lines, guessed=True)
                if (m := _FRAME.match(f))]

    @property
    def tcg_artefact(self) -> str | None:
        """Its first line, if the report is one QEMU's TCG causes (console.TCG_ARTEFACTS).
        Not an int3 Oops at an address that is no kernel text: freed module text is filled
        with int3, so that is a call into a module that is gone, the kernel's bug."""
        found = console.tcg_artefact_in(self.lines[0])
        if found and any(_BARE_RIP.match(line.strip()) for line in self.lines):
            return None
        return found

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
        return {"title": self.title, "kind": self.kind, "rip": self.rip,
                "call_trace": self.call_trace[:16],
                **({"accesses": self.accesses} if self.kind == "KCSAN" else {}),
                "tainting_modules": self.tainting_modules, "text": self.text}


def trace_frames(lines: list[str], guessed: bool = False) -> list[str]:
    """The reliable frames after 'Call Trace:' as printed, offsets and module kept
    ("hang_set+0x3f/0x60 [ringlab_splat]"): what decode_stacktrace.sh needs. `guessed`: the
    '? ' frames instead, without their mark."""
    frames, inside = [], False
    for line in lines:
        text = line.strip()
        if text in _TRACE_HEADERS or _KCSAN_ACCESS.match(text):
            inside = True   # a KCSAN report's stacks each follow their access line
        elif inside and (text == "</TASK>" or text.startswith("---[ end")):
            break
        elif inside and text.startswith("? ") == guessed and _FRAME.match(line):
            frames.append(text.removeprefix("? "))
    return frames


def banner(line: str) -> tuple[str, re.Match[str]] | None:
    """(kind, match) if the cleaned line starts a splat report."""
    for kind, pattern in _KINDS:
        if (m := pattern.match(line)):
            return kind, m
    return None


def find(lines: list[str]) -> list[Splat]:
    """Every splat in order, each with its report lines up to its end marker (or 60 lines)."""
    out: list[Splat] = []
    current: Splat | None = None
    for i, raw in enumerate(lines):
        line = console.clean(raw)
        found = banner(line)
        if found and not _part_of(current, found[0]):
            current = Splat("", i, [line], found[0])
            out.append(current)
        elif current is not None:
            current.lines.append(line)
            if _TRACE_END.search(line) or (current.kind == "KCSAN" and _RULE.match(line)) \
                    or _lockdep_end(current, line) \
                    or len(current.lines) >= {"KCSAN": _KCSAN_LINES,
                                              "lockdep": _LOCKDEP_LINES}.get(current.kind, 60):
                current = None
    for s in out:
        s.title = title(s)
    return out


def _lockdep_end(s: Splat, line: str) -> bool:
    """A lockdep report ends with its own stack backtrace."""
    return s.kind == "lockdep" and line.strip() == "</TASK>" and \
        any(x.strip() == "stack backtrace:" for x in s.lines)


def _warn_inside(s: Splat) -> str | None:
    """The function of the WARN whose printk a lockdep report is about: its #0 chain goes
    through report_bug (a WARN in a tracepoint the scheduler tick fires, printed under
    rq->__lock), else None."""
    frames, inside = [], False
    for line in s.lines:
        text = line.strip()
        if text.startswith("-> #0"):
            inside = True
        elif inside and text.startswith("other info"):
            break
        elif inside and (m := _FRAME.match(line)):
            frames.append(m.group("fn"))
    at = next((i for i, fn in enumerate(frames) if fn.startswith("asm_exc_invalid_op")), None)
    return _fn(frames[at + 1]) if at is not None and at + 1 < len(frames) else None


def _part_of(current: Splat | None, kind: str) -> bool:
    return current is not None and kind in _PART_OF.get(current.kind, ()) and \
        len(current.lines) <= _PART_WITHIN


def title(s: Splat) -> str:
    """The splat's kind and site, the same for the same bug on every kernel line: "WARNING at
    kernel/trace/ring_buffer.c:7802 __rb_map_vma", "BUG: kernel NULL pointer dereference in
    ring_buffer_map", "KASAN: use-after-free in rb_free_aux"."""
    kind, m = banner(s.lines[0]) or ("BUG", None)
    groups = m.groupdict() if m else {}
    if kind == "WARNING":
        where = f"{_file(groups['file'])}:{groups['line']} " if groups.get("file") else ""
        return f"WARNING at {where}{_fn(groups['fn'])}"
    if kind in ("KASAN", "KFENCE"):
        return f"{kind}: {groups['what']} in {_fn(groups['fn'])}"
    if kind == "KCSAN":  # one title per pair of functions, whatever side found the race
        fns = sorted(_fn(m.group("fn")) for f in groups["fns"].split(" / ")
                     if (m := _KCSAN_FN.match(f)))
        return f"KCSAN: {groups['what']} in {' / '.join(fns)}"
    if kind == "UBSAN":
        where = f"at {_file(groups['file'])}:{groups['line']}" if groups.get("file") else \
            f"in {_fn(groups['fn'])}"
        return f"UBSAN: {groups['what']} {where}"
    text = s.lines[0]
    for pattern, repl in _VOLATILE:
        text = pattern.sub(repl, text)
    text = text.rstrip(" .!:")
    if kind == "BUG" and groups.get("fn"):  # kernel BUG at fn+0x1/0x2 [verbose debug ...]
        return f"kernel BUG in {_fn(groups['fn'])}"
    if kind == "lockdep" and (fn := _warn_inside(s)):
        return f"{text} (printk of a WARN in {fn})"
    if kind in ("panic", "lockdep") or " at " in text:
        return text
    return f"{text} in {s.site}" if s.site else text


_LINE = re.compile(r"(\S+\.[chS]):\d+\b")


def without_lines(title: str) -> str:
    """A title with its source lines dropped ("WARNING at kernel/trace/ring_buffer.c
    ring_buffer_map_get_reader"): the same site in two builds of one tree whose lines moved,
    as a mutant that adds or removes lines above a WARN_ON moves them."""
    return _LINE.sub(r"\1", title)


def _fn(name: str) -> str:
    """A function as the title names it: without the suffix of a copy GCC made of it
    (ct_kernel_exit.isra.0, rb_wake_up_waiters.constprop.0, f.cold), which one build makes
    and another does not."""
    return _CLONE.sub("", name)


def _file(path: str) -> str:
    """A source file as the title names it: the kernel's own files as printed (relative to the
    tree), an out-of-tree module's by its name alone (6.12 prints the absolute path of an M=
    build, 7.x a relative one)."""
    return path.rsplit("/", 1)[-1] if path.startswith("/") else path


# The kernel's die() banner, with its counter: x86 "Oops: Oops: 0000 [#1] SMP" or "Oops: invalid
# opcode: 0000 [#1]" (arch/x86/kernel/dumpstack.c __die_header()), arm64 "Internal error: Oops:
# 0000000096000004 [#1] SMP" (arch/arm64/kernel/traps.c __die()). A WARNING or a "BUG: sleeping
# function called..." does not die(); an Oops kills the task that hit it.
_DIE = re.compile(r"^(?:Oops|Internal error): .*\[#\d+\]")


def die_in(line: str) -> str | None:
    """The cleaned line if the kernel's die() reports an Oops in it, else None."""
    text = console.clean(line)
    return text if _DIE.match(text) else None


def lockup_in(line: str) -> str | None:
    """The cleaned line if a lockup, stall or hung-task report starts in it (the watchdog's
    report can come after other output on the same console line), else None."""
    text = console.clean(line)
    return text if any(p.search(text) for p in _LOCKUP_ANYWHERE) else None


def taint(lines: list[str]) -> str | None:
    """The taint flags of the last report's CPU line ('GW'), '' if 'Not tainted', None if no
    such line."""
    flags = None
    for raw in lines:
        m = _TAINT.search(console.clean(raw))
        if m:
            flags = "" if m.group("none") else m.group("flags").replace(" ", "")
    return flags
