"""The explorer's models (probes/explore_perf.py, explore_trace.py) and its shrinker
(probes/probe_explore.py) on the host, without a guest: what the ABI allows after each
step, the charges, the rings, and that a shrunk sequence keeps failing the same check."""
from __future__ import annotations

import random

import pytest

import explore_ops
import explore_remote
import explore_perf  # from probes/ (pytest's pythonpath): guest-side, stdlib only
import explore_trace
import probe_explore

PAGE = 4096


def perf(**kw: object) -> explore_perf.PerfModel:
    setup = {"page_size": PAGE, "ncpus": 1, "mlock_kb": 9 * 4, "rlimit_pages": 0,
             "who": "user", "has_pmu": True, "has_tp": True, **kw}
    return explore_perf.PerfModel("pinning", setup)


def named(model, step: dict) -> dict:
    """A step written with positional arguments (short to read), named as the model takes it."""
    return explore_ops.named(model.OPS, [step])[0]


def expect(model, step: dict) -> frozenset:
    return model.expect(named(model, step))


def traits_of(model, steps: list[dict]) -> set[str]:
    return explore_ops.traits(model, explore_ops.named(model.OPS, steps))


def run(model, steps: list[tuple]) -> list[frozenset]:
    """Each step (op, *args), numbered on from the model's earlier steps, applied with the
    model's own answer."""
    out = []
    for op, *args in steps:
        i = model.__dict__.setdefault("_n", 0)
        model._n = i + 1
        step = named(model, {"id": i, "op": op, "args": list(args)})
        assert model.valid(step), step
        allowed = model.expect(step)
        model.apply(step, "ok" if "ok" in allowed else min(allowed))
        out.append(allowed)
    return out


def test_a_second_mapping_of_a_buffer_takes_a_reference_and_charges_nothing() -> None:
    m = perf()
    run(m, [("open", "dummy"), ("mmap", "@0", 3, "rw", "shared"),
            ("mmap", "@0", 3, "rw", "shared")])
    assert m.perf_mlock == 3 and m.rbs[1].maps == 2 and "mapped-again" in m.traits
    run(m, [("munmap", "@1")])
    assert m.perf_mlock == 3, "the charge comes back at the last munmap only"
    m.unmap(2)
    assert m.perf_mlock == 0 and m.rbs == {}


@pytest.mark.parametrize("pages, share, want", [(4, "shared", "EINVAL"), (3, "private", "EINVAL"),
                                                (1, "shared", "ok"), (17, "shared", "EPERM")])
def test_a_first_mapping_answers_as_perf_mmap_does(pages: int, share: str, want: str) -> None:
    m = perf()
    run(m, [("open", "dummy")])
    assert expect(m, {"id": 1, "op": "mmap", "args": ["@0", pages, "rw", share]}) == {want}


def test_past_the_allowance_the_rest_is_pinned_within_rlimit_or_refused() -> None:
    m = perf(rlimit_pages=4)
    run(m, [("open", "dummy"), ("mmap", "@0", 9, "rw", "shared"), ("open", "dummy")])
    assert m.observe()["vm_pin_kb"] == 0
    assert run(m, [("mmap", "@2", 3, "rw", "shared")]) == [{"ok"}]
    assert m.pinned == 3 and m.observe()["vm_pin_kb"] == 12
    run(m, [("open", "dummy")])
    assert expect(m, {"id": 5, "op": "mmap", "args": ["@4", 2, "rw", "shared"]}) == {"EPERM"}


def test_cap_ipc_lock_is_exempt_from_rlimit() -> None:
    m = perf(who="user+ipc_lock")
    run(m, [("open", "dummy")])
    assert expect(m, {"id": 1, "op": "mmap", "args": ["@0", 17, "rw", "shared"]}) == {"ok"}


def test_the_aux_area_is_charged_and_refused_by_a_pmu_without_one() -> None:
    m = perf(mlock_kb=64 * 4)
    run(m, [("open", "dummy"), ("mmap", "@0", 3, "rw", "shared"), ("open", "pmu"),
            ("mmap", "@2", 3, "rw", "shared")])
    assert expect(m, {"id": 4, "op": "aux", "args": ["@0", 4]}) == {"EOPNOTSUPP"}
    assert expect(m, {"id": 4, "op": "aux", "args": ["@2", 3]}) == {"EINVAL"}
    run(m, [("aux", "@2", 4), ("aux", "@2", 4)])
    assert m.perf_mlock == 3 + 3 + 4 and "aux-mapped-again" in m.traits
    m.unmap(3)   # the data mapping first: the AUX mappings still hold the buffer
    assert m.perf_mlock == 10
    m.unmap(4)
    m.unmap(5)
    assert m.perf_mlock == 3


def test_a_revoked_pmus_events_refuse_everything_but_keep_their_buffers() -> None:
    """perf_pmu_unregister() under mapped events (7.x, mutant 059): mmap ENODEV (private still
    EINVAL first), ioctls ENODEV, poll EPOLLERR, an output set to one EINVAL, the type gone;
    the other events and every charge stay as they were."""
    m = perf(mlock_kb=64 * 4, has_revoke=True)
    run(m, [("open", "pmu", 0, 1024, 2), ("mmap", "@0", 3, "rw", "shared"), ("aux", "@0", 4),
            ("open", "dummy"), ("mmap", "@3", 3, "rw", "shared")])
    locked = m.perf_mlock
    assert run(m, [("revoke",)]) == [{"ok"}]
    assert not m.valid({"id": 9, "op": "revoke", "args": {}}), "once: the PMU is gone"
    assert m.events[0].revoked and not m.events[3].revoked and m.perf_mlock == locked
    assert expect(m, {"id": 9, "op": "mmap", "args": ["@0", 3, "rw", "shared"]}) == {"ENODEV"}
    assert expect(m, {"id": 9, "op": "mmap", "args": ["@0", 3, "rw", "private"]}) == {"EINVAL"}
    assert expect(m, {"id": 9, "op": "aux", "args": ["@0", 4]}) == {"ENODEV"}
    assert expect(m, {"id": 9, "op": "poll", "args": ["@0"]}) == {"err"}
    assert expect(m, {"id": 9, "op": "set-output", "args": ["@0", "none"]}) == {"ENODEV"}
    assert expect(m, {"id": 9, "op": "set-output", "args": ["@3", "@0"]}) == {"EINVAL"}
    assert expect(m, {"id": 9, "op": "open", "args": ["pmu"]}) == {"ENOENT"}
    assert expect(m, {"id": 9, "op": "open", "args": ["dummy"]}) == {"ok"}
    assert expect(m, {"id": 9, "op": "open", "args": ["dummy", 0, 4096, 0, "@0"]}) == \
        {"ENODEV"}, "a revoked group_fd, before anything else (7.2.13 perf_event_open())"
    assert expect(m, {"id": 9, "op": "open", "args": ["pmu", 0, 4096, 0, "@0"]}) == {"ENODEV"}
    assert not m.valid({"id": 9, "op": "aux-run", "args": {"event": "@0"}})
    assert expect(m, {"id": 9, "op": "mmap", "args": ["@3", 3, "rw", "shared"]}) == {"ok"}
    m.unmap(1)
    m.unmap(2)
    assert m.perf_mlock == 3, "a revoked event's buffer gives its charge back at munmap"


def test_revoke_is_drawn_only_with_a_test_pmu_event_where_the_module_can_unregister() -> None:
    m = perf(has_revoke=False)
    run(m, [("open", "pmu")])
    assert not m.valid({"id": 1, "op": "revoke", "args": {}})
    m = perf(has_revoke=True)
    assert explore_perf.REVOKE.draw(m, random.Random(0)) == []
    run(m, [("open", "pmu")])
    assert explore_perf.REVOKE.draw(m, random.Random(0)) == [(0.5, {})]


def test_an_aux_area_goes_past_the_data_at_the_offset_it_names() -> None:
    m = perf(mlock_kb=64 * 4)
    run(m, [("open", "pmu"), ("mmap", "@0", 3, "rw", "shared")])
    aux = lambda where: expect(m, {"id": 9, "op": "aux", "args": ["@0", 4, where]})  # noqa: E731
    assert aux("overlap") == {"EINVAL"}, "over the data: aux_offset < data size + a page"
    assert aux("unaligned") == {"EINVAL"}, "aux_offset is not the offset mapped"
    assert aux("gap") == {"ok"} and aux("after") == {"ok"}
    run(m, [("aux", "@0", 4, "gap")])
    assert m.rbs[1].aux_offset == 4 * PAGE
    assert aux("after") == {"EINVAL"}, "already mapped at another offset"
    assert aux("gap") == {"ok"}


