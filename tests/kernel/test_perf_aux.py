"""The perf AUX area: its mmap validation on any kernel, and its data path on the lab's test
PMU (kernels/modules/ringlab_aux), which writes checkable data from a timer with
perf_aux_output_begin()/perf_aux_output_end().

Observations come from probes/probe_perf_aux.py. Sources: kernel/events/core.c perf_mmap()
(the AUX branch), kernel/events/ring_buffer.c (rb_alloc_aux, perf_aux_output_*,
rb_need_aux_wakeup), include/uapi/linux/perf_event.h (aux_* fields of the control page,
PERF_RECORD_AUX, PERF_AUX_FLAG_*), seed 000, ../shared/reference/ring-buffer-abi.md section 2.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import pytest
from fault_sweep import check_sweep, not_injected, where

if TYPE_CHECKING:
    from conftest import ProbeCheck

TRUNCATED, OVERWRITE, PARTIAL, COLLISION = 0x01, 0x02, 0x04, 0x08


@pytest.fixture
def aux(probe_check: ProbeCheck) -> Callable[..., dict]:
    """aux(CHECK, *ARGS, timeout=): the observations of a check of probes/probe_perf_aux.py
    (conftest.py ProbeCheck), shared by the tests that judge them."""
    return partial(probe_check, "probe_perf_aux")


# perf_mmap(), AUX branch: each refusal and its errno.
RULES = {
    "no_data_buffer": ("EINVAL", "AUX mmap before the data buffer: !event->rb"),
    "offset_inside_data": ("EINVAL", "aux_offset < data size + control page"),
    "offset_misaligned": ("EINVAL", "aux_offset != vm_pgoff << PAGE_SHIFT"),
    "mmap_offset_differs": ("EINVAL", "the mmap offset is not aux_offset"),
    "length_differs": ("EINVAL", "aux_size != the mapping's length"),
    "not_power_of_two": ("EINVAL", "AUX pages not a power of two"),
    "read_only_control_page": ("EINVAL", "a read-only control page leaves aux_offset 0"),
}


def test_aux_mmap_validation_on_a_software_event(aux) -> None:
    v = aux("validation", "300")
    sw = v["software"]
    wrong = {k: f"expected {want} ({why}), got {sw[k]}" for k, (want, why) in RULES.items()
             if sw[k] != want}
    # rb_alloc_aux(): !has_aux(event) -> EOPNOTSUPP for a PMU without setup_aux.
    if sw["well_formed"] != "EOPNOTSUPP":
        wrong["well_formed"] = f"expected EOPNOTSUPP (no AUX support), got {sw['well_formed']}"
    assert not wrong, f"AUX mmap rules: {wrong}"
    assert v["software_consistent"], "the same requests gave other errnos in later rounds"
    assert sw["data_buffer_maps_after"] == "ok", "the data buffer must still map after them"
    assert v["vm_pin_kb"] == [0, 0], \
        f"{v['rounds']} rounds of refused AUX mmaps with perf_event_mlock_kb 0 left VmPin at " \
        f"{v['vm_pin_kb'][1]} kB: a refused mmap must charge nothing"


def test_aux_mmap_validation_on_the_test_pmu(aux, test_pmu: int) -> None:
    v = aux("validation", "50")
    t = v["test_pmu"]
    assert "skip" not in t, t
    wrong = {k: f"expected {want} ({why}), got {t[k]}" for k, (want, why) in RULES.items()
             if t[k] != want}
    if t["well_formed"] != "ok":
        wrong["well_formed"] = f"expected ok on a PMU with AUX support, got {t['well_formed']}"
    r = v["test_pmu_remap"]
    # perf_mmap(): once mapped, a further AUX mapping must have the same offset and size.
    if r != {"same": "ok", "other_size": "EINVAL", "other_offset": "EINVAL"}:
        wrong["remap"] = f"same ok, other size/offset EINVAL expected; got {r}"
    assert not wrong, f"AUX mmap rules with a real AUX area: {wrong}"
    assert v["vm_pin_kb_after_test_pmu"] == 0, "the AUX charge must come back on munmap"


def test_refused_aux_mmaps_leave_nothing_behind(aux, test_pmu: int, check,
                                                new_splats) -> None:
    """Issue 23 §4: with an AUX area mapped, perf_mmap() refuses another size or offset
    (EINVAL: "already mapped with a different size/offset"); the refusal must leave the
    buffer's counts and charges as they were. In 7.2.13 kernel/events/core.c perf_mmap_aux()
    both checks come before `refcount_inc_not_zero(&rb->mmap_count)`, so they take nothing;
    in 6.12 perf_mmap() they `goto aux_unlock` before `atomic_inc_not_zero(&rb->mmap_count)`,
    and what fails after it goes through `unlock:`'s `atomic_dec(&rb->mmap_count)` (5468c0fbccbb
    "perf/core: Don't leak AUX buffer refcount on allocation failure"). With
    perf_event_mlock_kb 0 every page is pinned_vm, so a charge kept shows in VmPin; a kept
    rb->mmap_count keeps the buffer, so its charge never comes back at the last munmap
    (perf_mmap_close(): perf_mmap_unaccount() / the locked_vm and pinned_vm subtraction run
    only when rb->mmap_count reaches 0)."""
    v = aux("validation", "50")
    r = v["test_pmu_refusals_undone"]
    for name in ("other_size", "other_offset"):
        check(f"refused-{name}", r[name] == "EINVAL",
              f"a second AUX mmap with another {name.split('_')[1]} while one is mapped: "
              f"expected EINVAL, got {r[name]}", got=r[name])
    check("vmpin-after-refusals", r["vm_pin_kb_after_refusals"] == r["vm_pin_kb_mapped"],
          f"VmPin {r['vm_pin_kb_mapped']} kB with the buffers mapped, "
          f"{r['vm_pin_kb_after_refusals']} kB after the refused AUX mmaps",
          mapped=r["vm_pin_kb_mapped"], after=r["vm_pin_kb_after_refusals"])
    check("written-after-refusals", r["written_while_mapped"] > 0,
          f"after the refusals the PMU must still write into the AUX area: aux_head "
          f"{r['written_while_mapped']}", aux_head=r["written_while_mapped"])
    check("vmpin-back-at-munmap", r["vm_pin_kb_unmapped"] == r["vm_pin_kb"][0],
          f"VmPin {r['vm_pin_kb'][0]} kB before the buffers were mapped, "
          f"{r['vm_pin_kb_unmapped']} kB once both were unmapped: a refusal kept the buffer "
          f"(rb->mmap_count) or its charge", before=r["vm_pin_kb"][0],
          unmapped=r["vm_pin_kb_unmapped"])
    check("maps-again", (r["new_size_after_unmap"], r.get("aux_maps_again")) == ("ok", "ok")
          and r.get("written_after", 0) > 0,
          f"once unmapped the event must map a new data size and an AUX area the PMU writes "
          f"into: {r}", new_size=r["new_size_after_unmap"], aux=r.get("aux_maps_again"),
          written=r.get("written_after"))
    check("vmpin-back", r["vm_pin_kb"][1] == r["vm_pin_kb"][0],
          f"VmPin {r['vm_pin_kb'][0]} kB before, {r['vm_pin_kb'][1]} kB at the end",
          before=r["vm_pin_kb"][0], after=r["vm_pin_kb"][1])
    assert not new_splats(), f"kernel splats: {new_splats()}"


@pytest.mark.parametrize("chunk", ["4096", "3000"])
def test_aux_records_tile_the_stream_and_match_the_data(aux, test_pmu: int,
                                                        chunk: str) -> None:
    d = aux("datapath")[chunk]
    assert d["records"] > 10, f"only {d['records']} PERF_RECORD_AUX in 0.8 s: {d}"
    assert d["first_offset"] == 0 and d["contiguous"], \
        f"PERF_RECORD_AUX offsets must start at 0 and follow each other: {d}"
    assert d["sum_sizes"] == d["aux_head"], \
        f"aux_head {d['aux_head']} != the sizes recorded {d['sum_sizes']}"
    assert not d["bad_words"], f"AUX data differs from what the PMU wrote at {d['bad_words']}"
    assert d["wrapped"], f"the stream must wrap the {d['aux_size']}-byte area: {d}"
    assert d["ids_ok"] and d["head_monotonic"], d
    # A reader keeping up sees no flags; if it fell behind, only the last record may be cut.
    assert set(d["flags"]) <= {0, TRUNCATED}, f"unexpected flags {d['flags']}"


def test_a_full_aux_area_is_truncated(aux, test_pmu: int) -> None:
    t = aux("truncated")
    size = t["aux_size"]
    # perf_aux_output_begin(): the space is CIRC_SPACE(head, tail, size), the size less one
    # byte; the PMU writes whole words, so it can fill size - 8 at most.
    assert t["aux_head"] == t["sum_sizes"] == size - 8, \
        f"with aux_tail never advanced the area fills to aux_size - 8 and no further: {t}"
    first = size // 3000
    assert t["truncated"] and t["truncated"][0] == first, \
        f"the chunk that did not fit (record {first}) must be TRUNCATED: {t['truncated'][:5]}"
    assert not t["bad_words"], t["bad_words"]


def test_a_truncation_stops_the_event(aux, test_pmu: int, check) -> None:
    t = aux("truncated")
    assert t["truncated"], f"the reader never advanced aux_tail, yet no record was TRUNCATED: {t}"
    # perf_aux_output_end(): PERF_AUX_FLAG_TRUNCATED disables the event (pending disable),
    # so the PMU's next chunk never comes: one TRUNCATED record, the last one.
    after = t["records"] - t["truncated"][0] - 1
    check("truncation-stops-event", len(t["truncated"]) == 1 and after == 0,
          f"after the TRUNCATED record the event went on: {after} more records, "
          f"{len(t['truncated'])} of them TRUNCATED",
          truncated=len(t["truncated"]), records_after=after, records=t["records"])
    assert not t["head_moved_after_stop"], "aux_head moved after the probe stopped"


def test_an_area_the_reader_left_full_gets_no_data_and_stops_the_event(aux, test_pmu: int,
                                                                       check) -> None:
    """aux_tail one aux_size behind aux_head (nothing consumed of a full area): perf_aux_
    output_begin() finds no room (aux_head - aux_tail >= perf_aux_size()), returns no handle,
    disables the event and wakes the reader (ring_buffer.c, "if (!handle->size)"). Nothing
    is written, no record, POLLIN; given room again the disabled event stays quiet until
    ENABLE, then the PMU writes right data. (Found unrun by ./lab coverage: the PMU's own
    truncation never leaves zero room.)"""
    f = aux("full")
    assert (f["head_while_full"], f["records_while_full"]) == (0, 0), \
        f"with no room the PMU wrote: aux_head {f['head_while_full']}, " \
        f"{f['records_while_full']} records"
    assert "POLLIN" in f["revents"], f"the reader was not woken: poll {f['revents']}"
    after = f["records_with_room_not_enabled"]
    check("full-area-stops-event", after == 0 and f["head_with_room_not_enabled"] == 0,
          f"the event found no room, yet given room without ENABLE it wrote {after} records "
          f"(aux_head {f['head_with_room_not_enabled']}): it was not disabled",
          no_room=True, truncated=0, records_after=after)
    assert f["writes_after_enable"], "after aux_tail = aux_head and ENABLE nothing was written"
    assert not f["bad_words_after"], f["bad_words_after"]


def test_pmu_flags_reach_the_record(aux, test_pmu: int) -> None:
    f = aux("flags")
    assert f == {**f, "partial": [PARTIAL], "collision": [COLLISION],
                 "both": [PARTIAL | COLLISION]}, f"PERF_RECORD_AUX.flags: {f}"


def test_overwrite_mode_keeps_the_newest_data(aux, test_pmu: int) -> None:
    o = aux("overwrite")
    # rb_alloc_aux(): a read-only AUX mapping is overwrite mode; perf_aux_output_end() sets
    # PERF_AUX_FLAG_OVERWRITE and takes aux_head from the PMU.
    assert o["aux_head"] > o["aux_size"], f"the PMU must write past the end: {o}"
    assert o["records"] and all(fl & OVERWRITE for fl in o["flags"]), o["flags"]
    assert not o["newest_bad_words"], \
        f"the newest {o['aux_size']} bytes before aux_head are wrong: {o['newest_bad_words']}"


def test_aux_watermark_wakes_the_reader(aux, test_pmu: int) -> None:
    w = aux("watermark")
    wrong = {}
    every = w["every_watermark"]
    # rb_need_aux_wakeup() sets rb->aux_wakeup = rounddown(aux_head, aux_watermark) at each
    # wakeup: with chunks smaller than the watermark, one wakeup per aux_watermark bytes of
    # aux_head, aux_head // aux_watermark in all, however far the reader keeps aux_tail.
    want = every["chunk"] * every["chunks"] // every["aux_watermark"]
    if every["aux_head"] != every["chunk"] * every["chunks"] or every["signals"] != want:
        wrong["every_watermark"] = f"{every['chunks']} chunks of {every['chunk']} bytes, " \
            f"aux_watermark {every['aux_watermark']}, aux_tail kept at aux_head: expected " \
            f"{want} wakeups (queued F_SETSIG signals), got {every}"
    for name, c in w.items():
        if not isinstance(c, dict) or name == "every_watermark":
            continue
        written = c["chunk"] * c["chunks"]
        if c["aux_head"] != written or c["truncated"]:
            wrong[name] = f"setup: the PMU's {c['chunks']} chunks must move aux_head to " \
                          f"{written} untruncated, got {c}"
            continue
        if name == "overwrite_mode":
            # rb_alloc_aux(): a read-only AUX area is overwrite mode, watermark = 0;
            # rb_need_aux_wakeup(): if (rb->aux_overwrite) return false.
            want = False
        else:
            # rb_alloc_aux(): aux_watermark 0 is nr_pages << (PAGE_SHIFT - 1), half the area;
            # rb_need_aux_wakeup(): wake once aux_head - aux_wakeup >= aux_watermark, so
            # before the area is anywhere near full (no overrun here: aux_tail stays 0).
            watermark = c["aux_watermark"] or c["aux_size"] // 2
            want = written >= watermark
        if c["pollin"] != want:
            wrong[name] = f"{written} bytes written, aux_watermark {c['aux_watermark']} " \
                          f"({c['aux_size']}-byte area): POLLIN should be {want}, " \
                          f"got {c['pollin']}"
    assert not wrong, f"aux_watermark wakeups: {wrong}"


def test_pause_output_stops_aux_records(aux, test_pmu: int) -> None:
    p = aux("pause")
    assert p["records_before"] > 0 and p["records_after"] > 0, p
    assert p["records_while_paused"] == 0, \
        f"{p['records_while_paused']} PERF_RECORD_AUX reached a paused buffer"
    # The AUX area itself is not paused: what was written meanwhile is counted as lost
    # records (one a chunk), so data and records still account for every byte.
    assert p["recorded_bytes"] + p["lost_after"] * 4096 == p["aux_head"], \
        f"recorded {p['recorded_bytes']} bytes + {p['lost_after']} lost records x 4096 != " \
        f"aux_head {p['aux_head']}"
    assert not p["bad_words"], p["bad_words"]


def test_set_output_shares_one_aux_area(aux, test_pmu: int) -> None:
    s = aux("set-output")
    assert s["set_output"] == "ok", s
    assert s["from_a"] > 0 and s["from_b"] > 0, \
        f"records of both events must reach the shared buffer: {s}"
    assert s["contiguous"] and s["sum_sizes"] == s["aux_head"] and not s["bad_words"], s


def test_concurrent_map_unmap_of_a_shared_buffer(aux, test_pmu: int,
                                                 new_splats) -> None:
    r = aux("map-unmap-race", "4")
    print(f"map/unmap race: {r}")
    assert r["set_output"] == "ok", r
    # Each step may end only as probe_perf_aux.RACE_OUTCOMES says (perf_mmap(): the same
    # size and aux_offset/aux_size for every mapping, so no rule refuses them; ENOMEM from
    # rb_alloc()/rb_alloc_aux() is the only failure mmap(2) documents for them).
    wrong = {f"{phase}: {step}": results for phase in ("buffer_held", "buffer_recreated")
             for step, results in r[phase].items()
             if set(results) - set(r["allowed"][step])}
    assert not wrong, f"outcomes outside {r['allowed']}: {wrong}"
    for phase in ("buffer_held", "buffer_recreated"):
        steps = r[phase]
        ok = {step: results.get("ok", 0) for step, results in steps.items()}
        assert ok["aux mmap"] > 0, f"{phase}: no AUX area was mapped: {steps}"
        # Every mapping made is unmapped once: as many munmaps as mmaps that succeeded.
        assert ok["aux munmap"] == ok["aux mmap"] and ok["data munmap"] == ok["data mmap"], \
            f"{phase}: mmaps and munmaps do not pair up: {steps}"
    assert all(r["aux_records_while_held"].values()), \
        f"both events must write into the held buffer's AUX areas: {r['aux_records_while_held']}"
    assert not new_splats(), f"kernel splats: {new_splats()}"


@pytest.mark.guest(cpus=2)
def test_the_aux_areas_last_munmap_beside_its_writer_leaves_no_splat(
        aux, test_pmu: int, new_splats) -> None:
    """The AUX area unmapped on one CPU while the test PMU writes into it on the other:
    perf_mmap_close() stops the writers (perf_pmu_output_stop()) before rb_free_aux() drops
    the mapping's reference, so the last reference is the mapping's and the area is freed in
    process context (kernel/events/core.c perf_mmap_close(), kernel/events/ring_buffer.c
    rb_free_aux(): WARN_ON_ONCE(refcount_read(&rb->aux_refcount)) and
    WARN_ON_ONCE(in_atomic()) in __rb_free_aux() say otherwise)."""
    r = aux("aux-unmap-beside-writer", "3")
    assert r["cpus"] >= 2, f"the unmapper and the writer need two CPUs, the guest has {r['cpus']}"
    assert set(r["maps"]) == {"ok"}, \
        f"the same AUX area mapped again and again: every mmap must succeed: {r['maps']}"
    assert r["written"] > 0, f"the writer must write while the area is there: {r}"
    assert not new_splats(), f"kernel splats: {new_splats()}"


# What poll() says of a pinned event in PERF_EVENT_STATE_ERROR, by model: (no buffer, its
# buffer mapped, a poll() waiting when enabling put it in error).
PINNED_ERROR_POLL = {
    # Namhyung Kim's "perf/core: Change to POLLERR for pinned events with error" (after
    # f4b07fd62d4d): 7.2.13 kernel/events/core.c perf_poll() "state == PERF_EVENT_STATE_ERROR
    # && event->attr.pinned ... return EPOLLERR"; merge_sched_in() queues the wakeup.
    "EPOLLERR": (["POLLERR"], ["POLLERR"], ["POLLERR"]),
    # f4b07fd62d4d "perf/core: Use POLLHUP for pinned events in error" alone: the same with
    # EPOLLHUP, which a task's exit also gives.
    "EPOLLHUP": (["POLLHUP"], ["POLLHUP"], ["POLLHUP"]),
    # Before both (6.12 perf_poll()): nothing about the error; EPOLLHUP without a buffer,
    # the buffer's rb->poll (none here) with one, and no wakeup (the waiter times out).
    "none": (["POLLHUP"], [], []),
}


def test_pinned_event_that_cannot_go_on_polls_as_the_kernel_says(aux,
                                                                  test_pmu: int) -> None:
    """Observed, not looked up by version. Pinned test-PMU events on CPU 0 that cannot go on
    (group_can_go_on(): an exclusive group cannot join the pinned event already there) are
    put in PERF_EVENT_STATE_ERROR by merge_sched_in(); read() of one is end-of-file on every
    kernel (perf_read_one(): "Return end-of-file for a read on an event that is in error
    state"). What poll() reports must be one model exactly, for all three error events; the
    healthy holder must not poll as an error."""
    e = aux("pinned-error")
    assert e["holder"] == {"read_bytes": 8, "revents": []}, \
        f"the pinned event on the PMU is healthy: read gives its 8-byte count, poll nothing; " \
        f"got {e['holder']}"
    for name in ("unmapped", "mapped", "waited"):
        assert e[name]["read_bytes"] == 0, \
            f"{name}: read() of a pinned event that could not go on must be end-of-file " \
            f"(PERF_EVENT_STATE_ERROR), got {e[name]['read_bytes']}: the check did not put it " \
            f"in error"
    assert e["waited_before_enable"] == [], \
        f"the disabled event with a mapped buffer polls as nothing before its enable: " \
        f"{e['waited_before_enable']}"
    got = (e["unmapped"]["revents"], e["mapped"]["revents"], e["waited_poll"]["revents"])
    models = [m for m, want in PINNED_ERROR_POLL.items() if got == want]
    assert models, \
        f"poll() of pinned events in error (no buffer, mapped buffer, waiting at the enable): " \
        f"{got}; none of the models {PINNED_ERROR_POLL}"
    if models[0] != "none":
        assert e["waited_poll"]["seconds"] < 2.5, \
            f"the {models[0]} model wakes a waiting poll() when the event enters error " \
            f"(merge_sched_in(): perf_event_wakeup / pending_irq); it waited " \
            f"{e['waited_poll']['seconds']} s"
    # The state poll() reports is the event's, not a stale one: it says the same afterwards.
    assert e["waited"]["revents"] == PINNED_ERROR_POLL[models[0]][1], \
        f"a mapped event in error polls {e['waited']['revents']} afterwards, the {models[0]} " \
        f"model says {PINNED_ERROR_POLL[models[0]][1]}"


def test_the_pmu_module_stays_while_mapped_and_unloads_after(probe_check, test_pmu,
                                                              guest) -> None:
    """Issue 29 (a PMU that goes away under a mapping), the part every kernel shares: each
    event holds its PMU's module (perf_init_event(): try_module_get(pmu->module); put in
    _free_event()), and a mapping holds the event after close() (perf_mmap_close() drops the
    last reference). So rmmod is refused while the AUX area is mapped, and after munmap the
    module's count is back and rmmod works: a reference a mapping path leaks keeps the module
    for good. The 7.x revoke path (perf_pmu_unregister() with events alive: ENODEV, EPOLLERR)
    needs a PMU that unregisters without unloading; ringlab_aux does not yet (docs/results)."""
    r = probe_check("probe_perf_aux", "module-unload", once=False)
    before = int(r["refcnt_before"])
    # How many references (the event's; a kernel with the AUX buffer holding its own has two)
    # is not ABI; that the mapping holds the module open or only mapped, is.
    assert int(r["refcnt_mapped"]) > before and \
        int(r["refcnt_closed_mapped"]) == int(r["refcnt_mapped"]), \
        (f"the mapped event holds its module, open or only mapped: before {before}, "
         f"mapped {r['refcnt_mapped']}, closed but mapped {r['refcnt_closed_mapped']}")
    assert r["rmmod_while_mapped"] != "ok" and r["loaded_after_refused_rmmod"], \
        f"rmmod of a PMU module with a mapped AUX area must be refused: {r['rmmod_while_mapped']}"
    assert int(r["refcnt_unmapped"]) == before, \
        f"after munmap the module's count must be back to {before}: {r['refcnt_unmapped']}"
    assert r["rmmod_after"] == "ok" and not r["loaded_after_rmmod"], \
        f"with nothing mapped rmmod must work: {r['rmmod_after']}"


@pytest.mark.guest(fresh=True)   # the module is unloaded at the end; nothing else shares it
def test_a_pmu_that_goes_away_revokes_its_mapped_events(probe_check, test_pmu) -> None:
    """Issue 29, a PMU that goes away under a mapping. 7.x (upstream v6.15, "perf: Make
    perf_pmu_unregister() useable"; 7.2.13 kernel/events/core.c): perf_pmu_unregister()
    revokes each live event (__pmu_detach_event(): PERF_EVENT_STATE_REVOKED, its module
    reference dropped) and leaves its buffers attached. Then: mmap ENODEV (perf_mmap()),
    every ioctl ENODEV (_perf_ioctl()), poll EPOLLERR and not EPOLLHUP (perf_poll()), read()
    still answering; the mappings stay, no longer written; the PMU's type gone (ENOENT from
    perf_init_event()). ringlab_aux unregisters on `echo 1 > parameters/unregister`, built
    only where the kernel's perf_event.h has PERF_EVENT_STATE_REVOKED (6.12: a skip)."""
    r = probe_check("probe_perf_aux", "revoke", once=False)
    assert r["unregister"] == "ok", f"perf_pmu_unregister() with a mapped event: {r['unregister']}"
    assert not r["pmu_in_sysfs"], "the PMU is still under /sys/bus/event_source/devices"
    assert int(r["refcnt_after"]) == int(r["refcnt_before"]) - 1, \
        f"a revoked event must drop its module reference: {r['refcnt_before']} -> {r['refcnt_after']}"
    wrong = {k: r[k] for k in ("mmap_again", "ioctl_enable", "ioctl_disable") if r[k] != "ENODEV"}
    assert not wrong, f"a revoked event's mmap and ioctls must be ENODEV: {wrong}"
    assert r["poll"] == ["POLLERR"], f"poll() of a revoked event: {r['poll']} (EPOLLERR only)"
    assert isinstance(r["read"], int), f"read() of a revoked event must still answer: {r['read']}"
    assert r["aux_head_frozen"] and r["data_head_readable"], \
        f"the mappings must stay readable and no longer written: {r}"
    assert r["open_old_type"] == "ENOENT", f"perf_event_open() of the gone type: {r['open_old_type']}"
    assert r["rmmod"] == "ok" and not r["loaded_after_rmmod"], \
        f"after munmap and close the module must unload: {r['rmmod']}"


