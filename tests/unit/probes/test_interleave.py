"""The interleave probe's figures (probes/probe_interleave.py): two vCPUs that really run
together against two that take turns, as single-threaded TCG runs them."""
from __future__ import annotations

import os
from array import array

import pytest

import probe_interleave as pi

MS = 1_000_000


def test_cpus_running_together_fill_every_window_and_switch_often() -> None:
    a = array("q", range(0, 100 * MS, 10_000))          # a sample every 10 us on each
    b = array("q", range(5_000, 100 * MS, 10_000))
    r = pi.analyse([a, b])
    assert r["windows_with_every_cpu"]["1.0"] == pytest.approx(1.0)
    assert r["switches_per_s"] > 100_000
    assert max(r["longest_gap_ms"]) == pytest.approx(0.01)


def test_cpus_taking_turns_of_10_ms_share_few_1_ms_windows() -> None:
    """Single-threaded TCG: one vCPU runs 10 ms, then the other."""
    turns = [range(t, t + 10 * MS, 10_000) for t in range(0, 200 * MS, 10 * MS)]
    a = array("q", (x for i, r in enumerate(turns) if i % 2 == 0 for x in r))
    b = array("q", (x for i, r in enumerate(turns) if i % 2 == 1 for x in r))
    r = pi.analyse([a, b])
    # Only the windows at a turn's edge see both (the one the turn ends in).
    assert r["windows_with_every_cpu"]["1.0"] < 0.15
    assert r["windows_with_every_cpu"]["10.0"] == pytest.approx(0.0, abs=0.11)
    assert r["switches_per_s"] == pytest.approx(100, rel=0.1)
    assert min(r["longest_gap_ms"]) == pytest.approx(10, rel=0.01)


def test_samplers_that_never_overlap_are_said_to() -> None:
    r = pi.analyse([array("q", [0, 1, 2]), array("q", [10, 11])])
    assert "never ran at the same time" in r["error"]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="this host has one CPU")
def test_the_probe_samples_two_cpus_of_this_host() -> None:
    out = pi.sample([0, 1], 0.05)
    assert len(out) == 2 and all(len(s) > 10 for s in out)
    assert all(list(s) == sorted(s) for s in out)
