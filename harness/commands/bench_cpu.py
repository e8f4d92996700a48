"""`./lab bench cpu-models`: which TCG CPU model boots a kernel fastest, and cleanly.

Under TCG the CPU model is a cost, not a fact of the guest: `-cpu max` on arm64 emulates
pointer authentication with QARMA (expensive per function call), `pauth-impdef=on` swaps in
QEMU's cheap implementation-defined algorithm, and older models (cortex-a72) emulate fewer
features but lack some (no 16 KiB granule on a72). Each model boots the kernel RUNS times, the
models taking turns (host drift falls on all), snapshots off; a boot counts only if it got to
SSH with no kernel splat on its console. The default model per arch is qemu.TCG_CPUS.
"""
from __future__ import annotations

import dataclasses
import json
import statistics
import time

from harness.config import LabConfig
from harness.errors import BootError
from harness.guest.guest import boot
from harness.kernellog import splats
from harness.resources import Lab

ARM64_MODELS = ("max", "max,pauth-impdef=on", "cortex-a72", "neoverse-n1")


@dataclasses.dataclass
class ModelRuns:
    """One CPU model's boots: SSH-ready times of the clean ones, and what went wrong in others."""
    model: str
    ssh_ready_s: list[float] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)

    def line(self) -> str:
        if self.ssh_ready_s:
            s = self.ssh_ready_s
            fig = (f"min {min(s):6.2f}  median {statistics.median(s):6.2f}  max {max(s):6.2f} s "
                   f"({len(s)} clean)")
        else:
            fig = "no clean boot"
        bad = f"; {len(self.problems)} not clean: {'; '.join(self.problems)}" \
            if self.problems else ""
        return f"{self.model:24s} {fig}{bad}"


def cpu_models_bench(cfg: LabConfig, kernel_name: str | None, models: tuple[str, ...],
                     runs: int = 3) -> int:
    """Boot `kernel_name` `runs` times per TCG CPU model, interleaved; print and save each
    model's SSH-ready figures. Exit 0 if some model booted cleanly every time, else 1."""
    lab = Lab(cfg)
    out_dir = cfg.reports_dir / time.strftime("bench-cpu-models-%Y%m%d-%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = lab.plan(kernel_name, out_dir / "warm-up.log")  # fetch and build before timing
    if plan.accel != "tcg":
        print(f"kernel {plan.kernel.name} boots under {plan.accel}: CPU models are a TCG matter")
        return 2
    found = {m: ModelRuns(m) for m in models}
    for i in range(runs):
        for m in models:
            log = out_dir / f"console-{m.replace(',', '_').replace('=', '-')}-{i + 1}.log"
            p = dataclasses.replace(plan, tcg_cpu=m, snapshots=None, console_log=log)
            try:
                with boot(p) as g:
                    ready = g.record.ssh_ready_s
            except BootError as e:
                found[m].problems.append(f"run {i + 1}: {e.message}")
                print(f"{m}: run {i + 1}: boot failed: {e.message}", flush=True)
                continue
            seen = splats.find(log.read_text(errors="replace").splitlines())
            if seen:
                found[m].problems.append(f"run {i + 1}: {seen[0].title}")
            else:
                found[m].ssh_ready_s.append(ready)
            print(f"{m}: run {i + 1}: SSH ready in {ready:.2f} s"
                  f"{f', {len(seen)} splat(s): {seen[0].title}' if seen else ''}", flush=True)
    print(f"\nringlab bench cpu-models: kernel {plan.kernel.name} ({plan.kernel.release}), "
          f"{plan.cpus} cpu, TCG, QEMU start to SSH ready, {runs} boots a model")
    for r in found.values():
        print(r.line())
    report = out_dir / "cpu-models.json"
    report.write_text(json.dumps({"kernel": plan.kernel.release, "arch": plan.kernel.arch,
                                  "cpus": plan.cpus,
                                  "models": [dataclasses.asdict(r) for r in found.values()]},
                                 indent=2))
    print(f"\nfigures and console logs in {out_dir}")
    return 0 if any(len(r.ssh_ready_s) == runs for r in found.values()) else 1


def default_models(arch: str) -> tuple[str, ...]:
    """The models worth comparing for `arch` (x86: the lab's default against max)."""
    return ARM64_MODELS if arch == "arm64" else ("qemu64,-cx16", "max")


def parse_models(text: str | None, arch: str) -> tuple[str, ...]:
    """`--models a;b,prop=on`: models separated by ';' (a model's own options use ',')."""
    if not text:
        return default_models(arch)
    return tuple(m.strip() for m in text.split(";") if m.strip())