@pytest.mark.guest(fresh=True)   # the module is unloaded; where the kernel crashes, the guest
def test_a_revoked_pmus_module_can_go_while_its_aux_area_is_mapped_safely(probe_check,
                                                                        test_pmu) -> None:
    """Issue 29, a PMU that goes away under a mapping, taken one step further: a driver
    unbinds (perf_pmu_unregister(): its events revoked, their module references dropped,
    __pmu_detach_event()), then its module is unloaded, then user space unmaps the AUX area.
    The AUX buffer kept the PMU's free_aux() (rb->free_aux, set by rb_alloc_aux(); called by
    __rb_free_aux() at the last AUX munmap). The rule: either rmmod is refused while the
    buffer lives, or the munmap does not call into the module; no splat either way. In-tree
    drivers take this path on unbind (arm_spe_pmu, hisi_ptt: modular AUX PMUs that call
    perf_pmu_unregister() from their remove)."""
    r = probe_check("probe_perf_aux", "revoke-unload", once=False)
    assert r["unregister"] == "ok", f"perf_pmu_unregister() with a mapped event: {r['unregister']}"
    assert r["survived"], f"the munmap after the module went must not crash: {r}"
    assert r.get("rmmod", r["rmmod_while_mapped"]) == "ok", \
        f"with nothing mapped the module must unload: {r}"


