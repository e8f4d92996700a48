"""`./lab bench boot`: how fast the lab gets a guest up and a probe answered.

Figures: QEMU start to SSH-ready (median of N boots), QEMU start to probes-ready, probe round
trip (push already done: request, fork, run, JSON back) for the capabilities probe and for a
bare runner ping, the harness's peak RSS (QEMU, a child, not counted), and with --cold the
first-use cost in an empty cache (kernel download and prepare, rootfs build, KVM check).
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from harness.config import LabConfig
from harness.lab import Lab

# Targets from the lab-foundation issue (2-core host, TCG, warm caches).
TARGETS = {"ssh_ready_s": 10.0, "probe_round_trip_ms": 150.0, "peak_rss_mb": 150.0,
           "cold_start_s": 300.0}


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values),
            "n": len(values)}


def _line(name: str, s: dict[str, float], unit: str, target: float | None) -> str:
    verdict = ""
    if target is not None:
        verdict = f"  target <= {target:g} {unit}: {'met' if s['median'] <= target else 'MISSED'}"
    return (f"{name:38s} min {s['min']:10.3f}  median {s['median']:10.3f}  max "
            f"{s['max']:10.3f} {unit} (n={s['n']}){verdict}")


def _cold_start(cfg: LabConfig, kernel_name: str | None) -> float:
    """Kernel fetch + prepare, rootfs build and KVM check in an empty cache (then removed)."""
    saved = os.environ.get("RINGLAB_CACHE")
    with tempfile.TemporaryDirectory(prefix="ringlab-cold-") as tmp:
        os.environ["RINGLAB_CACHE"] = tmp
        try:
            start = time.monotonic()
            lab = Lab(cfg)
            lab.plan(kernel_name, Path(tmp) / "console.log")
            return time.monotonic() - start
        finally:
            if saved is None:
                os.environ.pop("RINGLAB_CACHE", None)
            else:
                os.environ["RINGLAB_CACHE"] = saved


def boot_bench(cfg: LabConfig, kernel_name: str | None, runs: int = 5, probe_runs: int = 30,
               cold: bool = False, cpus: int | None = None) -> int:
    results: dict[str, dict[str, float]] = {}
    if cold:
        results["cold_start_s"] = _stats([_cold_start(cfg, kernel_name)])
    lab = Lab(cfg)
    out_dir = cfg.reports_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    console_log = out_dir / "bench-boot-console.log"
    plan = lab.plan(kernel_name, console_log, cpus=cpus)  # warm the caches before timing
    ssh_ready, probes_ready, round_trips, pings = [], [], [], []
    from harness.guest import boot
    for i in range(runs):
        with boot(plan) as g:
            ssh_ready.append(g.record.ssh_ready_s)
            probes_ready.append(g.record.boot_s)
            if i == 0:
                g.probe("probe_capabilities")  # first run of a probe in this guest
                for _ in range(probe_runs):
                    t = time.monotonic()
                    g.probe("probe_capabilities")
                    round_trips.append((time.monotonic() - t) * 1000)
                    t = time.monotonic()
                    g.runner.request({"op": "ping"}, 30)
                    pings.append((time.monotonic() - t) * 1000)
        print(f"boot {i + 1}/{runs}: ssh ready {ssh_ready[-1]:.2f} s, probes ready "
              f"{probes_ready[-1]:.2f} s", flush=True)
    results["ssh_ready_s"] = _stats(ssh_ready)
    results["probes_ready_s"] = _stats(probes_ready)
    results["probe_round_trip_ms"] = _stats(round_trips)
    results["runner_ping_ms"] = _stats(pings)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    results["peak_rss_mb"] = _stats([rss_mb])

    print(f"\nringlab bench boot: kernel {plan.kernel.name} ({plan.kernel.release}), accel "
          f"{plan.accel}{f' (thread={plan.tcg_threads})' if plan.accel == 'tcg' else ''}, "
          f"{plan.cpus} cpu, {os.cpu_count()} host cores")
    labels = {"cold_start_s": ("cold start (fetch+rootfs+check)", "s"),
              "ssh_ready_s": ("QEMU start -> SSH ready", "s"),
              "probes_ready_s": ("QEMU start -> probes ready", "s"),
              "probe_round_trip_ms": ("probe round trip (capabilities)", "ms"),
              "runner_ping_ms": ("runner ping (transport only)", "ms"),
              "peak_rss_mb": ("harness peak RSS", "MB")}
    for key, (label, unit) in labels.items():
        if key in results:
            print(_line(label, results[key], unit, TARGETS.get(key)))
    report = out_dir / time.strftime("bench-boot-%Y%m%d-%H%M%S.json")
    report.write_text(json.dumps({"kernel": plan.kernel.release, "accel": plan.accel,
                                  "tcg_threads": plan.tcg_threads, "cpus": plan.cpus, "results": results, "targets": TARGETS},
                                 indent=2))
    print(f"\nfigures saved to {report}")
    return 0


def perf_ring_bench(cfg: LabConfig, kernel_name: str | None, runs: int = 3) -> int:
    """`./lab bench perf-ring`: records/s read through the mmap'd buffer vs counter reads/s
    through read() of a group (probe_perf_ring.py throughput), and the wall time of
    tests/kernel/test_perf_ring.py under this machine's accelerator."""
    import subprocess
    import sys

    lab = Lab(cfg)
    out_dir = cfg.reports_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = lab.plan(kernel_name, out_dir / "bench-perf-ring-console.log")
    from harness.guest import boot
    mmap_rates, read_rates = [], []
    with boot(plan) as g:
        for _ in range(runs):
            d = g.probe("probe_perf_ring", ["throughput", "20000"], timeout=300).data
            mmap_rates.append(d["mmap_records_per_s"])
            read_rates.append(d["read_calls_per_s"])
    repo = Path(__file__).resolve().parent.parent
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "harness.pytest_plugin",
                           "-p", "no:cacheprovider", "--lab-config", str(cfg.path),
                           "--kernel", plan.kernel.name, "--lab-report-dir",
                           str(out_dir / "bench-perf-ring-run"),
                           str(repo / "tests" / "kernel" / "test_perf_ring.py")],
                          cwd=repo, capture_output=True, text=True)
    wall = time.monotonic() - start
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "(no output)"
    results = {"mmap_records_per_s": _stats(mmap_rates), "read_calls_per_s": _stats(read_rates),
               "test_file_wall_s": _stats([wall])}
    print(f"\nringlab bench perf-ring: kernel {plan.kernel.name} ({plan.kernel.release}), accel "
          f"{plan.accel}, {plan.cpus} cpu")
    print(_line("records/s through the mmap'd buffer", results["mmap_records_per_s"], "/s",
                None))
    print(_line("read() of a counter group, calls/s", results["read_calls_per_s"], "/s", None))
    print(_line("tests/kernel/test_perf_ring.py wall", results["test_file_wall_s"], "s", None)
          + f"  ({last})")
    report = out_dir / time.strftime("bench-perf-ring-%Y%m%d-%H%M%S.json")
    report.write_text(json.dumps({"kernel": plan.kernel.release, "accel": plan.accel,
                                  "results": results, "pytest": last}, indent=2))
    print(f"\nfigures saved to {report}")
    return 0 if proc.returncode == 0 else 1
