"""The throughput samples `./lab review` compares (the judging rule is
harness/results/review.py): perf records/s through the mapping, tracefs events/s through the
mapping and read(). Each figure's name starts with the path it measures
(review.figure_path), which is how review tells a judged figure from a control."""
from __future__ import annotations

from pathlib import Path

from harness import progress
from harness.config import LabConfig
from harness.guest.guest import Guest, boot
from harness.resources import Lab
from harness.results import review

Pair = dict[str, dict[str, float]]  # {"base": {figure: value}, "patched": {...}}


def figures(perf: dict, trace: dict) -> dict[str, float]:
    """The review figures in one sample's probe answers (probe_perf_ring and probe_trace_mmap
    throughput); a path the kernel lacks gives no figure (the suite reports why)."""
    out: dict[str, float] = {}
    if "mmap_records_per_s" in perf:
        out["perf mmap records/s"] = perf["mmap_records_per_s"]
    for key in ("mmap_transport", "read_transport"):
        if isinstance(trace.get(key), dict) and trace[key].get("events_per_s"):
            out[f"tracefs {key.replace('_', ' ')} events/s"] = trace[key]["events_per_s"]
    return out


def sample(g: Guest) -> dict[str, float]:
    """One sample of every review figure the booted kernel offers."""
    perf = g.probe("probe_perf_ring", ["throughput", "20000"], timeout=300).data
    trace = g.probe("probe_trace_mmap", ["throughput", "5000", "4"], timeout=300).data
    return figures(perf, trace)


def pairs(configs: dict[str, LabConfig], kernel_name: str, out_dir: Path, runs: int = 3
          ) -> list[Pair]:
    """`runs` pairs of samples, taken interleaved (review.interleave: base, patched, base,
    ...), each in a fresh guest of that side's config, so host drift falls on both sides of a
    pair."""
    plans = {side: Lab(c).plan(kernel_name, out_dir / f"bench-{side}-console.log")
             for side, c in configs.items()}
    found: list[Pair] = [{} for _ in range(runs)]
    for pair, side in review.interleave(runs):
        with progress.step(f"review: throughput pair {pair + 1}/{runs}, {side} kernel"):
            with boot(plans[side]) as g:
                found[pair][side] = sample(g)
    return found
