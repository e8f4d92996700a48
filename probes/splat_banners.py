"""What a kernel splat's first line looks like: the one list of banners that the explorer
(probe_explore.py, in the guest), the host's parser (harness/kernellog/splats.py, which
titles each report) and both reproducers (repro.py, repro.c) notice a splat by. Stdlib only.

BANNERS are regular expressions matched at the start of a log line (no printk timestamp),
tried in order; the host reads their named groups for a splat's title. PREFIXES are the
same banners as plain text, for a C reproducer's strstr(): a unit test holds them to
BANNERS on real logs of every kernel line (tests/unit/data/console-*).

Sources (7.2.13; docs/splats.md says what differs on 6.12 and why): kernel/panic.c __warn(),
lib/bug.c, arch/x86/mm/fault.c, arch/x86/kernel/{dumpstack,traps}.c,
arch/arm64/{mm/fault.c,kernel/traps.c}, mm/kasan/report.c, kernel/kcsan/report.c, mm/kfence/report.c, lib/ubsan.c,
kernel/locking/lockdep.c, kernel/rcu/{tree_stall.h,tree_exp.h,update.c}, kernel/watchdog.c,
kernel/hung_task.c, lib/list_debug.c, lib/refcount.c, mm/page_alloc.c, mm/vmalloc.c,
kernel/sched/core.c.
"""
from __future__ import annotations

import re

# A function in a banner: "put_snapshot_map+0x2c/0x40 [mod]".
FN = r"(?P<fn>[\w.]+)(?:\+0x[0-9a-f]+/0x[0-9a-f]+)?(?: \[[\w-]+(?: [0-9a-f]+)?\])?"

# (kind, banner), in the order tried.
BANNERS: tuple[tuple[str, str], ...] = (
    # 7.x (28ea295f941e, v6.19-rc1): "WARNING: %s:%d at %pS, CPU#%d: %s/%d", file optional.
    ("WARNING", rf"^WARNING: (?:(?P<file>[^\s:]+):(?P<line>\d+) )?at {FN}, CPU#\d+: "),
    # 6.x: "WARNING: CPU: %d PID: %d at %s:%d %pS", or "... at %pS" without a file.
    ("WARNING", rf"^WARNING: CPU: \d+ PID: \d+ at (?:(?P<file>[^\s:]+):(?P<line>\d+) )?{FN}"),
    ("lockdep", r"^WARNING: (?:possible |inconsistent lock state|suspicious RCU usage"
                r"|bad unlock balance|bad contention|held lock freed|lock held when returning"
                r"|Nested lock was not taken|chain_key collision|\S+/\d+ still has locks held"
                r"|\w+-safe -> \w+-unsafe lock order)"),
    ("lockdep", r"^(?:\[ )?BUG: (?:Invalid wait context|MAX_\w+ too low"
                r"|key \S+ has not been registered|looking up invalid subclass)"),
    ("KASAN", rf"^BUG: KASAN: (?P<what>[\w-]+) in {FN}"),
    # kernel/kcsan/report.c print_report(): the two racing functions in lexicographic order
    # ("%ps / %ps"), or one ("%pS") when the other side was not instrumented.
    ("KCSAN", r"^BUG: KCSAN: (?P<what>data-race|assert: race) in (?P<fns>.+)$"),
    ("KFENCE", rf"^BUG: KFENCE: (?P<what>[\w -]+?) in {FN}"),
    ("UBSAN", r"^UBSAN: (?P<what>[\w-]+) in (?P<file>\S+?):(?P<line>\d+)(?::\d+)?"),
    # CONFIG_UBSAN_TRAP on x86: "UBSAN: array index out of bounds at f+0x1/0x2", then an Oops.
    ("UBSAN", rf"^UBSAN: (?P<what>.+?) at {FN}"),
    # 6.12 prints "Kernel BUG at %pB [verbose debug info unavailable]" without a file.
    ("BUG", rf"^[Kk]ernel BUG at (?:(?P<file>[^\s:]+):(?P<line>\d+)!|{FN} \[verbose debug)"),
    ("soft lockup", r"^watchdog: BUG: soft lockup"),
    # 6.12: "Watchdog detected hard LOCKUP on cpu %u"; 7.x adds "CPU%u: " before it.
    ("hard lockup", r"^(?:watchdog: )?(?:CPU\d+: )?Watchdog detected hard LOCKUP"),
    ("RCU stall", r"^rcu: INFO: \S+ (?:detected (?:expedited )?stalls|self-detected stall)"),
    ("hung task", r"^INFO: task \S+ blocked.* for more than \d+ seconds"),
    ("BUG", r"^BUG: |^Oops: |^Internal error: |^Unable to handle kernel |^general protection fault"),
    ("list corruption", r"^list_(?:add|del) corruption|^list_\w+ corruption"),
    ("refcount_t", r"^refcount_t: "),
    ("allocation failure", r"^\S+: (?:page allocation failure: order:\d+|vmalloc error: )"),
    ("panic", r"^Kernel panic - not syncing: "),
)

# Every banner above as text a line contains: what a reproducer without regular expressions
# looks for.
PREFIXES: tuple[str, ...] = (
    "WARNING: ", "BUG: ", "UBSAN: ", "Kernel BUG at", "kernel BUG at",
    "Watchdog detected hard LOCKUP", "rcu: INFO: ", "INFO: task ", "Oops: ", "Internal error: ",
    "Unable to handle kernel ", "general protection fault", " corruption", "refcount_t: ",
    "page allocation failure: ", "vmalloc error: ", "Kernel panic - not syncing: ")

_COMPILED = tuple(re.compile(p) for _, p in BANNERS)


def is_banner(line: str) -> bool:
    """Whether a log line (its text, no timestamp) opens a splat."""
    return any(p.match(line) for p in _COMPILED)