def test_the_test_pmus_chunks_fill_the_aux_area_and_the_last_is_truncated() -> None:
    m = explore_perf.PerfModel("perf-aux", perf(mlock_kb=64 * 4).setup)
    run(m, [("open", "pmu", 0, 3000, 8), ("mmap", "@0", 3, "rw", "shared"),
            ("aux", "@0", 2), ("aux-run", "@0")])
    # 8192 bytes, 8191 free: two chunks of 3000, then 2191 free, cut to 2184 and TRUNCATED
    assert m.observe()["aux@1"] == {"aux_vma": 2, "aux_head": 8184,
                                    "records": [[3000, 0], [3000, 0], [2184, 1]],
                                    "data_ok": True}
    assert not m.valid(named(m, {"id": 9, "op": "aux-run", "args": ["@0"]})), "run once"
    run(m, [("poll", "@0")])
    assert "aux@1" not in m.observe(), "checked right after the run only"


def test_the_aux_watermark_wakes_a_poll_once_half_the_area_is_written() -> None:
    """rb_alloc_aux(): aux_watermark 0 is half the area; rb_need_aux_wakeup() wakes once
    aux_head is that far past the last wake-up (mutant 028 makes it the whole area)."""
    def polled(chunk: int, budget: int, pages: int) -> frozenset:
        m = explore_perf.PerfModel("perf-aux", perf(mlock_kb=64 * 4).setup)
        run(m, [("open", "pmu", 0, chunk, budget), ("mmap", "@0", 3, "rw", "shared"),
                ("aux", "@0", pages), ("aux-run", "@0")])
        return run(m, [("poll", "@0")])[0]
    assert polled(1024, 4, 2) == {"in"}, "4096 bytes: half of 8192"
    assert polled(1024, 2, 2) == {"none"}, "2048 bytes: under half"
    assert polled(3000, 4, 2) == {"in"}, "the TRUNCATED chunk wakes too"
    m = explore_perf.PerfModel("perf-aux", perf(mlock_kb=64 * 4).setup)
    run(m, [("open", "pmu", 0, 3000, 2), ("mmap", "@0", 3, "rw", "shared"),
            ("aux", "@0", 2), ("aux-run", "@0"), ("poll", "@0")])
    assert run(m, [("poll", "@0")])[0] == {"none"}, "a poll takes the wake-up"


def test_an_open_with_perf_flag_fd_output_lands_in_the_targets_buffer() -> None:
    """perf_event_open() runs perf_event_set_output() for PERF_FLAG_FD_OUTPUT: EINVAL while
    the target has no mapped buffer, else the new event's samples go to the target's ring."""
    m = perf(mlock_kb=129 * 4)
    run(m, [("open", "dummy")])
    assert expect(m, {"id": 1, "op": "open", "args": ["tp", 0, 4096, 0, "@0"]}) == {"EINVAL"}
    run(m, [("mmap", "@0", 2, "rw", "shared"), ("open", "tp", 0, 4096, 0, "@0"), ("fire", 3)])
    assert m.events[2].rb == m.events[0].rb and "output-redirected" in m.traits
    assert m.observe()["ring@1"] == {"head": 96, "samples": 3, "lost": 0}
    assert not m.mappable("@2"), "a redirected event is not mapped (kernels differ)"


def test_a_read_only_aux_area_is_overwritten_and_wakes_nobody() -> None:
    m = explore_perf.PerfModel("perf-aux", perf(mlock_kb=64 * 4).setup)
    run(m, [("open", "pmu", 0, 3000, 8), ("mmap", "@0", 3, "rw", "shared"),
            ("aux", "@0", 2, "after", "r"), ("aux-run", "@0")])
    assert m.observe()["aux@1"] == {"aux_vma": 2, "aux_head": 24000,
                                    "records": [[3000, 2]] * 8, "data_ok": True}
    assert run(m, [("poll", "@0")])[0] == {"none"}, "rb_need_aux_wakeup(): not in overwrite"
    assert expect(m, {"id": 9, "op": "aux", "args": ["@0", 2, "after", "rw"]}) == {"ok"}, \
        "a second mapping of either protection: the same size"


def test_a_writable_ring_stops_at_the_tail_and_reports_what_it_lost() -> None:
    m = perf(mlock_kb=129 * 4)
    run(m, [("open", "tp"), ("mmap", "@0", 2, "rw", "shared"), ("fire", 150)])
    capacity = (PAGE - 1) // 32
    assert m.observe()["ring@1"] == {"head": capacity * 32, "samples": capacity, "lost": 0}
    run(m, [("consume", "@1"), ("fire", 1)])
    assert m.observe()["ring@1"] == {"head": capacity * 32 + 24 + 32, "samples": 1,
                                     "lost": 150 - capacity}


def test_a_read_only_ring_overwrites_and_one_page_records_nothing() -> None:
    m = perf(mlock_kb=129 * 4)
    run(m, [("open", "tp"), ("mmap", "@0", 2, "r", "shared"), ("open", "tp"),
            ("mmap", "@2", 1, "rw", "shared"), ("fire", 150)])
    assert m.observe()["ring@1"] == {"head": 150 * 32}
    assert m.observe()["ring@3"] == {"head": 0, "samples": 0, "lost": 0}


def test_an_event_lives_while_a_mapping_holds_it() -> None:
    m = perf()
    run(m, [("open", "dummy"), ("mmap", "@0", 3, "rw", "shared"), ("close", "@0")])
    assert 0 in m.events
    run(m, [("munmap", "@1")])
    assert m.events == {} and m.perf_mlock == 0


@pytest.mark.parametrize("path", ["pinning", "perf-ring", "perf-aux"])
def test_generated_perf_sequences_are_valid_and_seed_stable(path: str) -> None:
    def sequence(seed: int) -> list[dict]:
        m = explore_perf.PerfModel(path, dict(perf().setup))
        rng, steps = random.Random(seed), []
        for i in range(40):
            step = dict(m.choose(rng, i), id=i)
            assert m.valid(step)
            allowed = m.expect(step)
            m.apply(step, "ok" if "ok" in allowed else min(allowed))
            steps.append(step)
        return steps
    assert sequence(3) == sequence(3) != sequence(4)


def test_a_paused_ring_loses_what_fires_and_says_so_after_the_resume() -> None:
    m = perf()
    assert run(m, [("open", "tp"), ("pause", "@0", 1)])[1] == {"EINVAL"}, "no buffer yet"
    run(m, [("mmap", "@0", 2, "rw", "shared"), ("pause", "@0", 1), ("fire", 4)])
    assert m.observe()["ring@2"] == {"head": 0, "samples": 0, "lost": 0}
    run(m, [("pause", "@0", 0), ("fire", 1)])
    assert m.observe()["ring@2"] == {"head": explore_perf.SAMPLE + explore_perf.LOST_RECORD,
                                     "samples": 1, "lost": 4}


def test_poll_is_hup_without_a_buffer_and_in_past_half_the_data_by_default() -> None:
    m = perf(mlock_kb=129 * 4)
    poll = lambda e: expect(m, {"id": 99, "op": "poll", "args": [e]})  # noqa: E731
    run(m, [("open", "tp")])
    assert poll("@0") == {"hup"}, "perf_poll(): EPOLLHUP until the event has a buffer"
    run(m, [("mmap", "@0", 2, "rw", "shared"), ("fire", 64)])
    assert poll("@0") == {"none"}, "2048 bytes: not past half of the 4096"
    run(m, [("fire", 1)])
    assert poll("@0") == {"in"}
    run(m, [("poll", "@0")])
    assert poll("@0") == {"none"}, "a poll takes the wake-up"
    run(m, [("fire", 200)])          # the ring fills at 127: the rest is lost, wakes nobody
    assert poll("@0") == {"none"}


