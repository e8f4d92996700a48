"""`./lab bench aux`: AUX bytes/s through the test PMU (kernels/modules/ringlab_aux) and the
probe's reader, data moved only ("transport": records consumed) and every byte checked
("verified")."""
from __future__ import annotations

from harness.bench import report
from harness.config import KernelSpec, LabConfig
from harness.errors import LabError
from harness.guest.guest import boot
from harness.resources import Lab

MODES = ("transport", "verified")


def mb_per_s(samples: list[dict]) -> dict[str, dict[str, float]]:
    """MB/s per mode over the probe's answers; a skip or a wrong byte is an error, not a
    figure."""
    rates: dict[str, list[float]] = {m: [] for m in MODES}
    for d in samples:
        if "skip" in d:
            raise LabError(f"the AUX benchmark cannot run: {d['skip']}")
        for mode in MODES:
            if d[mode]["bad_records"]:
                raise LabError(f"AUX data was wrong in {d[mode]['bad_records']} records")
            rates[mode].append(d[mode]["bytes_per_s"] / 1e6)
    return {m: report.stats(v) for m, v in rates.items()}


def run(cfg: LabConfig, kernel: KernelSpec, runs: int = 3, seconds: float = 2) -> int:
    """`runs` throughput runs of `seconds` in one guest with the test PMU loaded."""
    out = report.folder(cfg, "aux", kernel.name)
    lab = Lab(cfg)
    plan = lab.plan(kernel.name, out / "console.log")
    ko = lab.module("ringlab_aux", plan.kernel.name)
    with boot(plan) as g:
        g.insmod(ko)
        samples = [g.probe("probe_perf_aux", ["throughput", str(seconds)], timeout=300).data
                   for _ in range(runs)]
    results = mb_per_s(samples)
    r = report.Report([
        f"ringlab bench aux: kernel {plan.kernel.name} ({plan.kernel.release}), accel "
        f"{plan.accel}, {plan.cpus} cpu, 64 KiB chunks every 100 us into 1 MiB, {seconds} s",
        report.line("AUX MB/s, records consumed", results["transport"], "MB/s"),
        report.line("AUX MB/s, every byte checked", results["verified"], "MB/s")],
        {"kernel": plan.kernel.release, "accel": plan.accel, "results_mb_per_s": results})
    report.save(out, r)
    return 0
