"""harness/kernellog/splats.py on real kernel logs (tests/unit/data) and on one line of each
kind."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from harness.kernellog import console, splats

DATA = Path(__file__).resolve().parents[1] / "data"


def test_real_warnings_from_a_trace_mmap_munmap() -> None:
    lines = (DATA / "console-trace-mmap-warn-6.12.log").read_text().splitlines()
    found = splats.find(lines)
    assert len(found) >= 2
    first = found[0]
    assert first.title == "WARNING at kernel/trace/trace.c:8274 tracing_buffers_mmap_close"
    assert "remove_vma" in first.text and first.lines[-1].startswith("---[ end trace")
    assert splats.taint(first.lines) == "" and splats.taint(found[1].lines) == "GW"


def test_a_clean_boot_has_no_splat() -> None:
    lines = (DATA / "console-boot-6.12.log").read_text().splitlines()
    assert splats.find(lines) == []


def test_a_panic_is_a_splat() -> None:
    lines = (DATA / "console-panic-rdinit-6.12.log").read_text().splitlines()
    titles = [s.title for s in splats.find(lines)]
    assert any(t.startswith("Kernel panic - not syncing: Attempted to kill init!")
               for t in titles)


@pytest.mark.parametrize("line, title", [
    ("[   1.0] BUG: KASAN: use-after-free in ring_buffer_map+0x1/0x2",
     "KASAN: use-after-free in ring_buffer_map"),
    ("BUG: kernel NULL pointer dereference, address: 0000000000000008",
     "BUG: kernel NULL pointer dereference"),
    ("kernel BUG at mm/mmap.c:100!", "kernel BUG at mm/mmap.c:100"),
    ("Oops: general protection fault, probably for non-canonical address 0xdead: 0000 [#1]",
     "Oops: general protection fault"),
    ("general protection fault, probably for non-canonical address 0xdead000000000100: 0000",
     "general protection fault"),
    ("UBSAN: shift-out-of-bounds in kernel/trace/ring_buffer.c:6969:12",
     "UBSAN: shift-out-of-bounds at kernel/trace/ring_buffer.c:6969"),
    ("WARNING: possible circular locking dependency detected",
     "WARNING: possible circular locking dependency detected"),
    ("WARNING: python3/181 still has locks held!", "WARNING: still has locks held"),
    ("BUG: Invalid wait context", "BUG: Invalid wait context"),
    ("rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
     "rcu: INFO: detected stalls on CPUs/tasks"),
    ("rcu: INFO: rcu_preempt detected expedited stalls on CPUs/tasks: { 1-... } 21 jiffies",
     "rcu: INFO: detected expedited stalls on CPUs/tasks"),
    ("rcu: INFO: rcu_sched self-detected stall on CPU", "rcu: INFO: self-detected stall on CPU"),
    ("watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [python3:181]",
     "watchdog: BUG: soft lockup"),
    ("watchdog: Watchdog detected hard LOCKUP on cpu 1", "Watchdog detected hard LOCKUP"),
    ("watchdog: CPU0: Watchdog detected hard LOCKUP on cpu 1", "Watchdog detected hard LOCKUP"),
    ("INFO: task python3:181 blocked for more than 120 seconds.",
     "INFO: task python3 blocked"),
    ("INFO: task python3:181 blocked in I/O wait for more than 122 seconds.",
     "INFO: task python3 blocked in I/O wait"),
    ("refcount_t: underflow; use-after-free.", "refcount_t: underflow; use-after-free"),
    ("BUG: KFENCE: out-of-bounds read in ring_buffer_map+0x1/0x2 [ringlab_x]",
     "KFENCE: out-of-bounds read in ring_buffer_map"),
    ("list_add corruption. prev->next should be next (ffff8880), but was 0000. (prev=ffff).",
     "list_add corruption. prev->next should be next"),
    ("list_del corruption, ffff888003a1b2c0->next is LIST_POISON1 (dead000000000100)",
     "list_del corruption"),
    ("kernel BUG at fire_bug+0x4/0x10 [ringlab_splat] [verbose debug info unavailable]",
     "kernel BUG in fire_bug"),
    ("Kernel BUG at fire_bug+0x4/0x10 [ringlab_splat] [verbose debug info unavailable]",
     "kernel BUG in fire_bug"),
    ("[ BUG: Invalid wait context ]", "BUG: Invalid wait context"),
    ("UBSAN: array index out of bounds at fire_ubsan+0x1/0x2 [ringlab_splat]",
     "UBSAN: array index out of bounds in fire_ubsan"),
    ("Oops: general protection fault, kernel NULL pointer dereference 0x8: 0000 [#1] SMP",
     "Oops: general protection fault, kernel NULL pointer dereference"),
    ("Internal error: Oops - BUG: 00000000f2000800 [#1]  SMP", "Internal error: Oops - BUG"),
    ("BUG: Bad page state in process python3  pfn:1a2b3", "BUG: Bad page state"),
    ("BUG: scheduling while atomic: python3/181/0x00000002", "BUG: scheduling while atomic"),
    ("python3: page allocation failure: order:10, mode:0x40dc0(GFP_KERNEL|__GFP_COMP), "
     "nodemask=(null),cpuset=/,mems_allowed=0", "page allocation failure: order:10"),
    ("insmod: vmalloc error: size 1099511627776, exceeds total pages, mode:0xcc0(GFP_KERNEL)",
     "vmalloc error"),
    ("Unable to handle kernel NULL pointer dereference at virtual address 0000000000000008",
     "BUG: kernel NULL pointer dereference"),
    ("Unable to handle kernel paging request at virtual address ffff800080000000",
     "BUG: unable to handle page fault"),
    ("Kernel panic - not syncing: Fatal exception", "Kernel panic - not syncing: Fatal exception"),
    ("WARNING: CPU: 0 PID: 0 at kernel/context_tracking.c:128 ct_kernel_exit.isra.0+0xa0/0xa8",
     "WARNING at kernel/context_tracking.c:128 ct_kernel_exit"),
])
def test_each_kind_is_recognised_with_a_title_free_of_pids_addresses_and_offsets(
        line: str, title: str) -> None:
    assert [s.title for s in splats.find(["ordinary line", line, "more"])] == [title]


def test_ordinary_lines_are_not_splats() -> None:
    assert splats.find(["ringlab: ready", "Speculative Return Stack Overflow: WARNING: See x",
                        "perf: interrupt took too long"]) == []


def test_call_trace_and_modules_of_a_real_warning() -> None:
    lines = (DATA / "console-trace-mmap-warn-6.12.log").read_text().splitlines()
    first = splats.find(lines)[0]
    assert first.call_trace[:3] == ["remove_vma", "vms_complete_munmap_vmas",
                                    "do_vmi_align_munmap"]
    assert "entry_SYSCALL_64_after_hwframe" in first.call_trace
    assert first.modules == {"virtio_net": "", "net_failover": "", "failover": "",
                             "virtio_blk": ""}
    assert first.tainting_modules == []


def test_the_tainting_module_is_named() -> None:
    [s] = splats.find(["WARNING: CPU: 0 PID: 7 at drivers/x.c:9 f+0x1/0x2",
                       "Modules linked in: ringlab_aux(OE) virtio_net",
                       "Call Trace:", " <TASK>", " ? noise+0x1/0x2",
                       " rl_tick+0x3/0x4 [ringlab_aux]", " </TASK>", "---[ end trace ]---"])
    assert s.call_trace == ["rl_tick"] and s.tainting_modules == ["ringlab_aux"]
    assert s.as_dict()["title"] == "WARNING at drivers/x.c:9 f"


def test_a_call_into_an_unloaded_module_is_the_kernels_not_tcgs() -> None:
    """7.2.13: a revoked PMU's module unloaded, then its AUX area unmapped (probe_perf_aux
    revoke-unload). __rb_free_aux() calls the module's free_aux(), freed text the kernel filled
    with int3: an int3 Oops at a bare address, every frame a guess. Not the TCG text-patching
    artefact (that one traps inside a kernel function), and titled by its caller."""
    found = splats.find((DATA / "console-revoke-unload-7.2.log").read_text().splitlines())
    oops, panic = found
    assert oops.title == "Oops: int3 in __rb_free_aux"
    assert oops.tcg_artefact is None
    assert oops.call_trace == [] and oops.guessed_trace[:2] == ["__rb_free_aux", "perf_mmap_close"]
    assert panic.title == "Kernel panic - not syncing: Fatal exception in interrupt"
    # The artefact's shape still is one: an int3 trap inside a kernel function.
    artefact = splats.find(["Oops: int3: 0000 [#1] PREEMPT SMP NOPTI",
                            "RIP: 0010:text_poke_bp_batch+0x1f/0x240"])[0]
    assert artefact.tcg_artefact == "Oops: int3: 0000 [#1] PREEMPT SMP NOPTI"


def test_a_corrupted_log_is_read_without_error() -> None:
    """Binary garbage, cut-off reports and control characters, as a crashed console leaves."""
    garbage = bytes(range(256)).decode("latin-1") * 3
    lines = [garbage, "WARNING: CPU: 0 PID: 1 at", "Call Trace:", " \x1b[31m<TASK>",
             "\x00\x00", "BUG: kernel NULL pointer dereference, address: 0", garbage[:40]]
    found = splats.find(lines)
    assert [s.title for s in found] == ["BUG: kernel NULL pointer dereference"]
    assert splats.taint(lines) is None and found[0].call_trace == []
    splats.console.find_panic("\n".join(lines))  # reads it without error


@pytest.mark.parametrize("line", [
    "[   45.1] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
    "rcu: INFO: rcu_sched self-detected stall on CPU",
    "watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [python3:181]",
    "watchdog: Watchdog detected hard LOCKUP on cpu 1",
    "INFO: task python3:212 blocked for more than 120 seconds.",
])
def test_lockup_reports_end_a_test_early(line: str) -> None:
    assert splats.lockup_in(line) == splats.console.clean(line)


@pytest.mark.parametrize("line", [
    "WARNING: CPU: 0 PID: 1 at kernel/trace/trace.c:8274 f+0x1/0x2",
    "rcu: Hierarchical RCU implementation.",
    "watchdog: Delayed init of the lockup detector failed: -19",
])
def test_other_lines_are_not_lockups(line: str) -> None:
    assert splats.lockup_in(line) is None


def test_real_rcu_stall_names_where_the_cpu_spins() -> None:
    lines = (DATA / "console-rcu-stall-6.12.log").read_text().splitlines()
    found = splats.find(lines)
    assert [s.title for s in found] == ["rcu: INFO: detected stalls on CPUs/tasks in hang_set"]
    stall = found[0]
    assert stall.rip == "hang_set+0x3f/0x60 [ringlab_splat]"
    assert stall.call_trace[:2] == ["param_attr_store", "module_attr_store"]
    assert splats.taint(stall.lines) == "GOE"
    assert [i for i, line in enumerate(lines) if splats.lockup_in(line)] == [stall.first_line]


# Real console logs of tests/suites/suite_splat_kinds.py, one per kernel line (its README): each
# kind ringlab_splat fires, as that line prints it.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "suites"))
from suite_splat_kinds import ALWAYS, TITLES  # noqa: E402
CORPUS = sorted(DATA.glob("console-splat-kinds-*.log"))
# What the kernel itself says after a fired splat: on arm64 a task that dies in BUG() exits with
# irqs disabled ("note: ringlab_bug[194] exited with irqs disabled"), and context tracking WARNs
# at the next idle entry (6.12.117 arm64).
AFTERMATH = (r"WARNING at kernel/context_tracking\.c:\d+ ct_kernel_exit",)


def _titles(path: Path) -> list[str]:
    return [s.title for s in splats.find(path.read_text().splitlines())]


def test_the_corpus_holds_every_kernel_line_the_lab_claims() -> None:
    lines = {p.name.removeprefix("console-splat-kinds-").removesuffix(".log") for p in CORPUS}
    assert {"6.12", "7.2", "7.3", "7.3-rc7", "7.2-build", "7.2-race", "rt", "arm64"} <= lines, \
        lines


# A build on tinyconfig has no hung-task detector and no list checks; the race kernel
# (race.config: KCSAN, lockdep) must fire its two on top of the rest.
CAN_FIRE = {"console-splat-kinds-7.2-build.log": ("warn", "bug", "null", "refcount", "alloc"),
            "console-splat-kinds-7.2-race.log": (*ALWAYS, "lockdep", "race")}


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_every_kind_fired_on_a_kernel_line_is_seen_with_its_title(path: Path) -> None:
    titles = _titles(path)
    for kind in CAN_FIRE.get(path.name, ALWAYS):
        assert any(re.fullmatch(TITLES[kind], t) for t in titles), (kind, titles)
    # Nothing else: every splat in the log is one of the kinds fired, each titled as such.
    assert all(any(re.fullmatch(p, t) for p in (*TITLES.values(), *AFTERMATH))
               for t in titles), titles


def test_one_site_has_one_title_on_every_kernel_line() -> None:
    by_kind: dict[str, set[str]] = {}
    for path in CORPUS:
        for t in _titles(path):
            for kind, pattern in TITLES.items():
                if re.fullmatch(pattern, t):
                    by_kind.setdefault(kind, set()).add(t)
    assert set(ALWAYS) <= set(by_kind)
    assert {k: ts for k, ts in by_kind.items() if len(ts) > 1} == {}


def test_every_oops_in_the_kept_consoles_is_a_die_and_nothing_else_is() -> None:
    """splats.die_in() ends a command the kernel oopsed under (issue 31): every die() banner
    of every kernel line the lab runs (x86 6.12/7.x, RT, arm64) is seen, and a WARNING or a
    BUG that does not die() is not."""
    seen: set[str] = set()
    for log in sorted(DATA.glob("console-*.log")):
        for line in log.read_text(errors="replace").splitlines():
            text = console.clean(line)
            if "[#1]" in text and text.startswith(("Oops:", "Internal error:")):
                assert splats.die_in(line) == text, (log.name, line)
                seen.add(text.split("[#")[0])
            elif splats.die_in(line):
                raise AssertionError(f"{log.name}: not an Oops: {line}")
    assert {"Oops: Oops: 0000 ", "Oops: invalid opcode: 0000 ",
            "Internal error: Oops: 0000000096000004 "} <= seen, seen
    for line in ("WARNING: CPU: 0 PID: 1 at kernel/x.c:1 f+0x1/0x2",
                 "BUG: sleeping function called from invalid context at mm/x.c:1",
                 "BUG: kernel NULL pointer dereference, address: 0000000000000008"):
        assert splats.die_in(line) is None


def test_an_allocation_failure_names_its_task_and_other_splats_none() -> None:
    lines = open(Path(__file__).parent.parent / "data/console-splat-kinds-7.2.log").read().splitlines()
    found = splats.find(lines)
    failure = next(s for s in found if s.kind == splats.ALLOCATION_FAILURE)
    assert failure.task == "bash"
    assert all(s.task is None for s in found if s.kind != splats.ALLOCATION_FAILURE)


def test_a_real_kcsan_report_keeps_both_sides_and_ends_at_its_rule() -> None:
    """KCSAN on the race kernel (7.2.13, race.config): the timer's write in softirq found by
    the task's watchpoint; both stacks, each side's access, and nothing after the closing
    rule in the report."""
    lines = (DATA / "console-splat-kinds-7.2-race.log").read_text().splitlines()
    race = [s for s in splats.find(lines) if s.kind == "KCSAN"]
    assert [s.title for s in race] == [
        "KCSAN: data-race in ringlab_splat_race_read / ringlab_splat_race_tick"]
    r = race[0]
    assert [(a["access"], a["in"]) for a in r.accesses] == [("write", "interrupt"),
                                                            ("read", "task")]
    assert r.accesses[0]["frames"][:2] == ["ringlab_splat_race_tick", "call_timer_fn"]
    assert r.accesses[1]["frames"][:2] == ["ringlab_splat_race_read", "fire_race"]
    assert r.lines[-1].startswith("=====") and "Reported by Kernel Concurrency" in r.text
    assert r.site == "ringlab_splat_race_tick"
    warn = next(s for s in splats.find(lines) if s.kind == "WARNING")
    assert "accesses" in r.as_dict() and "accesses" not in warn.as_dict()


def test_a_lockdep_report_about_a_warns_printk_names_that_warn() -> None:
    """src-7.2-race's explore (2026-12-05): lockdep's circular dependency whose #0 chain is a
    WARN printed from the scheduler tick under rq->__lock. Its title names the WARN, so the
    known issue of that WARN binds it; the whole report is one splat, the WARN after it
    another."""
    path = Path(__file__).parents[1] / "data" / "console-lockdep-warn-in-tick-7.2-race.log"
    lines = path.read_text().splitlines()
    lockdep, warn = splats.find(lines)
    assert lockdep.kind == "lockdep"
    assert lockdep.title == ("WARNING: possible circular locking dependency detected "
                             "(printk of a WARN in ring_buffer_nr_dirty_pages)")
    assert lockdep.lines[-1].strip() == "</TASK>"
    assert warn.title == "WARNING at kernel/trace/ring_buffer.c:842 ring_buffer_nr_dirty_pages"
    # the same report with its #0 chain cut off keeps lockdep's own title
    cut = [line for line in lines if "asm_exc_invalid_op" not in line]
    assert splats.find(cut)[0].title == "WARNING: possible circular locking dependency detected"


def test_a_lockdep_report_read_from_kmsg_names_the_warn_of_its_printk_too() -> None:
    """The same report read from /dev/kmsg (races round 5, the unmutated src-7.2-race
    kernel, a sched_wakeup event's WARN under pi_lock): kmsg escapes a record's newlines as
    "\\x0a", so "-> #0" and "stack backtrace:" began with it, the title stayed lockdep's own
    and no known issue bound it."""
    path = Path(__file__).parents[1] / "data" / "kmsg-lockdep-warn-in-wakeup-7.2-race.log"
    found = splats.find(path.read_text().splitlines())
    assert [s.title for s in found] == [
        "WARNING: possible circular locking dependency detected "
        "(printk of a WARN in ring_buffer_nr_dirty_pages)",
        "WARNING at kernel/trace/ring_buffer.c:842 ring_buffer_nr_dirty_pages"]
    assert found[0].lines[-1].strip() == "</TASK>", "the report kept whole, to its backtrace"
