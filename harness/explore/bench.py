"""The samples of `./lab bench explore` (judged and reported by harness/bench/explore.py): RUNS
runs of SECONDS per path on one guest, each with its own seed, shrinking off (steps/s and
sequences/min are what the guest does; a failure's shrink is not throughput)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import ModuleError
from harness.resources import Lab

TARGET_STEPS_PER_S = 50.0
# A debug kernel (KASAN, lockdep) pays for its checks in every call: issue 41 asks 20 there.
DEBUG_TARGET_STEPS_PER_S = 20.0
DEBUG_OPTIONS = ("KASAN", "PROVE_LOCKING")


@dataclass(frozen=True)
class Sample:
    path: str
    seed: int
    steps: int
    sequences: int
    seconds: float
    # Beside the sequences (--load): each load's rounds in the run.
    load_rounds: dict[str, int] = field(default_factory=dict)

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds

    @property
    def sequences_per_min(self) -> float:
        return 60 * self.sequences / self.seconds


def target(config_option: Callable[[str], str | None]) -> tuple[float, str]:
    """The steps/s a kernel is held to, and why: its .config asked, not its name."""
    debug = [o for o in DEBUG_OPTIONS if config_option(o) == "y"]
    if debug:
        return DEBUG_TARGET_STEPS_PER_S, "a debug kernel (CONFIG_" + ", CONFIG_".join(debug) + ")"
    return TARGET_STEPS_PER_S, "a kernel without KASAN or lockdep"


def measure(lab: Lab, kernel_name: str | None, paths: tuple[str, ...], runs: int,
            seconds: float, out_dir: Path, actors: int = 1, load: str = ""
            ) -> tuple[str, list[Sample]]:
    """The samples; with `actors` > 1 or a `load` on a 2-vCPU guest, the path's loads
    (session.loads_for) beside each run."""
    from harness.explore import session
    k = lab.kernel(kernel_name)
    samples: list[Sample] = []
    cpus = session.guest_cpus(session.ExploreRequest(None, (), seconds, 0, actors=actors,
                                                     load=load))
    with lab.boot(k.name, out_dir / "bench-explore-console.log", cpus=cpus) as g:
        try:
            g.insmod(lab.module("ringlab_aux", k.name))
        except ModuleError:
            pass
        for run in range(runs):          # the paths take turns within a run
            for path in paths:
                d = g.probe("probe_explore", ["run", path, "--seed", str(run), "--budget",
                                              str(seconds), "--shrink", "0", "--actors",
                                              str(actors), "--load",
                                              session.loads_for(load, path)],
                            timeout=seconds + 120).data
                if "skip" in d:
                    continue
                samples.append(Sample(path, run, d["steps"], d["sequences"], d["seconds"],
                                      {n: c["rounds"] for n, c in d.get("load", {}).items()}))
    return k.release, samples