def test_fires_just_past_the_next_wakeup_are_offered() -> None:
    m = perf(mlock_kb=129 * 4)
    run(m, [("open", "tp", 1000), ("mmap", "@0", 2, "rw", "shared"), ("fire", 4)])
    assert m.wakes() == (28,), "1000 bytes past 0: the 32nd sample; 4 fired"
    run(m, [("fire", 28)])
    assert expect(m, {"id": 9, "op": "poll", "args": ["@0"]}) == {"in"}


def test_a_wakeup_watermark_wakes_past_its_bytes_and_an_overwriting_ring_wakes_again() -> None:
    m = perf(mlock_kb=129 * 4)
    run(m, [("open", "tp", 256), ("mmap", "@0", 2, "r", "shared"), ("fire", 8)])
    assert expect(m, {"id": 3, "op": "poll", "args": ["@0"]}) == {"none"}, "256 bytes: not past"
    run(m, [("fire", 1), ("poll", "@0"), ("fire", 7)])
    # a wake-up moves rb->wakeup by one watermark (256), not to the head (288): the next
    # comes at 256 + 256 bytes past it, the 17th record
    assert expect(m, {"id": 6, "op": "poll", "args": ["@0"]}) == {"none"}
    run(m, [("fire", 1), ("poll", "@0"), ("fire", 200)])   # an overwriting ring never stops
    assert expect(m, {"id": 10, "op": "poll", "args": ["@0"]}) == {"in"}
    assert m.rbs[1].watermark == 256


def test_set_output_sends_samples_to_a_mapped_buffer_and_refuses_the_rest() -> None:
    m = perf(mlock_kb=129 * 4)
    so = lambda e, t, i=99: expect(m, {"id": i, "op": "set-output", "args": [e, t]})  # noqa: E731
    run(m, [("open", "dummy"), ("open", "tp")])
    assert so("@1", "@0") == {"EINVAL"}, "the target has no buffer"
    run(m, [("mmap", "@0", 2, "rw", "shared")])
    assert so("@1", "@1") == {"EINVAL"}, "to itself"
    assert so("@0", "none") == {"EINVAL"}, "the event has its own mapping"
    assert so("@0", "@1") == {"EINVAL"}
    run(m, [("set-output", "@1", "@0"), ("fire", 3)])
    assert m.observe()["ring@2"] == {"head": 96, "samples": 3, "lost": 0}, \
        "the tracepoint's samples land in the dummy event's buffer"
    assert "output-redirected" in m.traits
    assert not m.valid(named(m, {"id": 9, "op": "mmap", "args": ["@1", 2, "rw", "shared"]})), \
        "a redirected event is not mapped: kernels differ"
    run(m, [("munmap", "@2")])
    assert m.events[1].rb is None and not m.events[1].redirected, "the last munmap detaches all"
    assert so("@1", "none") == {"ok"}


def test_every_mapped_buffer_says_where_its_data_is() -> None:
    m = perf()
    run(m, [("open", "dummy"), ("mmap", "@0", 3, "rw", "shared"), ("open", "dummy"),
            ("mmap", "@2", 1, "r", "shared")])
    assert m.observe()["ctl@1"] == {"data_offset": PAGE, "data_size": 2 * PAGE}
    assert m.observe()["ctl@3"] == {"data_offset": PAGE, "data_size": 0}


def test_a_paused_overwriting_ring_also_writes_the_lost_record() -> None:
    m = perf()
    run(m, [("open", "tp"), ("mmap", "@0", 2, "r", "shared"), ("pause", "@0", 1), ("fire", 3),
            ("pause", "@0", 0), ("fire", 2)])
    assert m.observe()["ring@1"] == {"head": 2 * explore_perf.SAMPLE + explore_perf.LOST_RECORD}
    m = perf()
    assert run(m, [("open", "tp"), ("mmap", "@0", 1, "rw", "shared"), ("pause", "@0", 1)]
               )[2] == {"EINVAL"}, "no data pages"


def trace(**kw: object) -> explore_trace.TraceModel:
    return explore_trace.TraceModel("trace-mmap", {"buffer_kb": 8, "subbuf_kb": 4, "ncpus": 2,
                                                   "has_snapshot": True, "has_subbuf": True, **kw})


def test_trace_writes_are_refused_while_any_cpu_is_mapped() -> None:
    m = trace()
    run(m, [("open", 1), ("mmap", "@0", "meta", "r", "shared")])
    assert expect(m, {"id": 2, "op": "resize", "args": [16]}) == {"EBUSY"}
    assert expect(m, {"id": 2, "op": "subbuf", "args": [8]}) == {"EBUSY"}
    assert expect(m, {"id": 2, "op": "subbuf", "args": [4]}) == {"ok"}, "the size in use"
    assert expect(m, {"id": 2, "op": "snapshot", "args": [1]}) == {"EBUSY"}
    assert expect(m, {"id": 2, "op": "snapshot", "args": [0]}) == {"ok"}
    assert expect(m, {"id": 2, "op": "get-reader", "args": ["@0"]}) == {"ok"}
    run(m, [("open", 0)])
    assert expect(m, {"id": 3, "op": "get-reader", "args": ["@2"]}) == {"ENODEV"}
    run(m, [("munmap", "@1")])
    assert expect(m, {"id": 4, "op": "resize", "args": [16]}) == {"ok"}


@pytest.mark.parametrize("prot, share, want", [("r", "shared", "ok"), ("rw", "shared", "EACCES"),
                                               ("rw", "private", "EPERM"),
                                               ("r", "private", "EPERM")])
def test_trace_mappings_are_read_only_and_shared(prot: str, share: str, want: str) -> None:
    m = trace()
    run(m, [("open", 0)])
    assert expect(m, {"id": 1, "op": "mmap", "args": ["@0", "all", prot, share]}) == {want}


@pytest.mark.parametrize("mode, prot, want", [("r", "rx", "EPERM"), ("rw", "rw", "EPERM"),
                                              ("rw", "r", "ok"), ("r", "rw", "EACCES")])
def test_trace_mappings_are_never_writable_or_executable(mode: str, prot: str, want: str
                                                         ) -> None:
    m = trace()
    run(m, [("open", 0, mode)] if mode == "rw" else [("open", 0)])
    assert expect(m, {"id": 1, "op": "mmap", "args": ["@0", "meta", prot, "shared"]}) == {want}


@pytest.mark.parametrize("subbuf_kb, off", [(4, "ok"), (8, "EINVAL")])
def test_a_trace_mapping_is_no_longer_than_the_buffer_and_starts_on_a_subbuf(
        subbuf_kb: int, off: str) -> None:
    m = trace(subbuf_kb=subbuf_kb, page_size=4096)
    run(m, [("open", 0)])
    assert expect(m, {"id": 1, "op": "mmap", "args": ["@0", "past", "r", "shared"]}) == {"EINVAL"}
    assert expect(m, {"id": 1, "op": "mmap", "args": ["@0", "off", "r", "shared"]}) == {off}
    assert expect(m, {"id": 1, "op": "mmap", "args": ["@0", "past", "rx", "shared"]}) == {"EPERM"}
    if off == "ok":
        run(m, [("mmap", "@0", "off", "r", "shared"), ("write", 3), ("get-reader", "@0")])
        assert m.observe() == {}, "no meta page in that mapping to read"
        assert expect(m, {"id": 4, "op": "resize", "args": [16]}) == {"EBUSY"}


def test_a_trace_mapping_never_grows_splits_or_becomes_writable() -> None:
    m = trace()
    run(m, [("open", 0, "rw"), ("mmap", "@0", "all", "r", "shared")])
    want = {"grow": "EFAULT", "shrink": "EINVAL", "dontunmap": "EINVAL"}
    for how, errno in want.items():
        assert expect(m, {"id": 2, "op": "mremap", "args": ["@1", how]}) == {errno}
    assert expect(m, {"id": 2, "op": "mprotect", "args": ["@1"]}) == {"EACCES"}
    assert expect(m, {"id": 2, "op": "ioctl", "args": ["@0"]}) == {"ENOTTY"}
    run(m, [("mremap", "@1", "grow")])
    assert "moved" not in m.traits, "only a move is the known issue's trait"


def test_a_new_subbuf_size_over_events_is_a_trait_known_issues_bind() -> None:
    m = trace()
    run(m, [("open", 0), ("subbuf", 8)])
    assert "subbuf-changed-with-events" not in m.traits, "nothing written yet"
    run(m, [("write", 1), ("subbuf", 8), ("subbuf", 4)])
    assert "subbuf-changed-with-events" in m.traits
    assert expect(m, {"id": 9, "op": "read", "args": ["@0"]}) == {"ok", "EAGAIN"}


