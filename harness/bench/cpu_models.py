"""`./lab bench cpu-models`: which TCG CPU model boots a kernel fastest, and cleanly.

Under TCG the CPU model is a cost, not a fact of the guest: `-cpu max` on arm64 emulates
pointer authentication with QARMA (expensive per function call), `pauth-impdef=on` swaps in
QEMU's cheap implementation-defined algorithm, and older models (cortex-a72) emulate fewer
features but lack some (no 16 KiB granule on a72). Each model boots the kernel RUNS times, the
models taking turns (host drift falls on all), snapshots off; a boot counts only if it got to
SSH with no kernel splat on its console. The models compared by default are the arch's
(Arch.tcg_cpu_models); the one the lab boots with is Arch.tcg_cpu.
"""
from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

from harness import arch as arches
from harness.bench import report
from harness.config import KernelSpec, LabConfig
from harness.errors import BootError
from harness.guest.guest import BootPlan, boot
from harness.kernellog import splats
from harness.resources import Lab

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


def parse_models(text: str | None, a: arches.Arch) -> tuple[str, ...]:
    """`--models a;b,prop=on`: models separated by ';' (a model's own options use ',');
    nothing given: `a`'s defaults."""
    if not text:
        return a.tcg_cpu_models
    return tuple(m.strip() for m in text.split(";") if m.strip())


def console_name(out: Path, model: str, run: int) -> Path:
    """A boot's console log, its model made fit for a file name."""
    return out / f"console-{model.replace(',', '_').replace('=', '-')}-{run}.log"


def one_boot(plan: BootPlan, model: str, run: int, log: Path, found: ModelRuns) -> None:
    """Boot once with `model`; count the SSH-ready time only if the console has no splat."""
    p = dataclasses.replace(plan, tcg_cpu=model, snapshots=None, console_log=log)
    try:
        with boot(p) as g:
            ready = g.record.ssh_ready_s
    except BootError as e:
        found.problems.append(f"run {run}: {e.message}")
        report.progress(f"{model}: run {run}: boot failed: {e.message}")
        return
    seen = splats.find(log.read_text(errors="replace").splitlines())
    if seen:
        found.problems.append(f"run {run}: {seen[0].title}")
    else:
        found.ssh_ready_s.append(ready)
    report.progress(f"{model}: run {run}: SSH ready in {ready:.2f} s"
                    f"{f', {len(seen)} splat(s): {seen[0].title}' if seen else ''}")


def run(cfg: LabConfig, kernel: KernelSpec, models: tuple[str, ...], runs: int = 3) -> int:
    """Boot `kernel` `runs` times per TCG CPU model, interleaved; print and save each model's
    SSH-ready figures. Exit 0 if some model booted cleanly every time, 1 if none did, 2 if
    the kernel does not boot under TCG here."""
    out = report.folder(cfg, "cpu-models", kernel.name)
    plan = Lab(cfg).plan(kernel.name, out / "warm-up.log")  # fetch and build before timing
    if plan.accel != "tcg":
        report.progress(f"kernel {plan.kernel.name} boots under {plan.accel}: CPU models are a "
                        f"TCG matter")
        return 2
    found = {m: ModelRuns(m) for m in models}
    for i in range(1, runs + 1):
        for m in models:
            one_boot(plan, m, i, console_name(out, m, i), found[m])
    report.save(out, report.Report(
        [f"ringlab bench cpu-models: kernel {plan.kernel.name} ({plan.kernel.release}), "
         f"{plan.cpus} cpu, TCG, QEMU start to SSH ready, {runs} boots a model",
         *(r.line() for r in found.values())],
        {"kernel": plan.kernel.release, "arch": plan.kernel.arch, "cpus": plan.cpus,
         "models": [dataclasses.asdict(r) for r in found.values()]}))
    return 0 if any(len(r.ssh_ready_s) == runs for r in found.values()) else 1