@pytest.fixture
def contig(aux, test_pmu: int) -> dict:
    return aux("contig")


def test_a_pmu_hears_of_every_mapping_and_unmapping(contig: dict) -> None:
    """ringlab_aux_contig has event_mapped/event_unmapped (as the x86 PMU has for rdpmc):
    perf_mmap() calls event_mapped for each mapping made, perf_mmap_open() for a VMA copied
    by mremap, perf_mmap_close() event_unmapped for each one gone (core.c). The count of
    live mappings the module keeps follows: 1, 2, still 2 after the move, 1, 0."""
    c = contig["mapped"]
    start = contig["mapped_at_start"]
    want = {"data": start + 1, "aux": start + 2, "aux_moved": start + 2,
            "aux_unmapped": start + 1, "all_unmapped": start}
    if contig["moved"] != "ok":
        want.pop("aux_moved")
        c = {k: v for k, v in c.items() if k != "aux_moved"}
    assert c == want, f"event_mapped less event_unmapped calls: {c}, expected {want} " \
                      f"(mremap of the AUX area: {contig['moved']})"
    assert contig["mapped_at_end"] == start, contig["mapped_at_end"]


def test_a_pmu_without_scatter_gather_gets_data_right_in_contiguous_blocks(contig: dict) -> None:
    """PERF_PMU_CAP_AUX_NO_SG: rb_alloc_aux() allocates the area in blocks of the watermark's
    order, and in overwrite mode as one block of the whole area (else ENOMEM). The records
    tile the stream with the PMU's data; overwrite keeps the newest bytes."""
    d = contig["datapath"]
    assert d["records"] and d["ids_ok"] and d["contiguous"] and not d["bad_words"], d
    o = contig["overwrite"]
    assert o["map"] == "ok", f"a read-only AUX area of 8 pages in one block: {o['map']}"
    assert o["aux_head"] > o["aux_size"] and not o["newest_bad_words"], o