def test_a_read_of_trace_pipe_raw_is_eagain_where_nothing_was_written() -> None:
    m = trace()
    run(m, [("open", 0), ("open", 1), ("mmap", "@0", "meta", "r", "shared")])
    assert expect(m, {"id": 3, "op": "read", "args": ["@0"]}) == {"EAGAIN"}, "empty"
    run(m, [("write", 10)])
    assert expect(m, {"id": 5, "op": "read", "args": ["@0"]}) == {"ok", "EAGAIN"}
    assert expect(m, {"id": 5, "op": "read", "args": ["@1"]}) == {"EAGAIN"}, "CPU 1: none"
    run(m, [("read", "@0"), ("get-reader", "@0")])
    assert m.observe()["meta@2"] == {"subbuf_size": 4096, "entries": 10, "read": 10,
                                     "overrun": 0}, \
        "a read() does not take events out of the count the meta page gives, and counts as read"
    assert "read-while-mapped" in m.traits


def test_after_get_reader_the_reader_subbuf_is_consumed_and_counted() -> None:
    m = trace()
    run(m, [("open", 0), ("mmap", "@0", "all", "r", "shared"), ("write", 10),
            ("get-reader", "@0")])
    assert m.observe() == {"meta@1": {"subbuf_size": 4096, "entries": 10, "read": 10,
                                      "overrun": 0},
                           "subbuf@1": {"reader_commit_is_read": True, "missed": False}}
    run(m, [("write", 60), ("get-reader", "@0")])
    assert m.observe()["meta@1"] == {"subbuf_size": 4096, "entries": 70}, \
        "70 events may not fit in one 4 KiB sub-buffer: read and overrun are not known"
    run(m, [("write", 1)])
    assert m.observe() == {"meta@1": {"subbuf_size": 4096}}, "only right after GET_READER"


def test_whoever_takes_events_is_checked_for_each_one_once() -> None:
    """Mutant 042 (read() swaps a mapped reader page) shows only as an event taken twice or
    skipped uncounted: after a read() of CPU 0 and after a GET_READER that reads the reader
    sub-buffer through a whole mapping (`via`), the events check."""
    m = trace()
    run(m, [("open", 0), ("open", 1), ("mmap", "@0", "meta", "r", "shared")])
    assert GET_READER_VIA(m) == {"@0": None, "@1": None}, "no sub-buffer mapped: nothing to read"
    run(m, [("mmap", "@0", "all", "r", "shared")])
    assert GET_READER_VIA(m) == {"@0": "@3", "@1": None}, "CPU 1's reader is not CPU 0's"
    assert not m.valid({"id": 4, "op": "get-reader", "args": {"fd": "@1", "via": "@3"}})
    assert not m.valid({"id": 4, "op": "get-reader", "args": {"fd": "@0", "via": "@2"}}), \
        "the meta page alone shows no sub-buffer"
    run(m, [("write", 60), ("get-reader", "@0", "@3")])
    assert m.observe()["events@3"] == {"twice": 0, "unaccounted": 0}
    run(m, [("write", 10)])
    assert "events@3" not in m.observe(), "only right after a reader took events"
    run(m, [("read", "@0")])
    assert m.observe()["events@0"] == {"twice": 0, "unaccounted": 0}
    run(m, [("get-reader", "@0")])
    assert not any(k.startswith("events") for k in m.observe()), "taken unseen: forgotten"
    assert explore_trace.GET_READER.simpler({"fd": "@0", "via": "@3"}) == [
        {"fd": "@0", "via": None}]
    run(m, [("write", 1000), ("drain", "@0", "@3")])
    assert m.observe()["events@3"] == {"twice": 0, "unaccounted": 0}
    assert m.observe()["subbuf@3"] == {"reader_commit_is_read": True}, \
        "the loss was the drain's first swap's to say, not its last's"
    assert not m.valid({"id": 9, "op": "drain", "args": {"fd": "@1", "via": "@3"}}), "CPU 1"


def test_after_a_refused_mapping_the_writes_it_forbade_are_drawn_more() -> None:
    """A refusal must give back what the mapping took (mutant 045: the snapshot stays
    refused): with nothing mapped after one, resize, subbuf and snapshot are drawn 3x."""
    rng = random.Random(0)
    weight = lambda m: explore_trace.SNAPSHOT.draw(m, rng)[0][0]  # noqa: E731
    m = trace()
    run(m, [("open", 0)])
    plain = weight(m)
    m.apply({"id": 1, "op": "mmap", "args": {"fd": "@0", "what": "past", "prot": "r",
                                             "share": "shared"}}, "EINVAL")
    assert weight(m) == 3 * plain
    assert explore_trace.PERCENT.draw(m, rng)[0][0] == 0.7, "not a write a mapping forbids"
    run(m, [("mmap", "@0", "meta", "r", "shared")])
    assert weight(m) == plain, "mapped again: nothing to give back"


def test_half_the_sequences_open_as_a_consumer_of_cpu0() -> None:
    """Open, mmap of all of CPU 0's buffer, then the draws: the reader and the writer have
    the rest of the sequence to go round the ring (mutant 042)."""
    starts = []
    for seed in range(40):
        rng, m = random.Random(seed), trace()
        first = [m.choose(rng, 0)]
        run(m, [(first[0]["op"], *first[0]["args"].values())])
        first.append(m.choose(rng, 1))
        starts.append(first)
    opened = starts.count(list(explore_trace.OPENING))
    assert 10 < opened < 30, "about half, where a draw of its own makes it 1 in 25"


def GET_READER_VIA(m: explore_trace.TraceModel) -> dict:
    return {d["fd"]: d["via"] for _, d in explore_trace.GET_READER.draw(m, random.Random(0))}


def test_a_writer_that_went_round_the_ring_shows_overrun_and_the_missed_flag() -> None:
    """8 KiB in 4 KiB sub-buffers is at most 3 sub-buffers and the reader's: 1000 events of
    at least 28 bytes go round it (mutants 031: overrun never published, 040: the
    RB_MISSED_EVENTS flag dropped)."""
    m = trace()
    run(m, [("open", 0), ("mmap", "@0", "all", "r", "shared"), ("write", 1000),
            ("get-reader", "@0")])
    assert m.observe() == {"meta@1": {"subbuf_size": 4096, "entries": 1000, "overran": True},
                           "subbuf@1": {"reader_commit_is_read": True, "missed": True}}
    run(m, [("write", 1), ("get-reader", "@0")])
    assert m.observe()["meta@1"]["overran"] is True, "overrun only grows"
    assert "missed" not in m.observe()["subbuf@1"], "the loss was the last swap's to report"
    m = trace()
    run(m, [("open", 0), ("mmap", "@0", "all", "r", "shared"), ("write", 60), ("write", 10),
            ("get-reader", "@0")])
    assert "overran" not in m.observe()["meta@1"] and "missed" not in m.observe()["subbuf@1"], \
        "70 events: not known to fit one sub-buffer, not known to go round the ring"
    run(m, [("write", 1000), ("get-reader", "@0")])
    assert m.observe() == {"meta@1": {"subbuf_size": 4096, "entries": 1070, "overran": True},
                           "subbuf@1": {"reader_commit_is_read": True}}, \
        "the reader may be on the writer's page: this GET_READER may take the rest of it " \
        "without a swap, and the flag waits for the next swap (7.2.13, seed 51)"
    big = trace(buffer_kb=128)
    run(big, [("open", 0), ("mmap", "@0", "all", "r", "shared"), ("write", 1000),
              ("get-reader", "@0")])
    assert "overran" not in big.observe()["meta@1"], "1000 events may fit 128 KiB"


def test_the_ring_is_gone_round_and_swapped_more_often_under_a_whole_mapping() -> None:
    """Mutant 040 (the missed-events flag dropped) needs a whole mapping, `write 1000`, then
    GET_READER: the draw leans that way once the first two hold, and only then."""
    rng = random.Random(0)
    weights = lambda m: {d["fd"]: w for w, d in explore_trace.GET_READER.draw(m, rng)}  # noqa: E731
    m = trace()
    run(m, [("open", 0), ("mmap", "@0", "meta", "r", "shared")])
    assert explore_trace._write_counts(m) == {1: 3, 10: 3, 60: 3, 1000: 1}, "no sub-buffer mapped"
    run(m, [("mmap", "@0", "all", "r", "shared")])
    assert explore_trace._write_counts(m)[1000] == 3
    assert weights(m) == {"@0": 2}
    run(m, [("write", 1000)])
    assert weights(m) == {"@0": 6}, "the writer went round: the swap that must say so"
    run(m, [("get-reader", "@0")])
    assert weights(m) == {"@0": 2}


