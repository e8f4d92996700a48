"""The tracefs ring buffer mapped into user space (per_cpu/cpuN/trace_pipe_raw mmap).

Observations come from probes/probe_trace_mmap.py; each test checks one rule of the ABI and,
when it fails, says the rule, what was expected and what the kernel did. Sources:
include/uapi/linux/trace_mmap.h (struct trace_buffer_meta, GET_READER), kernel/trace/trace.c
(tracing_buffers_mmap/_ioctl, get_snapshot_map), kernel/trace/ring_buffer.c (__rb_map_vma,
ring_buffer_map_get_reader, rb_update_meta_page), tools/testing/selftests/ring-buffer/
map_test.c, ../shared/reference/ring-buffer-abi.md section 4, seed 003 (the RFC).
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import pytest
from fault_sweep import check_sweep, not_injected, where

from harness.kernels.kernel import release_version

if TYPE_CHECKING:
    from conftest import ProbeCheck

META_STRUCT_LEN = 80  # sizeof(struct trace_buffer_meta) in trace_mmap.h since v6.10


@pytest.fixture
def trace(probe_check: ProbeCheck) -> Callable[..., dict]:
    """trace(CHECK, *ARGS, timeout=): the observations of a check of probes/probe_trace_mmap.py
    (conftest.py ProbeCheck), shared by the tests that judge them."""
    return partial(probe_check, "probe_trace_mmap")


# --- 6. which ABI ----------------------------------------------------------------------------

def test_kernel_speaks_the_mainline_mapping_abi(trace, kernel_fact) -> None:
    a = trace("abi")
    kernel_fact("trace_pipe_raw mmap ABI", f"{a['abi']} ({a['why']})")
    version = release_version(a["release"])
    if version is not None and version < (6, 10, 0):
        pytest.skip(f"kernel {a['release']} predates the mainline mapping ABI (v6.10); it "
                    f"speaks: {a['abi']} ({a['why']})")
    # v6.10 merged "tracing: Allow user-space mapping of the ring-buffer" with
    # TRACE_MMAP_IOCTL_GET_READER = _IO('R', 0x20).
    assert a["abi"] == "mainline", \
        f"a v6.10+ kernel must map trace_pipe_raw with the trace_mmap.h ABI: {a['why']}"


# --- 1. meta page ------------------------------------------------------------------------

@pytest.fixture
def meta(trace) -> dict:
    return trace("meta")


def test_meta_page_fields_describe_the_buffer(meta: dict) -> None:
    m = meta["steps"]["mapped"]
    page = meta["page_size"]
    assert m["meta_struct_len"] == META_STRUCT_LEN, \
        f"meta_struct_len {m['meta_struct_len']} != sizeof(struct trace_buffer_meta) 80"
    # v6.10: one page; since "ring-buffer: Align meta-page to sub-buffers" (v6.12) the meta
    # area is one sub-buffer. Either way a whole number of pages holding the struct.
    assert m["meta_page_size"] % page == 0 and m["meta_page_size"] in (page, m["subbuf_size"]),\
        f"meta_page_size {m['meta_page_size']}: expected the page size or the sub-buffer size"
    assert m["subbuf_size"] == meta["subbuf_size_kb"] * 1024, \
        f"subbuf_size {m['subbuf_size']} != buffer_subbuf_size_kb {meta['subbuf_size_kb']} KiB"
    # nr_subbufs counts the reader sub-buffer too; buffer_size_kb reports the data the
    # others hold (tracing_entries_read(): nr_pages * (subbuf_size - header)).
    data_kb = (m["nr_subbufs"] - 1) * (m["subbuf_size"] - meta["header_data_offset"]) // 1024
    assert data_kb == meta["buffer_size_kb"], \
        f"nr_subbufs {m['nr_subbufs']} (reader included) does not match buffer_size_kb " \
        f"{meta['buffer_size_kb']}: {m['nr_subbufs'] - 1} sub-buffers hold {data_kb} KiB"
    assert m["flags"] == 0, f"flags {m['flags']}: trace_mmap.h says 0 until new features"


def test_meta_counters_start_at_zero(meta: dict) -> None:
    for step in ("mapped", "get_reader_empty"):
        m = meta["steps"][step]
        counters = {k: m[k] for k in ("entries", "overrun", "read", "reader_id", "reader_read",
                                      "reader_lost_events")}
        # map_test.c meta_page_check: a fresh buffer, and GET_READER on it, change nothing.
        assert not any(counters.values()), f"{step}: counters of an empty buffer: {counters}"


def test_meta_counters_follow_writes_and_get_reader(meta: dict) -> None:
    s, n = meta["steps"], meta["writes"][0]
    first = s["after_writes_get_reader"]
    # map_test.c: after 16 marker writes and GET_READER, entries 16, overrun 0, read 16 and
    # a new reader sub-buffer (reader.id 1).
    assert (first["entries"], first["overrun"], first["read"]) == (n, 0, n), \
        f"after {n} writes and GET_READER: entries/overrun/read = " \
        f"{first['entries']}/{first['overrun']}/{first['read']}, expected {n}/0/{n}"
    assert first["reader_id"] != 0 and first["reader_id"] < first["nr_subbufs"], \
        f"GET_READER must swap in a data sub-buffer (id 1..nr_subbufs-1): {first['reader_id']}"
    # reader.read: "Number of bytes read on the reader subbuf" - GET_READER consumes all.
    assert first["reader_read"] == meta["reader_commit"][0], \
        f"reader.read {first['reader_read']} != the reader sub-buffer's data " \
        f"{meta['reader_commit'][0]} bytes"
    assert s["get_reader_again"] == first, \
        "GET_READER with nothing new must not change the meta page: " \
        f"{first} then {s['get_reader_again']}"
    more = s["more_writes_get_reader"]
    assert (more["entries"], more["read"]) == (2 * n, 2 * n), \
        f"after {n} more writes: entries {more['entries']}, read {more['read']}"
    assert more["reader_read"] == meta["reader_commit"][1], \
        f"reader.read {more['reader_read']} != data on the reader sub-buffer " \
        f"{meta['reader_commit'][1]}"


def test_meta_page_padding_is_zero(meta: dict) -> None:
    # map_test.c data_mmap: the meta area past meta_struct_len reads as zero.
    assert meta["padding_nonzero"] == 0, \
        f"{meta['padding_nonzero']} non-zero bytes in the {meta['padding_len']}-byte padding"


# --- 2. data -------------------------------------------------------------------------------

@pytest.mark.guest(cpus=2)
@pytest.mark.parametrize("cpu", [0, 1])
@pytest.mark.parametrize("subbuf_kb", [4, 8, 64])
def test_mapped_events_are_the_events_written(trace, subbuf_kb: int, cpu: int) -> None:
    d = trace("data", str(subbuf_kb), str(cpu))
    m = d["mapped"]
    assert m["torn"] is None, f"a sub-buffer did not parse: {m['torn']}"
    assert d["mapped_equals_written"], \
        f"{d['written']} trace_marker writes on CPU {cpu}, sub-buffers of {subbuf_kb} KiB: " \
        f"the mapping gave {len(m['texts'])} events, first difference {d['first_mismatch']}"
    assert m["pids"] == [d["pid"]] and m["other_events"] == 0, \
        f"foreign events in our instance: pids {m['pids']}, {m['other_events']} non-print"
    assert m["time_ordered"], "event times go backwards within one CPU buffer"
    assert d["events_on_other_cpu"] in (0, None), \
        f"{d['events_on_other_cpu']} events reached another CPU's buffer: the writer was pinned"
    meta = d["meta"]
    assert (meta["entries"], meta["read"], meta["overrun"]) == (d["written"], d["written"], 0),\
        f"meta after draining: entries {meta['entries']}, read {meta['read']}, overrun " \
        f"{meta['overrun']}; expected {d['written']}, {d['written']}, 0"


@pytest.mark.guest(cpus=2)
@pytest.mark.parametrize("cpu", [0, 1])
@pytest.mark.parametrize("subbuf_kb", [4, 8, 64])
def test_read_gives_the_same_events_as_the_mapping(trace, subbuf_kb: int,
                                                    cpu: int) -> None:
    d = trace("data", str(subbuf_kb), str(cpu))
    assert d["read_torn"] is None, f"a page from read() did not parse: {d['read_torn']}"
    assert d["read_equals_written"] and d["mapped_equals_written"], \
        f"the same workload read with read() ({d['read_count']} events) and through the " \
        f"mapping ({len(d['mapped']['texts'])}) must both give the {d['written']} written"


# --- 3. overflow ---------------------------------------------------------------------------

@pytest.fixture
def overflow(trace) -> dict:
    return trace("overflow")


def test_overflow_counters_account_for_every_event(overflow: dict) -> None:
    o, m = overflow, overflow["meta_after_drain"]
    assert o["overwrite_option"] == "1", "the check needs overwrite mode (the default)"
    assert m["entries"] == o["written"], f"entries {m['entries']} != {o['written']} written"
    assert m["read"] == o["read_events"], \
        f"meta read {m['read']} != {o['read_events']} events the reader got"
    # written = read + lost: overrun counts the events overwritten before being read.
    assert m["overrun"] + o["read_events"] == o["written"], \
        f"overrun {m['overrun']} + read {o['read_events']} != written {o['written']}"
    assert o["read_is_newest_suffix"], "overwrite mode must keep the newest events, in order"


def test_overflow_lost_events_reach_the_meta_page(overflow: dict, check) -> None:
    # trace_mmap.h: reader.lost_events is the "Number of events lost at the time of the
    # reader swap"; summed over the swaps of a full drain it must equal overrun.
    lost = overflow["drain"]["lost_events"]
    overrun = overflow["meta_after_drain"]["overrun"]
    check("meta-lost-events", sum(lost) == overrun,
          f"reader.lost_events over {len(lost)} reader swaps sums to {sum(lost)}, but "
          f"{overrun} events were overwritten (meta overrun); per swap: {lost}",
          lost_events=sum(lost), overrun=overrun, swaps=len(lost))


def test_overflow_is_flagged_in_the_sub_buffer(overflow: dict) -> None:
    # ring_buffer_map_get_reader(): a reader sub-buffer after a loss carries RB_MISSED_EVENTS
    # in its commit word, and the count (RB_MISSED_STORED) when there is room after the data.
    d, overrun = overflow["drain"], overflow["meta_after_drain"]["overrun"]
    assert d["missed_flags"] >= 1, "no reader sub-buffer carried RB_MISSED_EVENTS"
    if d["stored_lost"]:
        assert sum(d["stored_lost"]) == overrun, \
            f"stored missed-event counts {d['stored_lost']} != overrun {overrun}"


def test_meta_pages_lost_and_touched_count_the_writer(trace) -> None:
    """Observed, not looked up by version. "ring-buffer: Add page statistics to the meta-page"
    (the pKVM tracing series; 7.2.13 include/uapi/linux/trace_mmap.h) made the two words after
    `read`, Reserved1/Reserved2 before, pages_lost and pages_touched; rb_update_meta_page()
    copies cpu_buffer->pages_lost and ->pages_touched at each GET_READER. pages_touched counts
    the writer's moves to a next sub-buffer (rb_tail_page_update()); pages_lost the sub-buffers
    it overwrote (rb_handle_head_page(), RB_PAGE_HEAD), each adding its entries to overrun.
    With identical events and trace_clock counter every full sub-buffer holds E events, so
    after W writes pages_touched = (W - 1) // E and overrun = E * pages_lost exactly. A kernel
    that leaves both words 0 after sub-buffers were written and overwritten has no such
    fields: skipped."""
    c = trace("page-counters")
    fresh, a, b = c["fresh"], c["after_first"], c["after_second"]
    words = ("pages_lost", "pages_touched")
    assert b["overrun"] > 0, f"the check must overwrite sub-buffers: overrun {b['overrun']}"
    if not any(b[w] for w in words) and not any(a[w] for w in words):
        pytest.skip("kernel has no pages_lost/pages_touched in trace_buffer_meta: both words "
                    f"after `read` stay 0 (Reserved1/Reserved2) after {c['first'] + c['second']} "
                    f"events overwrote {b['overrun']} (meta overrun)")
    sub = c["first_subbuf"]
    per = sub["events"]
    # The premise: one event size, no time extends, so a full sub-buffer holds usable // size.
    assert len(sub["event_sizes"]) == 1 and sub["time_extends"] == sub["time_stamps"] == 0 \
        and per == sub["usable"] // sub["event_sizes"][0], \
        f"the check needs identical events and no time records in a full sub-buffer: {sub}"
    assert (fresh["pages_lost"], fresh["pages_touched"]) == (0, 0), \
        f"a fresh buffer: pages_lost/pages_touched {fresh['pages_lost']}/" \
        f"{fresh['pages_touched']}, expected 0/0"
    w1, w2 = c["first"], c["first"] + c["second"]
    assert (a["overrun"], a["pages_lost"]) == (0, 0), \
        f"after {w1} events (less than the buffer holds) nothing may be lost: overrun " \
        f"{a['overrun']}, pages_lost {a['pages_lost']}"
    assert a["pages_touched"] == (w1 - 1) // per, \
        f"after {w1} events of {per} a sub-buffer the writer moved {(w1 - 1) // per} times; " \
        f"pages_touched {a['pages_touched']}"
    assert b["pages_touched"] == (w2 - 1) // per, \
        f"after {w2} events of {per} a sub-buffer the writer moved {(w2 - 1) // per} times; " \
        f"pages_touched {b['pages_touched']}"
    assert b["overrun"] == per * b["pages_lost"], \
        f"each lost sub-buffer held {per} events: overrun {b['overrun']} != {per} x " \
        f"pages_lost {b['pages_lost']}"
    # The per-CPU stats file reads the same counter as the meta page.
    assert int(c["stats"]["overrun"]) == b["overrun"], \
        f"per_cpu/cpu0/stats overrun {c['stats']['overrun']} != meta overrun {b['overrun']}"


# --- 4. refusals ---------------------------------------------------------------------------

def test_refused_mappings_fail_on_an_unmapped_buffer(trace, check) -> None:
    r = trace("first-mapping")
    # __rb_map_vma(): VM_WRITE, VM_EXEC or !VM_MAYSHARE -> EPERM; pgoff off a sub-buffer
    # (order > 0) or past the end -> EINVAL. ring_buffer_map() must return that error.
    expected = {"prot_write": "EPERM", "prot_exec": "EPERM", "map_private": "EPERM",
                "off_subbuf_boundary": "EINVAL", "past_the_end": "EINVAL"}
    for case, errno in expected.items():
        check(f"first-map-{case}", r[case] == errno,
              f"the first mapping of a CPU buffer, {case}: expected {errno}, got {r[case]}",
              expected=errno, got=r[case])
    if "after" in r:  # absent only from outputs recorded before the probe had it (unit data)
        check_left_nothing(check, "refused-first-maps", r["after"],
                           "after the refused first mappings")
    assert r["map_after"] == "ok", "a good mapping after the refused ones must work"


# What a refused mapping must have undone, and the code that undoes it (7.2.13 and 6.12):
# - kernel/trace/ring_buffer.c ring_buffer_map(): a refused first mapping frees the meta page
#   and subbuf_ids and drops the resize_disabled it took (`atomic_dec(&cpu_buffer->
#   resize_disabled)` in the else branch after __rb_map_vma()); a refused further mapping
#   returns __rb_map_vma()'s error before __rb_inc_dec_mapped() counts it (user_mapped).
# - kernel/trace/trace.c tracing_buffers_mmap(): `if (ret) put_snapshot_map(iter->tr)` gives
#   back the tr->mapped get_snapshot_map() took (7.2.13 trace_snapshot.c: get/put_snapshot_map;
#   6.12 trace.c), else tracing_arm_snapshot_locked() stays EBUSY.
LEFT_NOTHING = {"get_reader": "ENODEV", "resize": "ok", "snapshot_arm": "ok",
                "snapshot_disarm": "ok", "latency_tracer_arm": "ok", "latency_tracer_disarm": "ok"}


def check_left_nothing(check, prefix: str, after: dict, when: str) -> None:
    """One check per rule: the buffer is not left mapped (GET_READER on a fresh fd is
    ENODEV: rb_get_mapped_buffer() sees user_mapped 0), it resizes, a snapshot trigger and a
    latency tracer (where the kernel has one) arm and disarm."""
    for key, want in LEFT_NOTHING.items():
        if key not in after and key not in ("get_reader", "resize"):
            continue  # no snapshot file, no latency tracer in this kernel
        got = after.get(key, "not observed")
        check(f"{prefix}-{key.replace('_', '-')}", got == want,
              f"{when}: {key} expected {want}, got {got} (the buffer was left mapped, "
              f"resize-disabled or snapshot-mapped)", expected=want, got=got)


@pytest.fixture
def refusals(trace) -> dict:
    return trace("refusals")


def test_refused_mappings_while_mapped_leave_nothing_behind(refusals: dict, check) -> None:
    """Issue 23 §4: the refusals of probe check refusals (PROT_WRITE, PROT_EXEC, MAP_PRIVATE
    while mapped; offsets off a sub-buffer or past the end; mprotect to writable), then every
    mapping unmapped: nothing of them is left (LEFT_NOTHING), and the buffer maps and reads
    again."""
    check_left_nothing(check, "refused-maps", refusals["after"],
                       "after the refused mappings and munmap of the good ones")
    check("refused-maps-map-again", refusals["map_after"] == "ok",
          f"after the refused mappings a new mapping must map and read what was written: "
          f"{refusals['map_after']}", got=refusals["map_after"])


def test_refused_mappings_fail_while_mapped(refusals: dict) -> None:
    wrong = {k: v for k, v in refusals["while_mapped"].items() if v != "EPERM"}
    assert not wrong, f"PROT_WRITE, PROT_EXEC and MAP_PRIVATE must give EPERM: {wrong}"


def test_prot_write_on_a_read_only_fd_is_refused_by_the_vfs(refusals: dict) -> None:
    # mm/mmap.c do_mmap(): MAP_SHARED + PROT_WRITE needs an fd open for writing (EACCES).
    assert refusals["prot_write_rdonly_fd"] == "EACCES", refusals["prot_write_rdonly_fd"]


def test_mprotect_to_writable_is_refused(refusals: dict) -> None:
    # __rb_map_vma() clears VM_MAYWRITE: mprotect(PROT_WRITE) later gives EACCES.
    assert refusals["mprotect_write"] == "EACCES", \
        f"mprotect(PROT_READ|PROT_WRITE) of the meta page: {refusals['mprotect_write']}"
    # On a mapping of an fd open for writing too, where the VFS left VM_MAYWRITE.
    assert refusals["mprotect_write_rw_fd"] == "EACCES", \
        f"mprotect(PROT_READ|PROT_WRITE) of a mapping of an O_RDWR fd: " \
        f"{refusals['mprotect_write_rw_fd']}"
    print(f"mprotect(PROT_EXEC) of the meta page: {refusals['mprotect_exec']} "
          f"(tracefs mounted noexec: {refusals['noexec_mount']}; VM_MAYEXEC is not cleared)")


def test_offsets_off_a_sub_buffer_or_past_the_end_are_refused(refusals: dict,
                                                              new_splats) -> None:
    o = refusals["offsets"]
    expected = {"whole_data": "ok", "one_subbuf_short": "ok", "last_subbuf": "ok",
                "off_subbuf_boundary": "EINVAL", "one_subbuf_too_long": "EINVAL",
                "past_the_end": "EINVAL", "far_past_the_end": "EINVAL", "huge": "EINVAL"}
    wrong = {k: f"expected {v}, got {o[k]}" for k, v in expected.items() if o[k] != v}
    # (1 << 63) - PAGE: the VFS refuses pgoff + len overflowing first (EOVERFLOW).
    if o["huge_max"] not in ("EINVAL", "EOVERFLOW"):
        wrong["huge_max"] = f"expected EINVAL or EOVERFLOW, got {o['huge_max']}"
    assert not wrong, f"mapping offsets and lengths ({refusals['geometry']}): {wrong}"
    assert not new_splats(), f"kernel splats: {new_splats()}"


def test_a_size_beyond_memory_is_refused_and_the_buffer_keeps_its_size(trace) -> None:
    """buffer_size_kb and per_cpu/cpu0/buffer_size_kb of four times MemTotal: ENOMEM before any
    allocation ("ring-buffer: Check if memory is available before allocation", v4.17), the
    sizes as they were, and the buffer still takes events. (Found unrun by ./lab coverage:
    ring_buffer_resize()'s refusal, docs/results/2026-12-02-coverage-gaps-7.2.md.)"""
    r = trace("oversized")
    assert (r["whole"], r["cpu0"]) == ("ENOMEM", "ENOMEM"), \
        f"{r['asked_kb']} KiB a CPU must be refused with ENOMEM: whole {r['whole']}, " \
        f"cpu0 {r['cpu0']}"
    assert r["after"] == r["before"], f"sizes before {r['before']}, after {r['after']}"
    assert r["marker"] == "ok" and r["shown"], r


def test_resize_and_snapshot_are_refused_while_mapped(refusals: dict) -> None:
    busy, after = refusals["busy_while_mapped"], refusals["after_unmap"]
    wrong = {k: v for k, v in busy.items() if v != "EBUSY"}
    assert not wrong, f"while mapped these writes must give EBUSY: {wrong}"
    wrong = {k: v for k, v in after.items() if v != "ok"}
    assert not wrong, f"after munmap these writes must work again: {wrong}"


def test_a_refused_subbuf_size_leaves_the_mapped_geometry_as_it_was(refusals: dict) -> None:
    """buffer_subbuf_size_kb written while mapped is refused (EBUSY, above) and must change
    nothing: ring_buffer_subbuf_order_set() checks resize_disabled before it publishes the new
    order (7.2.x stable "ring-buffer: Check resize_disabled before publishing the new subbuf
    order"; before it, buffer->subbuf_order and the file could read the refused size while the
    meta page and every reader kept the old one)."""
    before, after = refusals["geometry"]["subbuf_size"], refusals["after_busy_writes"]
    assert after["meta_subbuf_size"] == before, \
        f"the meta page's subbuf_size went {before} -> {after['meta_subbuf_size']}"
    assert after["file_subbuf_kb"] * 1024 == before, \
        f"buffer_subbuf_size_kb reads {after['file_subbuf_kb']} KiB, the mapping {before} B"
    assert after["reads"] == "ok", \
        f"after the refused writes the mapping no longer reads new events: {after['reads']}"


def test_an_armed_snapshot_excludes_mapping(refusals: dict) -> None:
    if not refusals["snapshot_file"]:
        pytest.skip("kernel has no snapshot file in instances (CONFIG_TRACER_SNAPSHOT off)")
    # get_snapshot_map(): tr->snapshot (armed snapshot users) -> EBUSY (map_test.c
    # snapshot.excludes_map).
    assert refusals["set_trigger"] == "ok", f"setting the trigger: {refusals['set_trigger']}"
    assert refusals["map_with_snapshot_trigger"] == "EBUSY", \
        f"mmap with a snapshot trigger set: {refusals['map_with_snapshot_trigger']}"
    assert refusals["map_after_trigger_cleared"] == "ok", \
        f"mmap after the trigger is cleared: {refusals['map_after_trigger_cleared']}"
    print(f"mmap with a snapshot allocated but not armed: "
          f"{refusals['map_with_snapshot_allocated']}")


def test_ioctls_on_unmapped_and_unknown(refusals: dict) -> None:
    # tracing_buffers_ioctl(): GET_READER needs a mapped buffer (ENODEV), other non-zero
    # commands are ENOTTY, command 0 wakes waiters.
    got = {k: refusals[k] for k in ("get_reader_unmapped", "unknown_ioctl", "wake_ioctl_0")}
    assert got == {"get_reader_unmapped": "ENODEV", "unknown_ioctl": "ENOTTY",
                   "wake_ioctl_0": "ok"}, got


# --- 5. lifetime ---------------------------------------------------------------------------

def lifetime(trace, part: str, new_splats) -> dict:
    d = trace("lifetime", part)
    # A splat here fails the test through the plugin (harness/results/verdicts.py), which also
    # lets a known issue excuse exactly its own splat; print the titles beside the data.
    print(f"lifetime case '{part}': kernel splats {new_splats() or 'none'}")
    assert d["remap_works"], f"after '{part}' a new mapping must work: {d}"
    assert d["instance_removed"], f"after '{part}' the instance must be removable: {d}"
    return d


def test_partial_munmap_is_refused(trace, new_splats) -> None:
    d = lifetime(trace, "partial", new_splats)
    # tracing_buffers_may_split() returns -EINVAL: the mapping must stay whole.
    assert d["partial_munmap"] == "EINVAL", \
        f"munmap of one page inside the mapping: expected EINVAL, got {d['partial_munmap']}"
    assert d["rest_munmap"] == "ok"


def test_fork_inherits_only_with_madv_dofork(trace, new_splats) -> None:
    """A tracefs mapping is VM_DONTCOPY: not inherited, unless MADV_DOFORK clears that where
    the mm allows it on a VM_DONTEXPAND VMA (6.12 does; 7.x refuses every VM_SPECIAL VMA)."""
    d = lifetime(trace, "fork", new_splats)
    # __rb_map_vma() sets VM_DONTCOPY: a child has no mapping (SIGSEGV on access) ...
    assert d["child_without_dofork"] == {"signal": "SIGSEGV"}, d["child_without_dofork"]
    assert d["parent_reads_after_child_exit"], "the parent's mapping broke when the child exited"
    if d["madv_dofork"] == "ENOSYS":  # tinyconfig: mm/Makefile builds madvise.o only with it
        pytest.skip("kernel has no madvise(2) (ENOSYS: CONFIG_ADVISE_SYSCALLS off), so no "
                    "MADV_DOFORK to check")
    if d["madv_dofork"] == "EINVAL":
        # Since the mm refuses MADV_DOFORK on any VM_SPECIAL VMA (mm/madvise.c
        # madvise_vma_behavior(): `if (new_flags & VM_SPECIAL) return -EINVAL`; 6.12 refused
        # only VM_IO), and __rb_map_vma() sets VM_DONTEXPAND, a tracefs mapping can no longer be
        # made inheritable. That is the mm's rule, not tracing's: it must hold for a VM_SPECIAL
        # perf buffer too, and the tracefs VMA must be VM_DONTEXPAND (smaps `de`).
        control = d["madv_dofork_control"]
        assert "de" in d["vm_flags"], \
            f"MADV_DOFORK refused on a tracefs mapping that is not VM_DONTEXPAND: {d['vm_flags']}"
        assert control.get("madv_dofork") == "EINVAL", \
            f"MADV_DOFORK refused on the tracefs mapping ({d['vm_flags']}) but not on a " \
            f"VM_SPECIAL perf buffer ({control}): tracing's refusal, not the mm's rule"
        return
    assert d["madv_dofork"] == "ok", f"madvise(MADV_DOFORK) of the mapping: {d['madv_dofork']}"
    # ... unless MADV_DOFORK cleared it: then the child reads the shared meta page.
    assert d["child_with_dofork"] == {"meta_page_size": d["expected_meta_page_size"]}, \
        d["child_with_dofork"]
    assert d["parent_reads_after_child_exit"], "the parent's mapping broke when the child exited"


def test_mapping_twice_shares_one_buffer(trace, new_splats) -> None:
    d = lifetime(trace, "twice", new_splats)
    assert d["second_fd_map"] == "ok" and d["same_view"], d
    # The buffer stays mapped until its last mapping goes (user_mapped counts them).
    assert d["get_reader_after_first_unmapped"] == "ok", d
    assert d["get_reader_after_all_unmapped"] == "ENODEV", d


def test_closing_the_fd_before_munmap(trace, new_splats) -> None:
    d = lifetime(trace, "close-first", new_splats)
    assert d["meta_readable_after_close"], "the mapping must outlive its fd"
    # The VMA holds the file: the instance stays busy until munmap.
    assert d["rmdir_while_mapped_fd_closed"] == "EBUSY", d


def test_instances_come_and_go_while_one_is_mapped(trace, new_splats) -> None:
    d = lifetime(trace, "instances", new_splats)
    assert d["mkdir_other"] == "ok" and d["rmdir_other"] == "ok", d
    # __remove_instance(): an instance with open files is busy.
    assert d["rmdir_mapped_instance"] == "EBUSY", d


def test_many_map_unmap_rounds_leave_nothing_behind(trace, new_splats) -> None:
    d = lifetime(trace, "rounds", new_splats)
    assert d["resize_after"] == "ok", \
        f"after {d['rounds']} map/unmap rounds the buffer must resize (mapping count back " \
        f"to zero): {d['resize_after']}"


# kernel/trace/trace.c tracing_buffers_may_split() returns -EINVAL for any split: a
# shrinking mremap unmaps the tail, MAP_FIXED over a part unmaps that part, mprotect of a part
# splits it. kernel/trace/ring_buffer.c __rb_map_vma() sets VM_DONTEXPAND, and mm/mremap.c
# vma_to_resize() refuses to grow such a VMA, in place or moving: "if (vma->vm_flags &
# (VM_DONTEXPAND | VM_PFNMAP)) return ERR_PTR(-EFAULT)", before any expansion is tried; and
# a move that keeps the old range: "if ((flags & MREMAP_DONTUNMAP) && (vma->vm_flags &
# (VM_DONTEXPAND | VM_PFNMAP))) return ERR_PTR(-EINVAL)".
RESHAPE_ERRNO = {"shrinking_mremap": "EINVAL", "map_fixed_over_part": "EINVAL",
                 "mprotect_part": "EINVAL", "grow_meta": "EFAULT", "grow_meta_maymove": "EFAULT",
                 "grow_data": "EFAULT", "grow_data_maymove": "EFAULT",
                 "dontunmap_move_data": "EINVAL"}


def test_mapping_cannot_be_split_or_grown(trace, new_splats) -> None:
    d = lifetime(trace, "reshape", new_splats)
    wrong = {}
    for op, want in RESHAPE_ERRNO.items():
        r = d[op]
        if "signal" in r or "error" in r:  # the reshape's child died or raised
            wrong[op] = f"expected {want}; the process doing it ended with " \
                        f"{r.get('signal') or r.get('error')}"
            continue
        if (r["result"], r["reads_after"]) != (want, "ok") or r["vmas_after"] != r["vmas_before"]:
            wrong[op] = f"expected {want} with the meta page and data area whole and readable; " \
                        f"got {r['result']}, VMAs {r['vmas_before']} -> {r['vmas_after']}, " \
                        f"reading after: {r['reads_after']}"
    assert not wrong, f"splitting or growing a mapped trace_pipe_raw: {wrong}"
    assert not new_splats(), f"kernel splats: {new_splats()}"


def test_a_moved_mapping_keeps_working_and_unmaps_once(trace, new_splats) -> None:
    d = lifetime(trace, "moved", new_splats)
    # mm/mremap.c refuses to grow a VM_DONTEXPAND VMA and refuses MREMAP_DONTUNMAP on it, but
    # moves it whole (MREMAP_MAYMOVE|MREMAP_FIXED, same length): copy_vma() gives the new VMA
    # vm_ops->open, tracing_buffers_mmap_open() -> ring_buffer_map_dup() counts it (trace.c,
    # 6.12.77+ and 7.x: e39bb9e02b68), and the old VMA's close uncounts it. So a buffer whose
    # only mapping moved stays mapped: GET_READER works (ring_buffer_map_get_reader() answers
    # ENODEV for an unmapped CPU buffer) and the meta page reads right at its new address; the
    # moved mapping's munmap is the last one (the buffer resizes again).
    assert d["move"] == "ok", f"mremap(MAYMOVE|FIXED) of the meta page mapping: {d['move']}"
    assert d["get_reader_after_move"] == "ok", \
        f"GET_READER with the moved mapping the only one: {d['get_reader_after_move']}"
    assert d["meta_after_move"] == d["meta_before"], \
        f"the meta page at its new address: {d['meta_after_move']}, was {d['meta_before']}"
    assert d["resize_after"] == "ok", \
        f"after munmap of the moved mapping the buffer must resize: {d['resize_after']}"
    # A splat fails it through the plugin (lifetime()); the known issue's own WARN, in
    # put_snapshot_map() or tracing_buffers_mmap_close(), is excused there and only there.


def test_latency_tracer_refused_while_mapped(trace, new_splats) -> None:
    d = trace("latency-tracer")
    # tracing_set_tracer() refuses any switch while a trace pipe file of the instance is open
    # (6.12 trace.c: "if (tr->trace_ref) return -EBUSY"), and a mapping keeps its
    # trace_pipe_raw file open until munmap, so that is the EBUSY a mapped buffer gives.
    # Behind it, tracing_arm_snapshot_locked() would refuse a use_max_tr tracer on a mapped
    # buffer too ("tr->snapshot == UINT_MAX || tr->mapped"). The instance starts with nop,
    # which the refused switch leaves in place.
    assert (d["set_while_mapped"], d["current_while_mapped"]) == ("EBUSY", d["current_before"]), \
        f"switching to {d['tracer']} while mapped: expected EBUSY with {d['current_before']} " \
        f"kept, got {d['set_while_mapped']} with {d['current_while_mapped']}"
    assert d["reads_while_mapped"], "the mapping must keep working after the refused switch"
    assert (d["set_after_unmap"], d["current_after_unmap"]) == ("ok", d["tracer"]), \
        f"after munmap the switch to {d['tracer']} must work: {d}"
    # And the other way round: get_snapshot_map(): tr->snapshot (armed by the tracer) -> EBUSY.
    assert d["map_with_latency_tracer"] == "EBUSY", \
        f"mmap with {d['tracer']} current: expected EBUSY, got {d['map_with_latency_tracer']}"
    assert d["back_to_nop"] == "ok", d
    # The refused switch took nothing, and nop disarmed what the later one armed (tr->snapshot
    # back to 0: 6.12 trace.c / 7.2.13 trace_snapshot.c tracing_disarm_snapshot()): the
    # buffer maps again.
    assert d["map_after_nop"] == "ok", \
        f"after the refused switch, the switch after munmap and back to nop, mmap must work " \
        f"again: {d['map_after_nop']}"
    assert not new_splats(), f"kernel splats: {new_splats()}"


# --- 7. readers side by side ---------------------------------------------------------------

def test_mapping_and_read_consume_from_one_position(trace, new_splats) -> None:
    r = trace("readers")
    print(f"read() on the mapped fd: {r['read_on_mapped_fd']}; splice() of the mapped buffer: "
          f"{r['splice_on_mapped']}")
    # ring_buffer_read_page() copies events out of a mapped buffer instead of swapping
    # sub-buffers, and both readers advance the one per-CPU reader: each event is read once.
    assert r["torn"] is None, r["torn"]
    assert r["missing"] == 0 and r["foreign"] == 0, \
        f"{r['missing']} of {r['written']} events reached neither reader, {r['foreign']} " \
        "unknown events"
    assert r["read_duplicates"] == 0 and r["read_returned_mapped_events"] == 0, \
        f"read() returned {r['read_duplicates']} events twice and " \
        f"{r['read_returned_mapped_events']} that GET_READER had already consumed"
    assert r["meta_final"]["read"] == r["written"], \
        f"meta read {r['meta_final']['read']} != {r['written']} events consumed by both"
    assert not new_splats(), f"kernel splats: {new_splats()}"


def test_a_close_elsewhere_does_not_end_an_open_readers_file(trace, check) -> None:
    r = trace("reader-after-other-close")
    # read(2): 0 is the end of file. An open trace_pipe_raw with nothing in it answers EAGAIN
    # with O_NONBLOCK, or waits (tracing_buffers_read()); closing another descriptor of the
    # same open file (a forked child exiting, close(dup(fd))) ends nothing for this one.
    assert r["before"] == "EAGAIN" and r["fresh_open"] == "EAGAIN", r
    ended = {k: r[k] for k in ("after_child_exit", "after_dup_closed",
                               "blocking_after_dup_closed") if r[k] == "0 bytes"}
    check("reader-not-ended", not ended,
          f"read() of an empty trace_pipe_raw gave the end of file (0 bytes) after another "
          f"descriptor of the file was closed: {ended}; a blocking read returned after "
          f"{r['blocking_waited_s']} s instead of waiting",
          ended=len(ended), **{k: r[k] for k in ("after_child_exit", "after_dup_closed",
                                                "blocking_after_dup_closed")})


def test_a_new_subbuf_size_leaves_no_unreadable_events(trace, check) -> None:
    r = trace("subbuf-change-reader")
    # A new sub-buffer size frees the pages the events were on (ring_buffer_subbuf_order_set()):
    # what is left is an empty buffer, which an open reader answers with EAGAIN (O_NONBLOCK,
    # tracing_buffers_read()), and whose per-CPU stats count no entries.
    assert r["changed_empty"]["read"] == "EAGAIN" and r["changed_empty"]["entries"] == 0, r
    assert r["unchanged"]["read"] != "EAGAIN" and r["unchanged"]["again"] == "EAGAIN", r
    c = r["changed"]
    check("subbuf-change-entries", c["entries"] == 0,
          f"after a new sub-buffer size, per_cpu stats count {c['entries']} entries in a "
          "buffer whose pages were freed", **c)
    check("subbuf-change-read", c["read"] == c["again"] == "EAGAIN",
          f"after a new sub-buffer size, read() of the emptied buffer gave {c['read']}, then "
          f"{c['again']} (the end of file where EAGAIN is due)", **c)


def test_a_new_subbuf_size_reports_nothing_missed_on_its_new_pages(trace, check) -> None:
    """Events overwritten (overrun) and none read, then a new buffer_subbuf_size_kb, then fewer
    events than the new pages hold: the first reader after the change, by read() and by
    GET_READER (the writer on the reader's page, and moved past it)."""
    r = trace("subbuf-change-missed")
    readers = {k: r[k] for k in ("read", "mapped_on_writer", "mapped")}
    print("first reader after the change (missed flag, stored count, meta lost_events): " +
          ", ".join(f"{k} {v['missed']} {v['stored_lost']} "
                    f"{v.get('meta', {}).get('reader_lost_events')}" for k, v in readers.items()))
    for name, v in readers.items():
        assert v["overrun_before"] > 0, \
            f"{name}: the check must overwrite events before the change: {v['overrun_before']}"
        assert v["got"] == "ok" and v["texts"][:1] == ["n00000"], \
            f"{name}: the first reader after the change must get the first event written " \
            f"after it: {v['got']}, events {v['texts']}"
    # ftrace.rst (buffer_subbuf_size_kb): "any data in the ring buffer ... will be discarded";
    # the buffer starts over on new pages, as after a reset (rb_reset_cpu() zeroes overrun,
    # last_overrun, lost_events), and nothing was lost on those pages. So the first reader
    # sub-buffer after the change has no RB_MISSED_EVENTS and no stored count (trace_pipe_raw
    # pages, ring_buffer_read_page(); mapped sub-buffers, ring_buffer_map_get_reader()), and
    # the meta page's reader.lost_events, "Number of events lost at the time of the reader
    # swap" (trace_mmap.h), is 0.
    flagged = {name: {"missed": v["missed"], "stored_lost": v["stored_lost"],
                      "lost_events": v.get("meta", {}).get("reader_lost_events")}
               for name, v in readers.items()
               if v["missed"] or v["stored_lost"] or v.get("meta", {}).get("reader_lost_events")}
    # The stale symptom: every count given is the overrun before the change (a flag without
    # a count: no room after the data; the meta page's count is zeroed on kernels with
    # trace-mmap-meta-lost-events-always-zero).
    stale = [name for name, f in flagged.items()
             if {f["stored_lost"] or 0, f["lost_events"] or 0} - {0}
             <= {readers[name]["overrun_before"]}]
    check("subbuf-change-missed", not flagged,
          "the first reader after a new sub-buffer size is told events were missed on the "
          f"new, empty pages: {flagged}, though fewer events were written after the change "
          "than they hold (the overrun before the change: "
          f"{readers['read']['overrun_before']}); a buffer that lost nothing has no "
          "RB_MISSED_EVENTS, no stored count and reader.lost_events 0",
          flagged=len(flagged), stale=len(stale),
          overrun_before=readers["read"]["overrun_before"],
          read_stored_lost=readers["read"]["stored_lost"] or 0,
          mapped_stored_lost=readers["mapped"]["stored_lost"] or 0,
          mapped_lost_events=readers["mapped"]["meta"]["reader_lost_events"],
          on_writer_lost_events=readers["mapped_on_writer"]["meta"]["reader_lost_events"])


def test_a_new_subbuf_size_keeps_the_buffer_percent_watermark(trace, check) -> None:
    """buffer_percent 50 and two instances that end alike (nothing unread, the same sizes,
    the writer on the reader's page): one read an event before each of four sub-buffer size
    changes, the other changed the sizes while empty. Filled alike, half a sub-buffer a step,
    to about 70% of the ring, poll() must answer alike."""
    r = trace("subbuf-change-watermark")
    c, f = r["control"], r["flipped"]
    print(f"poll() after each step of {c['per_step']} events, {c['nr_pages']} sub-buffers: "
          f"control {c['polls']}, after the size changes {f['polls']}")
    for name, v in (("control", c), ("flipped", f)):
        assert all(a.endswith(" bytes") and a != "0 bytes" for a in v["reads"]), \
            f"{name}: each event written must be read back: {v['reads']}"
    assert (c["nr_pages"], c["subbuf_size"]) == (f["nr_pages"], f["subbuf_size"]), \
        f"the two instances must end with one geometry: {c['nr_pages']} x {c['subbuf_size']}, " \
        f"{f['nr_pages']} x {f['subbuf_size']}"
    pollin = [ev & 1 for ev in c["polls"]], [ev & 1 for ev in f["polls"]]
    # ftrace.rst, buffer_percent: 50 "means to wake up when roughly half of the ring buffer
    # sub-buffers are full" (ring_buffer_poll_wait() -> rb_watermark_hit() -> full_hit()).
    # Without POLLIN in the control the comparison says nothing about the flips.
    assert pollin[0][-1], \
        f"control: {c['steps']} steps of {c['per_step']} events filled about 70% of " \
        f"{c['nr_pages']} sub-buffers, past buffer_percent 50, and poll() gave no POLLIN " \
        f"(polls {c['polls']}): the watermark does not work here, so the check says nothing " \
        "about a new sub-buffer size"
    late = sum(1 for a, b in zip(*pollin) if a and not b)
    early = sum(1 for a, b in zip(*pollin) if b and not a)
    check("subbuf-change-watermark", pollin[0] == pollin[1],
          f"after sub-buffer size changes over read events, poll() with buffer_percent 50 "
          f"gave POLLIN from step {f['first_pollin']} of {f['steps']} where the same fill "
          f"without them gave it from step {c['first_pollin']} (each step {f['per_step']} "
          f"events, half a sub-buffer; {f['nr_pages']} sub-buffers of {f['subbuf_size']} "
          f"bytes): a buffer about 70% full must wake a poll()er, as buffer_percent says",
          late=late, early=early, control_first=c["first_pollin"] or 0,
          flipped_first=f["first_pollin"] or 0, steps=f["steps"], nr_pages=f["nr_pages"])


@pytest.mark.guest(cpus=2)
def test_trace_marker_writes_beside_snapshot_swaps_leave_no_splat(trace) -> None:
    """A trace_marker writer on one CPU and `echo 1 > snapshot` on the other: the writer
    reads the instance's buffer pointer while update_max_tr() swaps it with the snapshot's
    (kernel/trace/trace.c write_marker_to_buffer(), trace_snapshot.c update_max_tr()). Both
    are allowed at once; the kernel log judges (a race kernel reports the data race)."""
    r = trace("marker-beside-snapshot-swap", "3")
    assert r["cpus"] >= 2, f"the two writers need two CPUs, the guest has {r['cpus']}"
    assert r["markers"] > 0 and r["swaps"] > 0, \
        f"both sides must run for the race to be asked: {r}"


@pytest.mark.guest(cpus=2)
def test_trace_pipe_raw_reads_beside_snapshot_swaps_leave_no_splat(trace) -> None:
    """read() and GET_READER (unmapped: ENODEV) of trace_pipe_raw and reads of its CPU's
    stats on one CPU and `echo 1 > snapshot` on the other: the readers reload the instance's
    buffer pointer (kernel/trace/trace.c tracing_buffers_read(), trace_empty(),
    tracing_buffers_ioctl(), tracing_stats_read()) while update_max_tr() swaps
    it with the snapshot's. All are allowed at once; the kernel log judges (a race kernel
    reports the data race)."""
    r = trace("pipe-raw-read-beside-snapshot-swap", "3")
    assert r["cpus"] >= 2, f"the reader and the swapper need two CPUs, the guest has {r['cpus']}"
    assert r["reads"] + r["refused"] > 0 and r["stats"] > 0 and r["swaps"] > 0, \
        f"both sides must run for the race to be asked: {r}"


@pytest.mark.guest(cpus=2)
def test_a_mapping_and_a_snapshot_arm_at_once_exclude_each_other(trace, check) -> None:
    """mmap() of trace_pipe_raw on one CPU while the other arms and frees the snapshot: a
    mapping and an armed snapshot exclude each other (kernel/trace/trace_snapshot.c
    get_snapshot_map(), tracing_arm_snapshot_locked(), under snapshot_trigger_lock; the
    snapshot rule of 117c39200d9d's mapping), so a mapping that was made keeps its buffer:
    GET_READER works on it, and once unmapped the buffer takes a new size."""
    r = trace("map-beside-snapshot-arm", "3")
    assert r["cpus"] >= 2, f"the mapper and the armer need two CPUs, the guest has {r['cpus']}"
    assert r["maps"].get("ok", 0) > 0 and r["arms"].get("ok", 0) > 0, \
        f"both sides must win sometimes for the race to be asked: {r}"
    check("reader-after-arm", set(r["get_reader"]) <= {"ok"},
          f"GET_READER on mappings made beside snapshot arms: {r['get_reader']} (ENODEV: the "
          f"mapped buffer was swapped into the snapshot; maps {r['maps']}, arms {r['arms']})",
          get_reader=r["get_reader"], maps=r["maps"], arms=r["arms"])
    check("resize-after-arm", r["resize_after"] == "ok",
          f"a new buffer_size_kb once unmapped: {r['resize_after']} (maps {r['maps']}, arms "
          f"{r['arms']})", resize_after=r["resize_after"])


@pytest.mark.guest(cpus=2)
def test_per_cpu_stats_read_beside_a_consuming_reader_leave_no_splat(trace) -> None:
    """per_cpu/cpuN/stats read on one CPU while that CPU's events are consumed through
    trace_pipe_raw on the other: the stats are read without the reader's lock
    (kernel/trace/trace.c tracing_stats_read(), ring_buffer.c ring_buffer_read_events_cpu()
    against rb_advance_reader()). Allowed; the kernel log judges (a race kernel reports the
    plain counters)."""
    r = trace("stats-beside-reader", "3")
    assert r["cpus"] >= 2, f"the reader and the stats need two CPUs, the guest has {r['cpus']}"
    assert r["consumed"] > 0 and r["stats"] > 0, \
        f"both sides must run for the race to be asked: {r}"


@pytest.mark.guest(cpus=2)
def test_sched_events_enabled_beside_task_switches_leave_no_splat(trace) -> None:
    """An instance's sched events enabled and disabled, and a trigger set and removed on
    sched_switch, on one CPU while the other switches tasks: the events' handlers read the
    event file's flags without a lock (kernel/trace/trace.c trace_event_buffer_lock_reserve(),
    trace_event_buffer_commit()) while enabling (trace_events.c
    __ftrace_event_enable_disable()) and the trigger's registration set them. Allowed; the
    kernel log judges (a race kernel reports the plain read)."""
    r = trace("events-enabled-beside-switches", "3")
    assert r["cpus"] >= 2, f"the switches and the flips need two CPUs, the guest has {r['cpus']}"
    assert r["switches"] > 0 and r["flips"] > 0 and r["triggers"] > 0, \
        f"both sides must run for the race to be asked: {r}"


def test_two_trace_marker_writers_on_one_cpu_leave_no_splat(trace) -> None:
    """Two trace_marker writers on one CPU: each copies its text into the CPU's user buffer
    with preemption enabled and retries when the CPU switched tasks meanwhile
    (kernel/trace/trace.c trace_user_fault_read()); allowed, and judged by the kernel log (a
    race kernel reports the copies racing)."""
    r = trace("two-marker-writers-on-one-cpu", "3")
    assert r["first"] > 0 and r["second"] > 0, f"both writers must write: {r}"


@pytest.mark.guest(cpus=2)
def test_a_full_waiter_beside_nested_writers_leaves_no_splat(trace) -> None:
    """A poll() waiting for a buffer_percent-full buffer on one CPU, while the other CPU
    writes markers in a task and timer and sched events from its interrupts: every commit's
    rb_wakeups() (kernel/trace/ring_buffer.c) checks the pending full waiter, an interrupt's
    commit nested in a task's. Allowed at once; the kernel log judges (a race kernel reports
    a plain access the nesting races)."""
    r = trace("full-waiter-beside-nested-writers", "3")
    assert r["cpus"] >= 2, f"the writer and the waiter need two CPUs, the guest has {r['cpus']}"
    assert r["markers"] > 0 and r["polls"] > 0, f"both sides must run for the race to be asked: {r}"


@pytest.mark.guest(cpus=2)
def test_a_mapped_reader_beside_the_writer_leaves_no_splat(trace) -> None:
    """GET_READER on CPU 0 swapping sub-buffers of the last CPU's mapped buffer while a
    trace_marker writer runs there (include/uapi/linux/trace_mmap.h: the writer never waits
    for the reader; kernel/trace/ring_buffer.c __rb_get_reader_page() against rb_move_tail()
    and rb_commit()); judged by the kernel log (a race kernel reports plain accesses)."""
    r = trace("mapped-reader-beside-writer", "3")
    assert r["cpus"] >= 2, f"the writer and the reader need two CPUs, the guest has {r['cpus']}"
    assert r["markers"] > 0 and r["swaps"] > 0, \
        f"both sides must run for the race to be asked: {r}"


def test_read_of_whole_subbuffers_leaves_the_mapping_intact(trace, new_splats) -> None:
    f = trace("full-read")
    # ring_buffer_read_page() copies a full sub-buffer of a mapped buffer out instead of
    # swapping it (117c39200d9d): read() and the mapping, in turn, give each event once.
    assert f["torn"] is None, f["torn"]
    assert f["in_order"], \
        f"read() then the mapping, {f['rounds']} rounds: {f['got']} of {f['written']} events, " \
        f"{f['duplicates']} twice, {f['missing']} missing, {f['foreign']} unknown; first " \
        f"difference {f['first_mismatch']}"
    assert not new_splats(), f"kernel splats: {new_splats()}"


@pytest.mark.guest(cpus=2)
def test_a_resize_reaches_other_and_offline_cpus_and_a_refusal_undoes_them_all(
        trace) -> None:
    """ring_buffer_resize() from CPU 0 on a 2-CPU guest: CPU 1's size set through its
    per_cpu file (the swap runs as work on CPU 1); a size that fits memory once but not for
    both CPUs refused with ENOMEM (__rb_allocate_pages()'s si_mem_available() check) with
    both sizes as they were (CPU 0's new pages freed); with CPU 1 offline, the whole buffer
    and CPU 1's own size set at once; CPU 1 back online with that size, its events read.
    Sizes are compared with what CPU 0 shows for the same write (rounded up to whole
    sub-buffers). (Found unrun by ./lab coverage.)"""
    r = trace("resize-cpus")
    shown = r["shown"]  # what CPU 0 shows for 64, 32 and 48 KiB (rounded to sub-buffers)
    assert (r["other_cpu"], r["other_cpu_reads"]) == ("ok", shown["64"]), \
        f"per_cpu/cpu1/buffer_size_kb 64 from CPU 0: {r['other_cpu']}, reads " \
        f"{r['other_cpu_reads']}"
    f = r["fits_once"]
    assert f["result"] == "ENOMEM", \
        f"buffer_size_kb {f['size_kb']} (60% of MemAvailable {r['mem_available_kb']} kB, a " \
        f"CPU): {f['result']}"
    assert f["after"] == f["before"], f"sizes before {f['before']}, after {f['after']}"
    assert (r["offline"], r["online"]) == ("ok", "ok"), (r["offline"], r["online"])
    assert (r["whole_while_offline"], r["cpu1_after_whole"]) == ("ok", shown["32"]), \
        f"buffer_size_kb 32 with CPU 1 offline: {r['whole_while_offline']}, CPU 1 reads " \
        f"{r['cpu1_after_whole']}"
    assert (r["cpu1_while_offline"], r["cpu1_after_own"]) == ("ok", shown["48"]), \
        f"per_cpu/cpu1/buffer_size_kb 48 with CPU 1 offline: {r['cpu1_while_offline']}, " \
        f"reads {r['cpu1_after_own']}"
    assert r["cpu1_after_online"] == shown["48"], f"CPU 1 back online: {r['cpu1_after_online']}"
    assert r["cpu1_event"], "an event written on CPU 1 after it came back is not in its trace"


def test_a_blocking_get_reader_waits_for_data_and_a_signal_ends_the_wait(trace) -> None:
    """GET_READER on a trace_pipe_raw opened without O_NONBLOCK, buffer_percent 0: on an empty
    buffer it waits (tracing_buffers_ioctl() calls ring_buffer_wait() unless O_NONBLOCK) until
    the alarm's signal ends it with EINTR; with an event written, it returns and the
    reader sub-buffer holds the event. (Found unrun by ./lab coverage: every other test opens
    O_NONBLOCK.)"""
    r = trace("blocking-reader")
    assert r["empty"] == "EINTR" and r["empty_waited_s"] >= 0.4, \
        f"GET_READER on an empty buffer: {r['empty']} after {r['empty_waited_s']} s (the " \
        f"alarm came at 0.5 s)"
    assert r["with_data"] == "ok", \
        f"GET_READER with an event there: {r['with_data']} (EINTR: it waited 5 s)"
    assert r["marker_in_reader"], "the event written is not in the reader sub-buffer"


def test_a_snapshot_that_cannot_be_allocated_is_not_armed(trace) -> None:
    """A snapshot trigger set while the unallocated snapshot buffer is open for reading: its
    iterator keeps the buffer from being resized, so the allocation fails (EBUSY from
    ring_buffer_resize()), the trigger write returns it, and the arm is undone
    (trace_snapshot.c tracing_arm_snapshot_locked()). Closed, the trigger arms and disarms:
    the failed arm left tr->snapshot as it was (a leaked count would make the disarm WARN or
    a later mapping EBUSY). (Found unrun by ./lab coverage.)"""
    r = trace("snapshot-busy")
    assert r["freed_before"], "a new instance's `snapshot` does not say \"Snapshot is freed\""
    assert r["arm_while_open"] == "EBUSY", \
        f"arming a snapshot while `snapshot` is open: {r['arm_while_open']}"
    assert r["triggers_while_open"] == [], \
        f"the refused trigger is listed: {r['triggers_while_open']}"
    assert (r["arm_after_close"], r["disarm"], r["triggers_after"]) == ("ok", "ok", []), r


@pytest.mark.injects_allocation_failures
def test_an_allocation_failure_in_mmap_is_refused_and_leaves_nothing(trace, new_splats) -> None:
    """Mapping a CPU buffer (meta page, then the sub-buffers) with each of its allocations
    failing in turn (fail-nth, probes/fault_inject.py): ENOMEM (mmap(2)) or a mapping that
    reads what was written before it, and a refused one undone as LEFT_NOTHING says
    (ring_buffer_map()'s error path frees subbuf_ids and the meta page and drops
    resize_disabled; tracing_buffers_mmap() puts the snapshot map back), then it maps and
    reads again; no splat."""
    r = trace("alloc-failures")
    what = "mapping a CPU buffer"
    check_sweep(r["map"], what)
    wrong = []
    for a in r["map"]["attempts"]:
        at = where(what, a)
        if "reads" in a and (a["reads"], a["nr_subbufs"]) != ("ok", r["geometry"]["nr_subbufs"]):
            wrong.append(f"{at}: the mapping made reads {a['reads']} with "
                         f"{a['nr_subbufs']} sub-buffers (before: {r['geometry']})")
        left = {k: v for k, v in a["left"].items() if LEFT_NOTHING.get(k, v) != v}
        if left:
            wrong.append(f"{at}: then {left} (expected {LEFT_NOTHING}): the buffer was left "
                         f"mapped, resize-disabled or snapshot-mapped")
        if a["map_after"] != "ok":
            wrong.append(f"{at}: a good mapping afterwards {a['map_after']}")
    assert not wrong, "\n".join(wrong)
    assert not not_injected(new_splats()), f"kernel splats: {not_injected(new_splats())}"
