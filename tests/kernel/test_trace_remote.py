"""Trace remotes (7.x): a ring buffer written outside the kernel's tracing core, read by the
kernel through the meta page and reader swap of trace_mmap.h, shown under tracefs remotes/.

The only writer a guest has is the test remote (CONFIG_TRACE_REMOTE_TEST, module remote_test:
`write_event` writes one event on the writer's CPU). Observations come from
probes/probe_trace_remote.py; each rule cites kernel/trace/trace_remote.c (TR),
simple_ring_buffer.c (SRB) or remote_test.c (RT) of 7.2.13, and the kernel's own ftracetest
cases (tools/testing/selftests/ftrace/test.d/remotes/), which these follow.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest
from fault_sweep import check_sweep, not_injected, where

from harness.guest.guest import Guest

pytestmark = pytest.mark.kconfig("CONFIG_TRACE_REMOTE_TEST")


@pytest.fixture
def remote_check(guest: Guest, probe_check) -> Callable[[str], dict]:
    """remote_check(CHECK): the observations of a check of probes/probe_trace_remote.py,
    after loading remote_test (it has no module_exit: it stays in this guest)."""
    def observe(check: str) -> dict:
        loaded = guest.run("modprobe remote_test")
        assert loaded.exit_status == 0, f"modprobe remote_test: {loaded.stderr.strip()}"
        return probe_check("probe_trace_remote", check)
    return observe


@pytest.fixture
def remote(remote_check) -> Callable[[], dict]:
    """The observations of check `rules`."""
    return lambda: remote_check("rules")


def test_the_buffer_loads_on_demand_and_unloads_once_off_and_empty(remote) -> None:
    r = remote()
    # TR:229-236 "(loaded)"/"(unloaded)"; loaded by tracing_on=1 (TR:114-136); unloaded when
    # tracing is off, no reader is open and the buffer is empty (TR:94-112; unloading.tc).
    assert r["at_start"] == {"tracing_on": "0", "size": "7 (unloaded)"}, r["at_start"]
    assert r["loaded"] == "7 (loaded)", r["loaded"]
    assert r["off_with_events"] == "7 (loaded)", \
        f"tracing off with an event still unread must keep the buffer: {r['off_with_events']}"
    assert r["off_and_reset"] == "7 (unloaded)", \
        f"off, reset and no reader must unload the buffer: {r['off_and_reset']}"


def test_buffer_size_kb_is_checked_and_refused_while_loaded(remote) -> None:
    r = remote()
    # TR:211-236: 0 and junk are EINVAL; a size is kept as written (KB); EBUSY while loaded.
    assert (r["size_zero"], r["size_junk"]) == ("EINVAL", "EINVAL"), \
        f"buffer_size_kb 0 and 'x': {r['size_zero']}, {r['size_junk']}"
    assert r["size_16"] == "ok" and r["size_16_reads"] == "16 (unloaded)", \
        f"buffer_size_kb 16 while unloaded: {r['size_16']}, reads {r['size_16_reads']!r}"
    assert r["size_while_loaded"] == "EBUSY", \
        f"buffer_size_kb while loaded must be refused with EBUSY: {r['size_while_loaded']}"


def test_an_event_is_written_only_enabled_into_a_loaded_buffer(remote) -> None:
    r = remote()
    # RT:208-209: the event disabled (and the buffer unloaded) is ENODEV.
    assert r["write_disabled_event"] == "ENODEV", r["write_disabled_event"]
    assert r["writes"] == ["ok"] * 8, r["writes"]


def test_events_read_in_order_and_a_consuming_read_takes_them(remote) -> None:
    r = remote()
    # trace.tc / trace_pipe.tc: ids 1..8 in order with rising timestamps, on the writer's CPU;
    # trace_pipe consumes (TR:555-556): `trace` is empty after it.
    assert r["trace_ids"] == list(range(1, 9)) and r["trace_rising"], \
        f"trace: ids {r['trace_ids']}, timestamps rising: {r['trace_rising']}"
    assert r["cpu0_trace_ids"] == list(range(1, 9)), r["cpu0_trace_ids"]
    assert r["pipe_ids"] == list(range(1, 9)), f"trace_pipe: {r['pipe_ids']}"
    assert r["trace_after_pipe"] == [], f"trace after trace_pipe: {r['trace_after_pipe']}"


def test_an_overflow_reports_its_lost_events_through_the_reader_swap(remote) -> None:
    """The writer overwrites the oldest pages (SRB:177-204, overrun); the kernel's reader swap
    takes reader.lost_events = overrun - last_overrun (SRB:166-171) and trace_pipe prints
    `CPU:0 [LOST K EVENTS]` before id K+1 (trace_pipe.tc). A swap protocol that loses or
    double-counts a page shows as a gap or a wrong K."""
    r = remote()
    assert r["reloaded"] == "7 (unloaded)", f"off + reset must unload first: {r['reloaded']}"
    kept, o, n = r["overflow_trace_ids"], r["overflow_pipe"], r["overflow_writes"]
    assert kept and kept[-1] == n and kept[0] > 1, \
        f"after {n} writes into 7 KB, trace holds ids {kept[:3]}..{kept[-3:]}"
    assert kept == list(range(kept[0], n + 1)), "trace: ids not consecutive"
    assert o["lost"], f"trace_pipe printed no LOST line: {o['first_lines']}"
    lost = o["lost"][0]
    assert o["ids"] == list(range(lost + 1, n + 1)), \
        (f"after [LOST {lost} EVENTS] trace_pipe must go on at id {lost + 1} up to {n}: "
         f"{o['ids'][:3]}..{o['ids'][-3:]}")
    assert o["ids"] == kept, "trace_pipe and trace disagree on what was kept"


def test_a_reset_empties_both_readers(remote) -> None:
    r = remote()
    # TR:777-788: any write to `trace` resets every CPU; tracing stays on (SRB:368-369).
    assert r["reset"] == "ok", r["reset"]
    assert r["after_reset"] == {"trace": [], "pipe": []}, r["after_reset"]
    assert r["event_after_reset"] == "ok" and r["after_reset_event"] == [4242], \
        f"one event after the reset: {r['event_after_reset']}, trace {r['after_reset_event']}"


def test_user_space_cannot_map_a_remote_buffer(remote) -> None:
    u = remote()["user_space"]
    # TR:655-659, 790-796: no .mmap, no .unlocked_ioctl (ENODEV, ENOTTY); ring_buffer_map()
    # refuses a remote buffer too (ring_buffer.c:7840); no trace_pipe_raw under remotes/.
    assert u == {"trace_pipe_raw": False, "mmap_trace": "ENODEV", "get_reader": "ENOTTY"}, u


def test_trace_after_a_consuming_read_shows_only_what_is_unread(guest: Guest, probe_check,
                                                                check) -> None:
    """trace_pipe consumes (TR:555-556), `trace` shows what is left (TR:742, a non-consuming
    iterator; trace.tc "Test interaction with consuming read", with one page of events
    there). Here two pages of events, so the reader swaps twice and the second swap takes
    the page the writer is on: after everything was consumed and one event more written,
    `trace` must show that one event, and so must the next consuming read. The kernel's own
    ring buffer (an instance, trace_marker) shows only it. Found by `./lab explore
    trace-remote` on the 7.2.13 build (2026-11-29): on, enable, open, write 200, read,
    write 1, show."""
    loaded = guest.run("modprobe remote_test")
    assert loaded.exit_status == 0, f"modprobe remote_test: {loaded.stderr.strip()}"
    r = probe_check("probe_trace_remote", "consumed")
    n = r["written"]
    assert r["writes_ok"] and r["one_more"] == "ok", f"{n} writes and one more: {r['one_more']}"
    assert r["pipe_ids"] == list(range(1, n + 1)), \
        f"trace_pipe took {r['pipe_ids'][:3]}..{r['pipe_ids'][-3:]}, not 1..{n}"
    assert r["pipe_after"] == [n + 1], f"the next consuming read took {r['pipe_after']}"
    for name in ("trace_ids", "cpu0_trace_ids"):
        shown = r[name]
        stale = [i for i in shown if i <= n]
        check(f"consumed-gone:{name}", shown == [n + 1],
              f"{'trace' if name == 'trace_ids' else 'per_cpu/cpu0/trace'} after trace_pipe "
              f"took 1..{n} and id {n + 1} was written: {len(shown)} ids "
              f"{shown[:3]}..{shown[-3:]}, {len(stale)} of them consumed already",
              stale=len(stale), shown=len(shown))


@pytest.mark.guest(cpus=2)
def test_events_of_two_cpus_are_merged_in_time_order(remote_check) -> None:
    """Ids 1-8 written alternately on CPU 0 and CPU 1: `trace` shows them in the order
    written, each with the CPU it was written on, and trace_pipe consumes them in that order
    (TR: trace_remote_iter_read_event() takes the oldest event of all CPUs; remotes/
    trace.tc checks the same per CPU). (Found unrun by ./lab coverage: every earlier run had
    one CPU with data.)"""
    r = remote_check("two-cpus")
    assert r["writes"] == ["ok"] * 8, r["writes"]
    assert r["trace"] == [[i % 2, i] for i in range(1, 9)], \
        f"[cpu, id] of `trace`: {r['trace']}"
    assert r["pipe_ids"] == list(range(1, 9)), f"trace_pipe: {r['pipe_ids']}"


def test_a_size_the_remote_cannot_describe_is_refused_at_load(remote_check) -> None:
    """buffer_size_kb 2^35 KiB: more pages a CPU than a ring_buffer_desc counts (u32
    nr_page_va), so trace_buffer_desc_size() is SIZE_MAX and remote_test's load returns E2BIG
    (RT:86-89) before allocating. The size is taken when written (TR:203-227) and refused
    when the buffer loads, by tracing_on=1 and by opening trace_pipe (TR:75-77, TR:358-360),
    leaving it unloaded and tracing off; a 7 KiB buffer loads after it. (Found unrun by
    ./lab coverage.)"""
    r = remote_check("too-big")
    size = f"{r['size_kb']} (unloaded)"
    assert r["set"] == "ok", f"writing buffer_size_kb {r['size_kb']}: {r['set']}"
    assert r["tracing_on"] == "E2BIG", f"tracing_on=1 with it: {r['tracing_on']}"
    assert r["after_tracing_on"] == {"tracing_on": "0", "size": size}, r["after_tracing_on"]
    assert r["open_trace_pipe"] == "E2BIG", f"opening trace_pipe: {r['open_trace_pipe']}"
    assert r["after_open"] == size, r["after_open"]
    assert (r["loads_after"], r["event_after"], r["shown_after"]) == ("ok", "ok", [4004]), \
        f"7 KiB afterwards: tracing_on=1 {r['loads_after']}, event {r['event_after']}, " \
        f"trace {r['shown_after']}"


@pytest.mark.injects_allocation_failures
@pytest.mark.guest(fresh=True)  # the per-CPU readers' locks are made at the first such open
def test_an_allocation_failure_loading_or_opening_is_refused_and_leaves_nothing(
        remote_check, new_splats) -> None:
    """Loading the buffer (tracing_on=1) and opening per_cpu/cpu0/trace_pipe, trace_pipe and
    trace with each of their allocations failing in turn (fail-nth, probes/fault_inject.py):
    ENOMEM or done. A refused load leaves the buffer unloaded and tracing off (TR:114-136
    unwinds through trace_remote_try_unload()), and then the remote loads, shows an event and
    unloads once off and reset; after an open, `trace` shows the event and trace_pipe reads
    it. No splat."""
    r = remote_check("alloc-failures")
    opens = {"open_cpu_pipe": "opening per_cpu/cpu0/trace_pipe",
             "open_pipe": "opening trace_pipe", "open_trace": "opening trace"}
    check_sweep(r["load"], "tracing_on=1 (loading the buffer)")
    for key, what in opens.items():
        check_sweep(r[key], what)
    wrong = []
    for a in r["load"]["attempts"]:
        at = where("tracing_on=1", a)
        if a["outcome"] != "ok" and (a["size"], a["tracing_on"]) != ("7 (unloaded)", "0"):
            wrong.append(f"{at}: left buffer_size_kb {a['size']!r}, tracing_on {a['tracing_on']}")
        if (a["loads"], a["event"], a["shown"], a["unloaded"]) != ("ok", "ok", [1001],
                                                                   "7 (unloaded)"):
            wrong.append(f"{at}: then loading gave {a['loads']}, the event {a['event']}, "
                         f"`trace` showed {a['shown']}, off and reset {a['unloaded']!r}")
    for key, what in opens.items():
        for a in r[key]["attempts"]:
            if (a["shown"], a["piped"]) != ([2002], [2002]):
                wrong.append(f"{where(what, a)}: then `trace` showed {a['shown']}, "
                             f"trace_pipe read {a['piped']}")
    assert not wrong, "\n".join(wrong)
    assert not not_injected(new_splats()), f"kernel splats: {not_injected(new_splats())}"