def test_a_write_can_go_round_a_small_ring_that_1000_events_do_not() -> None:
    """8 KiB in 8 KiB sub-buffers is 3 sub-buffers: 1000 events of 28 bytes may fit; the
    draw offers just enough to go round it, and never more than WRAP_WRITE_MAX."""
    m = trace(subbuf_kb=8)
    run(m, [("open", 0), ("mmap", "@0", "all", "r", "shared")])
    n = m.events_to_wrap()
    assert 1000 < n <= explore_trace.WRAP_WRITE_MAX and explore_trace._write_counts(m)[n] == 3
    run(m, [("write", n - 1)])
    assert not m.wrapped()
    run(m, [("write", 1)])
    assert m.wrapped()
    assert max(explore_trace._write_counts(trace(buffer_kb=128))) == 1000, "too big to go round"


def test_a_subbuf_write_is_read_back_as_the_size_in_use() -> None:
    """Mutant 054 publishes a refused buffer_subbuf_size_kb (EBUSY while mapped): right after
    such a write the file must read the size still in use; after a taken one, the new size."""
    m = trace()
    run(m, [("open", 0), ("mmap", "@0", "meta", "r", "shared")])
    assert "tracefs@0" not in m.observe()
    assert run(m, [("subbuf", 8)]) == [{"EBUSY"}]
    assert m.observe()["tracefs@0"] == {"buffer_subbuf_size_kb": 4}
    run(m, [("write", 1)])
    assert "tracefs@0" not in m.observe(), "only right after the write of the file"
    run(m, [("munmap", "@1"), ("subbuf", 8)])
    assert m.observe() == {"tracefs@0": {"buffer_subbuf_size_kb": 8}}


def test_an_instance_is_not_removed_while_its_buffer_is_open_or_mapped() -> None:
    """tr->ref counts every open trace_pipe_raw, and a mapping holds its file after the fd's
    close: rmdir is drawn only then (an instance removed would end the sequence's world)."""
    m = trace()
    assert not explore_trace.RMDIR.pre(m, {}), "nothing open: rmdir would remove it"
    run(m, [("open", 0)])
    assert run(m, [("rmdir",)]) == [{"EBUSY"}]
    run(m, [("mmap", "@0", "meta", "r", "shared"), ("close", "@0")])
    assert explore_trace.RMDIR.pre(m, {}) and run(m, [("rmdir",)]) == [{"EBUSY"}]
    run(m, [("munmap", "@2")])
    assert not explore_trace.RMDIR.pre(m, {})


def test_a_forgotten_tally_drops_what_it_skipped_with_the_buffer_that_counted_it() -> None:
    """write 1000, read (events skipped, counted in stats' overrun), snapshot (the stats are
    now the swapped-in buffer's), write 1, read: nothing unaccounted (7.2.13, round 10)."""
    t = explore_trace.Tally(marks=1000)
    t.seen(683, True)
    assert t.unaccounted({"overrun": "682"}) == 0
    t.forget({"overrun": "0"})
    t.marks += 1
    t.seen(1001, True)
    assert t.unaccounted({"overrun": "0"}) == 0 and t.twice == 0


def test_after_a_resize_losses_are_counted_from_what_the_stats_said_then() -> None:
    """A resize keeps the buffer's counts: the 682 lost before it excuse no gap after it."""
    t = explore_trace.Tally(marks=1000)
    t.seen(683, True)
    t.forget({"overrun": "682"})
    t.marks += 10
    t.seen(1010, True)      # 1001-1009 skipped, none counted since
    assert t.unaccounted({"overrun": "682"}) == 9
    assert t.unaccounted({"overrun": "691"}) == 0


def test_an_armed_snapshot_trigger_and_a_mapping_exclude_each_other() -> None:
    """map_test.c's snapshot case both ways (mutants 061, 062): a mapping while armed is
    EBUSY before any check of its own (EACCES is the VFS's, before the driver), arming while
    mapped is EBUSY, a second trigger EEXIST, a removal 0 whether or not one is there."""
    m = trace(has_trigger=True)
    assert run(m, [("trigger", "disarm"), ("trigger", "arm"), ("trigger", "arm")]) == \
        [{"ok"}, {"ok"}, {"EEXIST"}]
    run(m, [("open", 0, "r"), ("open", 0, "rw")])
    assert expect(m, {"id": 5, "op": "mmap", "args": ["@3", "all", "r", "shared"]}) == {"EBUSY"}
    assert expect(m, {"id": 5, "op": "mmap", "args": ["@3", "past", "r", "private"]}) == \
        {"EBUSY"}
    assert expect(m, {"id": 5, "op": "mmap", "args": ["@3", "meta", "rw", "shared"]}) == \
        {"EACCES"}
    assert expect(m, {"id": 5, "op": "mmap", "args": ["@4", "meta", "rw", "shared"]}) == \
        {"EBUSY"}
    run(m, [("trigger", "disarm"), ("mmap", "@3", "meta", "r", "shared")])
    assert run(m, [("trigger", "arm")]) == [{"EBUSY"}]
    run(m, [("munmap", "@6")])
    assert run(m, [("trigger", "arm")]) == [{"ok"}]


def test_a_snapshot_trigger_is_drawn_only_where_the_instance_has_one() -> None:
    assert not trace().valid({"id": 0, "op": "trigger", "args": {"action": "arm"}})
    m = trace(has_trigger=True)
    assert m.valid({"id": 0, "op": "trigger", "args": {"action": "arm"}})
    rng = random.Random(1)
    assert max(explore_trace.TRIGGER_OP.draw(m, rng))[1] == {"action": "arm"}
    run(m, [("trigger", "arm")])
    assert max(explore_trace.TRIGGER_OP.draw(m, rng))[1] == {"action": "disarm"}


def test_a_persistent_buffer_at_a_fixed_address_or_a_backup_copy_never_maps() -> None:
    """mutant 055: each is ENODEV, drawn only where the guest was booted with it."""
    m = trace(has_fixed=True)
    assert run(m, [("persistent", "fixed")]) == [{"ENODEV"}]
    assert not m.valid({"id": 1, "op": "persistent", "args": {"which": "copy"}})
    assert explore_trace.PERSISTENT_OP.draw(m, random.Random(0)) == [(0.3, {"which": "fixed"})]
    assert explore_trace.PERSISTENT_OP.draw(trace(), random.Random(0)) == []


def test_the_explorers_guests_boot_with_the_persistent_buffers_where_the_arch_can() -> None:
    line = explore_trace.persistent_cmdline("4M$0x30000000")
    assert "memmap=4M$0x30000000 trace_instance=ringlab_x_fixed^traceoff@0x30000000:4M" in line
    assert "trace_instance=ringlab_x_copy=ringlab_x_boot" in line
    assert explore_trace.persistent_cmdline("") == ""


def test_a_trace_poll_is_readable_with_events_and_buffer_percent_0() -> None:
    m = trace()
    run(m, [("open", 0), ("open", 1)])
    poll = lambda fd: expect(m, {"id": 9, "op": "poll", "args": [fd]})  # noqa: E731
    assert poll("@0") == {"none"}, "nothing written: empty, whatever buffer_percent says"
    run(m, [("write", 10)])
    assert poll("@0") == {"in", "none"}, "buffer_percent 50: how many pages are dirty"
    assert poll("@1") == {"none"}, "CPU 1 gets no markers"
    run(m, [("percent", 0)])
    assert poll("@0") == {"in"}, "buffer_percent 0: not empty"
    run(m, [("read", "@0")])
    assert poll("@0") == {"in", "none"}, "a read may have taken them all"
    assert expect(m, {"id": 9, "op": "percent", "args": [101]}) == {"EINVAL"}


