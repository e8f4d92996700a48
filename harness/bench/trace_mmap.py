"""`./lab bench trace-mmap`: events/s consumed from one pre-filled tracefs CPU buffer through
the mapping (GET_READER), read() and splice() of trace_pipe_raw; each both as transport only
(the sub-buffers move, nothing is parsed) and parsed in Python (what a consumer pays), per
sub-buffer size. Then the wall time of tests/kernel/test_trace_mmap.py."""
from __future__ import annotations

from dataclasses import dataclass, field

from harness.bench import pytest_wall, report
from harness.config import KernelSpec, LabConfig
from harness.errors import LabError
from harness.guest.guest import boot
from harness.resources import Lab

METHODS = ("mmap", "read", "splice")
MODES = ("transport", "parsed")


@dataclass
class Samples:
    """The probe's answers gathered per '<method>_<mode>_<kb>k' (and the mapping's setup per
    sub-buffer size)."""
    events_per_s: dict[str, list[float]] = field(default_factory=dict)
    kernel_us: dict[str, list[float]] = field(default_factory=dict)
    setup_ms: dict[str, list[float]] = field(default_factory=dict)

    def add(self, d: dict, kb: int) -> None:
        """One throughput answer of probe_trace_mmap at `kb` KiB sub-buffers."""
        if "skip" in d:
            raise LabError(f"the trace-mmap benchmark cannot run: {d['skip']}")
        for key, value in d.items():
            if isinstance(value, dict) and value.get("events_per_s"):
                self.events_per_s.setdefault(f"{key}_{kb}k", []).append(value["events_per_s"])
                self.kernel_us.setdefault(f"{key}_{kb}k", []).append(
                    value["us_per_event_in_kernel"])
                if key == "mmap_transport":
                    self.setup_ms.setdefault(f"{kb}k", []).append(value["setup_s"] * 1000)


def ratios(results: dict[str, dict[str, float]], subbufs_kb: tuple[int, ...]
           ) -> dict[str, float]:
    """The mapping against read() and splice(), median to median, per mode and size."""
    out = {}
    for kb in subbufs_kb:
        for mode in MODES:
            base = results.get(f"mmap_{mode}_{kb}k")
            for other in ("read", "splice"):
                theirs = results.get(f"{other}_{mode}_{kb}k")
                if base and theirs:
                    out[f"mmap/{other} {mode} {kb} KiB"] = base["median"] / theirs["median"]
    return out


def table(s: Samples, subbufs_kb: tuple[int, ...]) -> list[str]:
    results = {k: report.stats(v) for k, v in s.events_per_s.items()}
    in_kernel = {k: report.stats(v) for k, v in s.kernel_us.items()}
    lines = []
    for kb in subbufs_kb:
        for mode in MODES:
            for method in METHODS:
                key = f"{method}_{mode}_{kb}k"
                if key in results:
                    lines.append(report.line(f"{kb:3} KiB {method:6} {mode:9} events/s",
                                             results[key], "/s")
                                 + f"  ({in_kernel[key]['median']:.3f} us/event in the kernel "
                                   f"call)")
        if f"{kb}k" in s.setup_ms:
            lines.append(report.line(f"{kb:3} KiB mmap of the whole buffer, once",
                                     report.stats(s.setup_ms[f"{kb}k"]), "ms"))
    lines += [f"  ratio {name:30} {ratio:6.2f}x"
              for name, ratio in ratios(results, subbufs_kb).items()]
    return lines


def run(cfg: LabConfig, kernel: KernelSpec, runs: int = 3, events: int = 20000,
        subbufs_kb: tuple[int, ...] = (4, 64)) -> int:
    """`runs` rounds of every sub-buffer size in one guest, then the test file's wall; exit 1
    if the tests did not pass."""
    out = report.folder(cfg, "trace-mmap", kernel.name)
    plan = Lab(cfg).plan(kernel.name, out / "console.log")
    s = Samples()
    with boot(plan) as g:
        for _ in range(runs):
            for kb in subbufs_kb:
                s.add(g.probe("probe_trace_mmap", ["throughput", str(events), str(kb)],
                              timeout=600).data, kb)
    wall = pytest_wall.measure(cfg, kernel, out / "run", "test_trace_mmap.py")
    results = {k: report.stats(v) for k, v in s.events_per_s.items()}
    results["test_file_wall_s"] = report.stats([wall.seconds])
    r = report.Report([
        f"ringlab bench trace-mmap: kernel {plan.kernel.name} ({plan.kernel.release}), accel "
        f"{plan.accel}, {plan.cpus} cpu, {events} trace_marker events a run",
        *table(s, subbufs_kb),
        report.line("tests/kernel/test_trace_mmap.py wall", results["test_file_wall_s"], "s")
        + f"  ({wall.last_line})"],
        {"kernel": plan.kernel.release, "accel": plan.accel, "events": events,
         "results": results, "ratios": ratios(results, subbufs_kb),
         "us_per_event_in_kernel": {k: report.stats(v) for k, v in s.kernel_us.items()},
         "mmap_setup_ms": {k: report.stats(v) for k, v in s.setup_ms.items()},
         "pytest": wall.last_line})
    report.save(out, r)
    return 0 if wall.exit_code == 0 else 1
