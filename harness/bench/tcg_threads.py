"""`./lab bench tcg-threads`: single- against multi-threaded TCG for guests of several vCPUs.

A race needs two CPUs inside the same short window. Single-threaded TCG runs the vCPUs of a
guest in turn on one host thread; multi-threaded TCG (MTTCG) gives each its own, but made
2-vCPU guests oops on kernel text patching here once ("Oops: int3", QEMU 7.2: why
machine.tcg_threads `auto` is single). Each mode (threads x CPU model) boots the kernel RUNS
times, the modes taking turns, snapshots off, and in each guest:
- the interleave probe (probes/probe_interleave.py): the share of 1 ms windows in which both
  vCPUs ran, switches between them a second, the longest gap of one;
- text patching under load: one vCPU spins while the other flips every tracepoint's static
  key on and off, and the function tracer in and out where the kernel has it (thousands of
  call sites rewritten with int3 breakpoints and IPIs: what oopsed before);
- the console of the whole boot: any splat (an int3 Oops among them) makes the run unclean.
"""
from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

from harness.bench import report
from harness.config import KernelSpec, LabConfig
from harness.errors import LabError
from harness.guest.guest import BootPlan, Guest, boot
from harness.kernellog import splats
from harness.resources import Lab

# (threads, -cpu): the lab's x86 default model, and `max` (every feature QEMU emulates).
MODES: tuple[tuple[str, str], ...] = (("single", "qemu64,-cx16"), ("multi", "qemu64,-cx16"),
                                      ("multi", "max"))
TRACING = "/sys/kernel/tracing"
# One vCPU busy while the other patches text: the patching CPU's IPIs must reach a running one.
SPIN = "taskset -c 1 sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!"
FLIPS = 2


@dataclasses.dataclass
class ModeRuns:
    """One mode's boots: the interleave figures of each, and what went wrong in any."""
    threads: str
    cpu: str
    windows_1ms: list[float] = dataclasses.field(default_factory=list)
    switches_per_s: list[float] = dataclasses.field(default_factory=list)
    longest_gap_ms: list[float] = dataclasses.field(default_factory=list)
    ssh_ready_s: list[float] = dataclasses.field(default_factory=list)
    patch_s: list[float] = dataclasses.field(default_factory=list)
    clean: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.threads} / {self.cpu}"

    def lines(self, runs: int) -> list[str]:
        def fig(v: list[float], fmt: str) -> str:
            if not v:
                return "-"
            return "/".join(format(x, fmt) for x in (min(v), statistics.median(v), max(v)))
        out = [f"{self.name:24s} clean {self.clean}/{runs}; both vCPUs in a 1 ms window "
               f"{fig(self.windows_1ms, '.3f')}; switches/s {fig(self.switches_per_s, '.0f')}; "
               f"longest gap ms {fig(self.longest_gap_ms, '.1f')}; SSH ready s "
               f"{fig(self.ssh_ready_s, '.1f')}; text patching s {fig(self.patch_s, '.1f')}"]
        out += [f"{'':24s} {p}" for p in self.problems]
        return out


def patch_text(g: Guest) -> tuple[float, str]:
    """Flip every tracepoint and the function tracer FLIPS times while vCPU 1 spins: the
    seconds it took, and what the kernel could not do ('' if all)."""
    pid = g.run(SPIN).stdout.strip()
    has_function = "function" in g.run(f"cat {TRACING}/available_tracers").stdout.split()
    step = (f"echo 1 > {TRACING}/events/enable && echo 0 > {TRACING}/events/enable"
            + (f" && echo function > {TRACING}/current_tracer && "
               f"echo nop > {TRACING}/current_tracer" if has_function else ""))
    r = g.run(f"for i in $(seq {FLIPS}); do {step} || exit 1; done", timeout=300)
    g.run(f"kill {pid}")
    missing = "" if has_function else "no function tracer"
    return r.duration_s, (f"flips failed: {(r.stderr or r.stdout).strip()[:200]}"
                          if r.exit_status else missing)


def one_boot(plan: BootPlan, found: ModeRuns, run: int, log: Path, seconds: float) -> None:
    """Boot once in `found`'s mode, measure, and judge the console."""
    p = dataclasses.replace(plan, tcg_threads=found.threads, tcg_cpu=found.cpu, snapshots=None,
                            console_log=log)
    where = f"{found.name}: run {run}"
    before, figures = len(found.problems), len(found.windows_1ms)
    try:
        with boot(p) as g:
            found.ssh_ready_s.append(g.record.ssh_ready_s)
            d = g.probe("probe_interleave", ["--seconds", str(seconds)], timeout=120).data
            if "error" in d:
                raise LabError(f"interleave probe: {d['error']}")
            found.windows_1ms.append(d["windows_with_every_cpu"]["1.0"])
            found.switches_per_s.append(d["switches_per_s"])
            found.longest_gap_ms.append(max(d["longest_gap_ms"]))
            secs, missing = patch_text(g)
            found.patch_s.append(secs)
            if missing.startswith("flips failed"):
                found.problems.append(f"run {run}: {missing}")
    except LabError as e:
        found.problems.append(f"run {run}: {e.message}")
        report.progress(f"{where}: {e.message}")
    seen = splats.find(log.read_text(errors="replace").splitlines()) if log.exists() else []
    if seen:
        found.problems.append(f"run {run}: {len(seen)} splat(s): {seen[0].title}")
    if len(found.problems) == before:
        found.clean += 1
    report.progress(f"{where}: " + (f"1 ms windows with both vCPUs {found.windows_1ms[-1]:.3f}, "
                                   f"{found.switches_per_s[-1]:.0f} switches/s"
                                   if len(found.windows_1ms) > figures else "no figures")
                    + (f"; {len(seen)} splat(s): {seen[0].title}" if seen else ""))


def run(cfg: LabConfig, kernel: KernelSpec, runs: int = 3, cpus: int = 2,
        seconds: float = 3.0, modes: tuple[tuple[str, str], ...] = MODES) -> int:
    """Boot `kernel` with `cpus` vCPUs `runs` times per mode, interleaved; print and save each
    mode's figures. Exit 0 if some multi-threaded mode was clean every time, else 1; 2 if
    the kernel does not run under TCG here."""
    out = report.folder(cfg, "tcg-threads", kernel.name)
    plan = Lab(cfg).plan(kernel.name, out / "warm-up.log", cpus=cpus)
    if plan.accel != "tcg":
        report.progress(f"kernel {plan.kernel.name} boots under {plan.accel}: TCG threads are "
                        "a TCG matter")
        return 2
    found = [ModeRuns(t, c) for t, c in modes]
    for i in range(1, runs + 1):
        for f in found:
            one_boot(plan, f, i, out / f"console-{f.threads}-{f.cpu.replace(',', '_')}-{i}.log",
                     seconds)
    report.save(out, report.Report(
        [f"ringlab bench tcg-threads: kernel {plan.kernel.name} ({plan.kernel.release}), "
         f"{cpus} vCPUs, {runs} boots a mode, interleave {seconds:g} s, text patching "
         f"{FLIPS} flips under load; figures min/median/max",
         *(line for f in found for line in f.lines(runs))],
        {"kernel": plan.kernel.release, "cpus": cpus, "runs": runs,
         "modes": [dataclasses.asdict(f) for f in found]}))
    return 0 if any(f.threads == "multi" and f.clean == runs for f in found) else 1