def test_an_area_the_pmu_refuses_is_enomem_and_one_it_takes_maps(contig: dict) -> None:
    """setup_aux() returning NULL (a PMU's smallest area: 8 pages here) makes rb_alloc_aux()
    free what it allocated (__rb_free_aux()) and return ENOMEM; 8 pages map."""
    assert contig["min_pages"] == {"4": "ENOMEM", "8": "ok"}, contig["min_pages"]


def test_bytes_a_pmu_skips_are_in_aux_head_and_in_no_record(contig: dict) -> None:
    """perf_aux_output_skip() (alignment: BTS, SPE, TRBE) moves aux_head past bytes no record
    reports: each 256-byte record starts 64 bytes after the previous one ended, aux_head
    counts both, the reported bytes are the PMU's data, and the reader is woken past the
    64-byte aux_watermark."""
    k = contig["skips"]
    assert k["records"] and k["sizes"] == [k["chunk"]], k
    step = k["skip"] + k["chunk"]
    assert k["offsets"] == [k["skip"] + i * step for i in range(len(k["offsets"]))], k
    assert k["aux_head"] == k["records"] * step, k
    assert not k["bad_words"], k["bad_words"]
    assert "POLLIN" in k["revents"], f"a 64-byte aux_watermark crossed, no POLLIN: {k}"