def test_trace_entries_are_checked_right_after_get_reader_only() -> None:
    m = trace()
    run(m, [("open", 0), ("mmap", "@0", "all", "r", "shared"), ("write", 10)])
    assert m.observe() == {"meta@1": {"subbuf_size": 4096}}
    run(m, [("get-reader", "@0")])
    assert m.observe()["meta@1"] == {"subbuf_size": 4096, "entries": 10, "read": 10,
                                     "overrun": 0}
    run(m, [("munmap", "@1"), ("resize", 32), ("mmap", "@0", "all", "r", "shared"),
            ("get-reader", "@0")])
    assert "entries" not in m.observe()["meta@6"], "a resize makes the count unknown"


def test_a_moved_trace_mapping_is_a_trait_a_known_issue_binds() -> None:
    m = trace()
    run(m, [("open", 0), ("mmap", "@0", "meta", "r", "shared"), ("mremap", "@1", "move")])
    assert traits_of(explore_trace.TraceModel("trace-mmap", m.setup), [
        {"id": 0, "op": "open", "args": [0]},
        {"id": 1, "op": "mmap", "args": ["@0", "meta", "r", "shared"]},
        {"id": 2, "op": "mremap", "args": ["@1", "move"]}]) == {"moved"}
    assert "moved" in m.traits


# --- the shrinker --------------------------------------------------------------------------------

def steps_of(ops: list[str]) -> list[dict]:
    return [{"id": i, "op": op, "args": {}} for i, op in enumerate(ops)]


def test_shrink_keeps_the_smallest_subsequence_that_still_fails() -> None:
    seq = steps_of(["a", "x", "b", "y", "z", "c", "w"])
    calls = []

    def fails(s: list[dict]) -> bool:
        calls.append(1)
        ops = [x["op"] for x in s]
        return all(o in ops for o in "abc") and ops.index("a") < ops.index("b") < ops.index("c")
    assert [s["op"] for s in probe_explore.shrink(seq, fails)] == ["a", "b", "c"]
    assert len(calls) < 40


def test_shrink_tries_simpler_arguments_where_the_failure_stays() -> None:
    seq = [{"id": 0, "op": "open", "args": {"kind": "pmu"}},
           {"id": 1, "op": "mmap", "args": {"pages": 9}}]

    def simpler(step: dict) -> list[dict]:
        return [dict(step, args={"kind": "dummy"} if step["op"] == "open" else {"pages": 1})]
    got = probe_explore.shrink(seq, lambda s: len(s) == 2 and s[-1]["args"] == {"pages": 9},
                               simpler=simpler)
    assert [s["args"] for s in got] == [{"kind": "dummy"}, {"pages": 9}]


def test_shrink_stops_at_its_deadline() -> None:
    seq = steps_of(list("abcdef"))
    assert probe_explore.shrink(seq, lambda s: True, deadline=0) == \
        [{"id": i, "op": o, "args": {}} for i, o in enumerate("abcdef")]


def test_renumber_follows_references() -> None:
    got = probe_explore.renumber([{"id": 3, "op": "open", "args": {}},
                                  {"id": 7, "op": "mmap", "args": {"event": "@3", "pages": 3}},
                                  {"id": 9, "op": "munmap", "args": {"vma": "@7"}}])
    assert [(s["id"], s["args"]) for s in got] == [
        (0, {}), (1, {"event": "@0", "pages": 3}), (2, {"vma": "@1"})]


def test_splat_keys_ignore_pids_cpus_and_offsets() -> None:
    a = probe_explore.splat_key(["WARNING: kernel/trace/x.c:831 at f+0x2c/0x40, CPU#0: p/162"])
    b = probe_explore.splat_key(["WARNING: kernel/trace/x.c:831 at f+0x3c/0x40, CPU#1: p/7"])
    assert a == b


def test_run_sequence_reports_the_first_result_the_model_does_not_allow() -> None:
    class World:
        def __init__(self, path, setup, uid): pass
        model = staticmethod(lambda path, setup: perf())
        do = staticmethod(lambda step: "EPERM" if step["id"] == 2 else "ok")
        observe = staticmethod(lambda expected: dict(expected))
        release = staticmethod(lambda: None)
        end = staticmethod(lambda expected: dict(expected))
    steps = explore_ops.named(explore_perf.OPS, [
        {"id": 0, "op": "open", "args": ["dummy"]},
        {"id": 1, "op": "mmap", "args": ["@0", 3, "rw", "shared"]},
        {"id": 2, "op": "mmap", "args": ["@0", 3, "rw", "shared"]},
        {"id": 3, "op": "munmap", "args": ["@1"]}])
    out = probe_explore.run_sequence(World, "pinning", {}, 0, steps)
    assert out["failure"] == {"check": "result:mmap", "at": 2, "expected": ["ok"],
                              "got": "EPERM"}
    assert len(out["steps"]) == 3


# --- a known issue does not hide a new failure of the same check ---------------------------------

CHARGE = {"checks": ["allowance"], "traits": ["mapped-again"], "splats": []}
MOVE_WARN = {"checks": ["splat"], "traits": ["moved"], "splats": ["put_snapshot_map"]}


def test_a_failure_is_excused_by_its_check_a_trait_and_its_splat_only() -> None:
    ex = probe_explore.excused
    assert ex([CHARGE], "allowance", {"mapped-again", "fork"}, [])
    assert not ex([CHARGE], "allowance", {"fork"}, [])           # not the issue's sequence
    assert not ex([CHARGE], "vm_pin_kb", {"mapped-again"}, [])   # not its symptom
    warn = ["WARNING: kernel/trace/trace.c:8 at put_snapshot_map+0x2c/0x40"]
    assert ex([MOVE_WARN], "splat:WARNING: x", {"moved"}, warn)
    assert not ex([MOVE_WARN], "splat:WARNING: x", {"moved"}, ["WARNING: at other_fn+0x1/0x2"])
    assert not ex([], "allowance", {"mapped-again"}, [])


class _FakeModel:
    """Says `mapped-again` (the known issue's trait) once a sequence maps twice."""
    OPS: dict = {}

    def __init__(self) -> None:
        self.traits: set[str] = set()
        self.maps = 0

    valid = staticmethod(lambda step: True)
    expect = staticmethod(lambda step: frozenset({"ok"}))

    def apply(self, step: dict, result: str) -> None:
        self.maps += step["op"] == "mmap"
        if self.maps > 1:
            self.traits.add("mapped-again")


class _FakeWorld:
    """Fails `allowance` when a sequence maps twice (the known issue: `mapped-again`) or
    leaks (a new bug); `leak` is a step of its own."""
    OPS: dict = {}
    setup = staticmethod(lambda path, rng: {})
    model = staticmethod(lambda path, setup: _FakeModel())


class _FakeKmsg:
    """The kernel log: lines[k] is what shows after sequence k was judged."""
    def __init__(self, lines: dict[int, list[str]]) -> None:
        self.lines, self.after = lines, -1

    def new_lines(self) -> list[str]:
        return self.lines.get(self.after, [])


def _explorer(sequences: dict[int, list[str]], late: dict[int, list[str]] | None = None
              ) -> probe_explore.Explorer:
    e = probe_explore.Explorer.__new__(probe_explore.Explorer)
    e.path, e.seed, e.max_steps, e.actors, e.excuses = "pinning", 1, 12, 1, [CHARGE]
    e.world_cls, e.runs, e.steps_run, e.steer, e.loads = _FakeWorld, 0, 0, False, []
    e.processes, e.splats_had, e.in_replays, e.as_run = False, set(), [], {}
    e.kmsg = _FakeKmsg(late or {})     # type: ignore[assignment]

    def one(setup: dict, steps: list[dict] | None = None, k: int | None = None) -> dict:
        e.settle()
        e.kmsg.after = k if k is not None else -1     # type: ignore[attr-defined]
        if steps is None:
            steps = [{"id": i, "op": op, "args": {}} for i, op in enumerate(sequences[k])]
        e.runs += 1
        fails = sum(s["op"] == "mmap" for s in steps) > 1 or any(s["op"] == "leak" for s in steps)
        return {"steps": steps, "env": {},
                "failure": {"check": "allowance", "at": "end", "expected": 0, "got": 1}
                if fails else None}
    e.one = one     # type: ignore[method-assign]
    return e


