"""`./lab bench perf-ring`: records/s read through the mmap'd perf buffer against counter
reads/s through read() of a group (probe_perf_ring.py throughput), and the wall time of
tests/kernel/test_perf_ring.py under this machine's accelerator."""
from __future__ import annotations

from harness.bench import pytest_wall, report
from harness.config import KernelSpec, LabConfig
from harness.guest.guest import boot
from harness.resources import Lab

RECORDS = 20000  # records a throughput run of the probe writes and reads


def rates(samples: list[dict]) -> dict[str, dict[str, float]]:
    """The probe's throughput answers summarized: mmap records/s and read() calls/s."""
    return {"mmap_records_per_s": report.stats([d["mmap_records_per_s"] for d in samples]),
            "read_calls_per_s": report.stats([d["read_calls_per_s"] for d in samples])}


def run(cfg: LabConfig, kernel: KernelSpec, runs: int = 3) -> int:
    """`runs` throughput runs in one guest, then the test file's wall; exit 1 if the tests
    did not pass."""
    out = report.folder(cfg, "perf-ring", kernel.name)
    plan = Lab(cfg).plan(kernel.name, out / "console.log")
    with boot(plan) as g:
        samples = [g.probe("probe_perf_ring", ["throughput", str(RECORDS)], timeout=300).data
                   for _ in range(runs)]
    wall = pytest_wall.measure(cfg, kernel, out / "run", "test_perf_ring.py")
    results = {**rates(samples), "test_file_wall_s": report.stats([wall.seconds])}
    r = report.Report([
        f"ringlab bench perf-ring: kernel {plan.kernel.name} ({plan.kernel.release}), accel "
        f"{plan.accel}, {plan.cpus} cpu",
        report.line("records/s through the mmap'd buffer", results["mmap_records_per_s"], "/s"),
        report.line("read() of a counter group, calls/s", results["read_calls_per_s"], "/s"),
        report.line("tests/kernel/test_perf_ring.py wall", results["test_file_wall_s"], "s")
        + f"  ({wall.last_line})"],
        {"kernel": plan.kernel.release, "accel": plan.accel, "results": results,
         "pytest": wall.last_line})
    report.save(out, r)
    return 0 if wall.exit_code == 0 else 1