@pytest.mark.injects_allocation_failures
def test_an_allocation_failure_mapping_the_aux_area_is_refused_and_leaves_nothing(
        aux, test_pmu: int, new_splats) -> None:
    """Mapping a 16-page AUX area of the test PMU with each of its allocations failing in
    turn (fail-nth: the page array, the pages, setup_aux()'s buffer): ENOMEM or mapped;
    then the area maps and takes the PMU's data, right, and VmPin is as before. No splat."""
    r = aux("alloc-failures")
    what = "mapping the AUX area"
    check_sweep(r["map"], what)
    wrong = []
    for a in r["map"]["attempts"]:
        at = where(what, a)
        if a.get("maps_after", "ok") != "ok" or not a["written"] or a["bad_words"]:
            wrong.append(f"{at}: then mapping {a.get('maps_after', 'ok')}, "
                         f"{a.get('written')} bytes written, bad words {a.get('bad_words')}")
        if a["vm_pin_kb"] != r["vm_pin_kb"]:
            wrong.append(f"{at}: VmPin {a['vm_pin_kb']} kB once closed, {r['vm_pin_kb']} before")
    assert not wrong, "\n".join(wrong)
    assert not not_injected(new_splats()), f"kernel splats: {not_injected(new_splats())}"


@pytest.mark.injects_allocation_failures
@pytest.mark.parametrize("call", ["data", "aux"])
def test_an_allocation_failure_on_a_pmu_that_hears_of_mappings_leaves_its_count_whole(
        aux, test_pmu: int, new_splats, call: str) -> None:
    """ringlab_aux_contig with each allocation failing in turn: the first mapping of its
    buffer where no page table is yet (perf_mmap()'s error path after map_range(): the
    event_mapped it made is undone by event_unmapped, core.c), and its read-only AUX area
    (AUX_NO_SG overwrite: one block of the whole area; rb_alloc_aux() refuses a smaller
    block the allocator fell back to). ENOMEM or made; while open, the PMU counts exactly
    the mappings made (event_mapped less event_unmapped), none once closed; a refused call
    maps on its own after; VmPin as before; no splat but the injected failures' reports."""
    r = aux("contig-alloc-failures")
    what = {"data": "the first mapping of a contig event's buffer",
            "aux": "a contig event's read-only AUX area"}[call]
    sweep = r[call]
    check_sweep(sweep, what)
    held = 1 if call == "aux" else 0     # the data mapping the AUX area needs, made by setup
    wrong = []
    for a in sweep["attempts"]:
        at = where(what, a)
        made = a["outcome"] == "ok"
        if a["mapped_while_open"] != held + made:
            wrong.append(f"{at}: the PMU counts {a['mapped_while_open']} live mapping(s) of "
                         f"the event, {held + made} were made")
        if a["mapped_after"] != 0:
            wrong.append(f"{at}: {a['mapped_after']} mapping(s) still counted once closed")
        if a.get("maps_after", "ok") != "ok":
            wrong.append(f"{at}: then mapping it: {a['maps_after']}")
        if a["vm_pin_kb"] != r["vm_pin_kb"]:
            wrong.append(f"{at}: VmPin {a['vm_pin_kb']} kB once closed, {r['vm_pin_kb']} before")
    assert not wrong, "\n".join(wrong)
    assert not not_injected(new_splats()), f"kernel splats: {not_injected(new_splats())}"