def test_the_first_new_failure_of_a_check_is_kept_beside_the_known_one() -> None:
    e = _explorer({0: ["open", "mmap", "mmap", "close"], 1: ["open", "mmap", "mmap"],
                   2: ["open", "mmap", "leak"], 3: ["open", "close"]})
    out = e._explore(0, 4, budget_s=60, shrink_s=5)
    assert out["failed"] == {"allowance~known": 2, "allowance": 1}
    known, new = out["failures"]
    assert (known["sequence"], known["excused"]) == (0, True)
    assert [s["op"] for s in known["shrunk"]] == ["mmap", "mmap"]
    # shrunk without ever becoming the known issue's sequence
    assert (new["sequence"], new["excused"], new["traits"]) == (2, False, [])
    assert [s["op"] for s in new["shrunk"]] == ["leak"]


def test_a_new_bug_in_a_sequence_that_also_shows_the_known_issue_is_untangled() -> None:
    """The known issue's steps taken out, the check still fails: a new failure (mutant 047:
    a refused AUX size leaking the buffer, in a sequence that also mapped twice)."""
    e = _explorer({0: ["open", "mmap", "leak", "mmap"], 1: ["open", "mmap", "mmap"]})
    out = e._explore(0, 2, budget_s=60, shrink_s=5)
    assert out["failed"] == {"allowance": 1, "allowance~known": 1}
    new, known = out["failures"]
    assert (new["sequence"], new["excused"]) == (0, False)
    assert [s["op"] for s in new["shrunk"]] == ["leak"]
    assert [s["op"] for s in known["shrunk"]] == ["mmap", "mmap"]


def test_without_excuses_the_first_failure_of_a_check_is_the_only_one_kept() -> None:
    e = _explorer({0: ["open", "mmap", "mmap"], 1: ["leak"]})
    e.excuses = []
    out = e._explore(0, 2, budget_s=60, shrink_s=5)
    assert out["failed"] == {"allowance": 2}
    assert [f["sequence"] for f in out["failures"]] == [0]


def test_a_child_has_a_mapping_only_after_madv_dofork() -> None:
    m = perf()
    run(m, [("open", "dummy"), ("mmap", "@0", 2, "rw", "shared")])
    assert expect(m, {"id": 2, "op": "fork", "args": []}) == {"ok"}
    run(m, [("madvise", "@1", "dofork")])     # the model applies "ok": 6.12 lets it through
    assert expect(m, {"id": 3, "op": "fork", "args": []}) == {"inherits 1"}
    t = trace()
    run(t, [("open", 0), ("mmap", "@0", "meta", "r", "shared")])
    assert expect(t, {"id": 2, "op": "fork", "args": []}) == {"ok"}


def test_a_fork_that_inherits_is_the_known_issues_trait() -> None:
    """The child's answer is "inherits N", not "ok": the trait must still be seen (a model
    error found on 6.12.117: the dofork miscount was reported NEW)."""
    steps = [{"id": 0, "op": "open", "args": [0]},
             {"id": 1, "op": "mmap", "args": ["@0", "meta", "r", "shared"]},
             {"id": 2, "op": "madvise", "args": ["@1", "dofork"]},
             {"id": 3, "op": "fork", "args": []}]
    assert "fork-inherits-a-mapping" in traits_of(trace(), steps)
    perf_steps = [{"id": 0, "op": "open", "args": ["dummy"]},
                  {"id": 1, "op": "mmap", "args": ["@0", 2, "rw", "shared"]},
                  {"id": 2, "op": "madvise", "args": ["@1", "dofork"]},
                  {"id": 3, "op": "fork", "args": []}]
    assert "fork-inherits-a-mapping" in traits_of(perf(), perf_steps)


def test_a_check_on_an_object_is_named_without_its_step_id() -> None:
    """A shrunk, renumbered sequence must fail the same check: "ring@6" and "ring@2" are one
    check (found when 021's failures were not confirmed on a fresh guest)."""
    f = probe_explore.compare({"vm_pin_kb": 0, "ring@6": {"head": 32}},
                              {"vm_pin_kb": 0, "ring@6": {"head": 64}}, 3)
    assert f == {"check": "ring", "at": 3, "expected": {"head": 32}, "got": {"head": 64},
                 "object": "@6"}


def test_only_a_writable_data_mappings_control_page_takes_a_store() -> None:
    m = perf()
    run(m, [("open", "pmu"), ("mmap", "@0", 3, "rw", "shared"), ("aux", "@0", 2),
            ("open", "dummy"), ("mmap", "@3", 3, "r", "shared")])
    poke = lambda vma, page: expect(m, {"id": 9, "op": "poke", "args": [vma, page]})  # noqa: E731
    assert poke("@1", 0) == {"ok"}
    assert poke("@1", 1) == {"EFAULT"}, "a data page"
    assert poke("@2", 0) == {"EFAULT"}, "an AUX page"
    assert poke("@4", 0) == {"EFAULT"}, "a read-only mapping"


def test_fires_are_drawn_that_just_overflow_a_writable_ring() -> None:
    m = perf()
    run(m, [("open", "tp"), ("mmap", "@0", 2, "rw", "shared"), ("fire", 100)])
    assert m.overflows() == (28 + 3,), "128 samples fit; 100 are there"
    run(m, [("open", "tp"), ("mmap", "@3", 2, "r", "shared")])
    assert m.overflows() == (31,), "an overwriting ring never overflows"


def test_a_fork_is_the_known_issues_trait_only_with_a_file_open() -> None:
    """trace-pipe-raw-closed-by-another-close is a child's exit closing its copy of an open
    trace_pipe_raw: a fork after the last close (the mapping kept) cannot be it."""
    m = trace()
    run(m, [("open", 0), ("mmap", "@0", "meta", "r", "shared"), ("close", "@0"), ("fork",)])
    assert "forked" not in m.traits
    run(m, [("open", 0), ("fork",)])
    assert "forked" in m.traits
    p = perf()
    run(p, [("open", "dummy"), ("mmap", "@0", 3, "rw", "shared"), ("close", "@0"), ("fork",)])
    assert "forked" not in p.traits


