"""What one `./lab mutate` is asked to do, as one record the run's stages share."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.config import KernelSpec, LabConfig
from harness.kernels.mutants import Mutant


@dataclass(frozen=True)
class Plan:
    """What one `./lab mutate` does. `cfg` holds `spec` (resolved once, by the verb)."""
    cfg: LabConfig
    spec: KernelSpec
    mutants: tuple[Mutant, ...]
    selection: str | None
    pytest_args: tuple[str, ...]
    report_dir: Path
    # Every mutant on the same tests as the unmutated kernel, its Tests: header ignored: what
    # a broken kernel costs the whole suite (issue 23 §3), not only which tests kill it.
    whole_suite: bool = False
    # Judge with `./lab explore` instead of the suite: this many seconds per path the
    # mutant's file serves (by_explore.explore_paths), seed 1, stopping at the first failure
    # no known issue explains; a kill is such a failure, confirmed on a fresh guest, that the
    # unmutated kernel's explore did not have.
    explore_s: float | None = None
    # The kernel's own selftests too, every case on every mutant: a column of the kill table
    # says whether they caught it; the kill rate stays ours.
    selftests: bool = False
    # Guests a test run (the unmutated kernel's, each mutant's) uses at once: ./lab run -j.
    # Under TCG each takes a core; the selftests' slow ftracetest cases gain most.
    jobs: int = 1
    # With explore_s: the explorer's seeds, and whether it runs blind, steered by the edges it
    # has run (on the coverage variant, which the verb then builds), or both taking turns per
    # seed: every mutant is explored once per (seed, mode), issue 42's steered-vs-blind table.
    seeds: tuple[int, ...] = (1,)
    modes: tuple[bool, ...] = (False,)      # steered?
    # With explore_s: the explorer's actors and loads (race mutants, issue 43).
    actors: int = 1
    processes: bool = False
    load: str = ""
    # With explore_s: only these of the paths each mutant's file serves (--paths; empty: all
    # of them): a race mutant of trace_pipe_raw's mapping is not worth trace-remote's budget.
    paths: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.spec.name
