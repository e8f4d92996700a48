"""What probe_explore keeps of a sequence's kernel log (round 4): a lockdep report whole, so
the host titles it as the known issue binds it, and a splat failure's `got` is its banner."""
from __future__ import annotations

import re
from pathlib import Path

import probe_explore
from harness.explore import session

DATA = Path(__file__).parent.parent / "data"


def _kmsg(name: str) -> list[str]:
    """A console log as /dev/kmsg gives it: no timestamps."""
    return [re.sub(r"^\[\s*\d+\.\d+\]\s?", "", line)
            for line in (DATA / name).read_text().splitlines()]


def test_a_lockdep_report_is_kept_whole_so_the_host_titles_it_by_the_warn_inside() -> None:
    """The race kernel's lockdep report from a WARN's printk in the sched tick: 260 lines, its
    #0 chain through report_bug() last; the known issue binds the titled form."""
    lines = _kmsg("console-lockdep-warn-in-tick-7.2-race.log")
    assert len(lines) > 60
    titles = session._splat_titles(probe_explore.splat_lines(lines))
    assert any("(printk of a WARN in ring_buffer_nr_dirty_pages)" in t for t in titles), titles
    assert not any("(printk of a WARN" in t for t in session._splat_titles(lines[:60]))


def test_a_log_with_no_banner_keeps_nothing_and_a_splat_got_is_its_banner() -> None:
    notice = "Scheduler tracepoints stat_sleep, stat_iowait, stat_blocked and stat_runtime " \
             "require the kernel parameter schedstats=enable or kernel.sched_schedstats=1"
    assert probe_explore.splat_lines([notice, "ordinary"]) == []
    lines = [notice, "------------[ cut here ]------------",
             "WARNING: CPU: 0 PID: 1 at kernel/trace/trace_snapshot.c:831 put_snapshot_map+0x1/0x2"]
    assert probe_explore.first_banner(lines) == lines[2]