def test_a_splat_after_its_sequence_was_judged_fails_that_sequence(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A WARN from a sequence's deferred work (an RCU callback) shows once the next sequence
    has begun: it is that sequence's failure, not dropped and not the next one's."""
    monkeypatch.setattr(probe_explore, "LATE_S", 0.0)
    warn = "WARNING: CPU: 0 PID: 0 at kernel/events/ring_buffer.c:1 rb_free_rcu+0x1/0x2"
    e = _explorer({0: ["open", "close"], 1: ["open", "close"], 2: ["open"]}, late={1: [warn]})
    out = e._explore(0, 3, budget_s=60, shrink_s=5)
    [f] = out["failures"]
    assert f["sequence"] == 1 and f["failure"]["at"] == "kernel log, after the sequence"
    assert f["failure"]["check"].startswith("splat:WARNING") and f["kmsg"] == [warn]
    e = _explorer({0: ["open"], 1: ["open", "close"]}, late={1: [warn]})
    [f] = e._explore(0, 2, budget_s=60, shrink_s=5)["failures"]
    assert f["sequence"] == 1, "the last sequence's is waited for"


def test_a_late_splat_leaves_a_sequence_that_failed_already_with_its_first_failure() -> None:
    warn = "WARNING: CPU: 0 PID: 0 at kernel/events/ring_buffer.c:1 rb_free_rcu+0x1/0x2"
    failed = {"steps": [], "failure": {"check": "allowance", "at": "end"}}
    assert probe_explore.Explorer.charge_late(failed, [warn]) is None
    assert probe_explore.Explorer.charge_late(None, [warn]) is None
    assert probe_explore.Explorer.charge_late({"steps": [], "failure": None}, []) is None
    charged = probe_explore.Explorer.charge_late({"steps": [], "failure": None}, [warn])
    assert charged is not None and charged["failure"]["check"].startswith("splat:WARNING")


def test_the_test_pmus_module_references_are_an_end_check_only_where_it_exists() -> None:
    # An event of the test PMU holds its module from perf_init_event() to __free_event();
    # with everything undone none is left (mutant 058 keeps one per munmap).
    assert perf().end() == {"vm_pin_kb": 0, "allowance": "ok", "pmu_refs": 0}
    assert "pmu_refs" not in perf(has_pmu=False).end()


# --- trace-remote (probes/explore_remote.py) -----------------------------------------------

def remote(**kw: object) -> explore_remote.RemoteModel:
    return explore_remote.RemoteModel("trace-remote", {"size_kb": 7, "ncpus": 2, **kw})


def test_a_remote_buffer_loads_on_demand_and_goes_once_off_empty_and_unread() -> None:
    """tests/kernel/test_trace_remote.py's life cycle, as the model says it after each step."""
    m = remote()
    assert m.observe() == {"state@0": {"kb": 7, "loaded": False}}
    assert run(m, [("write", 1)]) == [{"ENODEV"}], "tracing off, event disabled"
    run(m, [("enable", 1), ("on", 1)])
    assert m.loaded and run(m, [("write", 8)]) == [{"ok"}]
    run(m, [("on", 0)])
    assert m.loaded is True, "off with events left: still loaded"
    run(m, [("reset",)])
    assert m.loaded is False and m.unread == 0
    run(m, [("open", "all")])
    assert m.loaded is True, "a reader loads it"
    assert run(m, [("read", "@6")]) == [{"empty"}], "nothing written since the reset"
    run(m, [("close", "@6")])
    assert m.loaded is False


def test_a_remote_size_is_refused_while_loaded_and_zero_never() -> None:
    """mutant 057: EBUSY while loaded; unknown whether loaded, either answer."""
    m = remote()
    assert run(m, [("size", 0), ("size", 16)]) == [{"EINVAL"}, {"ok"}]
    assert m.size_kb == 16
    run(m, [("on", 1)])
    assert run(m, [("size", 7)]) == [{"EBUSY"}] and m.size_kb == 16
    run(m, [("enable", 1), ("write", 8), ("open", "cpu0"), ("read", "@6"), ("close", "@6"),
            ("on", 0)])
    assert m.loaded is None, "a read took what the kernel had polled: empty or not, unknown"
    assert run(m, [("size", 7)]) == [{"ok", "EBUSY"}]
    assert "state@0" not in m.observe()


def test_a_consuming_read_is_judged_by_each_event_once_and_every_gap_said_lost() -> None:
    """mutant 056: the Tally of the world and both reproducers."""
    t = explore_remote.Tally(marks=6)
    assert t.took(["[000]\t  1.000001: selftest id=1", "[000]\t  1.000002: selftest id=2"])
    assert (t.twice, t.missing) == (0, 0)
    t.took(["CPU:0 [LOST 2 EVENTS]", "[000]\t  1.000005: selftest id=5"])
    assert (t.missing, t.lost, t.unaccounted()) == (2, 2, 0)
    t.took(["[000]\t  1.000006: selftest id=6", "[000]\t  1.000006: selftest id=6"])
    assert t.twice == 1
    skipped = explore_remote.Tally(marks=9)
    skipped.took(["[000]\t  1.0: selftest id=1", "[000]\t  1.5: selftest id=9"])
    assert skipped.unaccounted() == 7, "a gap no LOST line counts"
    m = remote()
    run(m, [("open", "all"), ("read", "@0")])
    assert m.observe()["events@0"] == {"twice": 0, "unaccounted": 0}


def test_user_space_maps_no_remote_buffer_and_show_loads_nothing() -> None:
    m = remote()
    assert run(m, [("mmap",), ("show",)]) == [{"ENODEV"}, {"ok"}]
    assert m.observe() == {"state@0": {"kb": 7, "loaded": False},
                           "shown@0": {"in_order": True, "stale": 0}}


def test_trace_showing_what_a_consuming_read_took_is_stale() -> None:
    """known issue trace-remote-trace-shows-consumed-events: after the readers took 1..200,
    `trace` showing 1..170 again (and 201) is 170 stale; what a reset removed before is not
    counted (the consuming reads do not count it either)."""
    t = explore_remote.Tally(marks=201, forgot=0, last=200)
    assert t.consumed([*range(1, 171), 201]) == 170
    assert t.consumed([201]) == 0
    assert explore_remote.Tally(marks=30, forgot=20, last=25).consumed([19, 20, 21, 25, 26]) == 2
    m = remote()     # the issue binds only a sequence that consumed before it showed
    assert explore_ops.traits(m, explore_ops.named(m.OPS, [
        {"id": 0, "op": "show", "args": []}])) == set()
    m = remote()
    assert "consumed" in explore_ops.traits(m, explore_ops.named(m.OPS, [
        {"id": 0, "op": "open", "args": ["all"]}, {"id": 1, "op": "read", "args": ["@0"]}]))


def test_a_kernel_without_madvise_gets_no_madvise_step() -> None:
    """tinyconfig builds have no CONFIG_ADVISE_SYSCALLS: every madvise() is ENOSYS, which the
    sweep of src-7.2-min reported as a failure of the buffers' ABI (a false report); the
    worlds' env says whether the call exists (explore_ops.mapping_env())."""
    step = {"id": 2, "op": "madvise", "args": ["@1", "dontdump"]}
    mapped = [(perf(has_madvise=False), [("open", "dummy"), ("mmap", "@0", 1, "rw", "shared")]),
              (trace(has_madvise=False), [("open", 1), ("mmap", "@0", "meta", "r", "shared")])]
    for m, steps in mapped:
        run(m, steps)
        assert not m.valid(named(m, step))
        drawn = [m.choose(random.Random(i), 2) for i in range(200)]
        assert all(s["op"] != "madvise" for s in drawn if s is not None)
    p = perf(has_madvise=True)
    run(p, [("open", "dummy"), ("mmap", "@0", 1, "rw", "shared")])
    assert p.valid(named(p, step))


def test_a_refused_first_mapping_is_a_trait_for_its_known_issue() -> None:
    """known issue trace-mmap-first-map-error-dropped (6.12.105-6.12.107: ring_buffer_map()
    returns 0 when __rb_map_vma() refuses the first mapping): the explorer binds its shrunk
    sequences by this trait; a refusal of a buffer already mapped is not it."""
    m = trace()
    assert explore_ops.traits(m, explore_ops.named(m.OPS, [
        {"id": 0, "op": "open", "args": [0]},
        {"id": 1, "op": "mmap", "args": ["@0", "past", "r", "private"]}])) == {"refused-first-map"}
    m = trace()
    assert "refused-first-map" not in explore_ops.traits(m, explore_ops.named(m.OPS, [
        {"id": 0, "op": "open", "args": [0]},
        {"id": 1, "op": "mmap", "args": ["@0", "meta", "r", "shared"]},
        {"id": 2, "op": "mmap", "args": ["@0", "meta", "r", "private"]}]))


def test_an_extended_sequence_replays_its_prefix_then_goes_on_drawing() -> None:
    """A steered sequence: a corpus entry's prefix, then the model's own choices."""
    class World:
        def __init__(self, path, setup, uid): pass
        model = staticmethod(lambda path, setup: perf())
        do = staticmethod(lambda step: "ok")
        observe = staticmethod(lambda expected: dict(expected))
        release = staticmethod(lambda: None)
        end = staticmethod(lambda expected: dict(expected))
    prefix = explore_ops.named(explore_perf.OPS, [{"id": 0, "op": "open", "args": ["dummy"]}])
    out = probe_explore.run_sequence(World, "perf-ring", {}, 0, prefix, random.Random(1),
                                     max_steps=5, extend=True)
    assert out["steps"][0]["op"] == "open" and len(out["steps"]) > 1
    replay = probe_explore.run_sequence(World, "perf-ring", {}, 0, prefix, random.Random(1),
                                        max_steps=5)
    assert len(replay["steps"]) == 1


@pytest.mark.parametrize("actors, skipped", [(1, False), (2, True)])
def test_a_world_that_cannot_be_an_actor_is_skipped_with_its_reason(
        actors: int, skipped: bool, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """trace-remote's consuming read ends on an alarm only the main thread can arm: with
    actors it is a skip that says so, not the explorer's own error on every sequence."""
    import json
    monkeypatch.setattr(explore_remote.RemoteWorld, "missing", staticmethod(lambda p: None))
    assert probe_explore.main(["run", "trace-remote", "--available", "--actors",
                               str(actors)]) == 0
    said = json.loads(capsys.readouterr().out)["missing"]
    assert (said is not None) is skipped
    if skipped:
        assert said.startswith("not with 2 actors: ") and "--actors 1" in said
    assert explore_perf.PerfWorld.ONE_ACTOR is None
