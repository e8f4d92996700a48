"""`./lab mutate`: the suite measures its own strength (harness/mutate/: the workspace a
mutant is applied to, its build, the kill rule, the kill table; the catalog is
harness/kernels/mutants.py)."""
from __future__ import annotations

import argparse

from harness import config as lab_config
from harness.commands import options
from harness.errors import LabError
from harness.explore.session import check_loads, parse_budget
from harness.kernels import gcov
from harness.kernels.mutants import catalog, select
from harness.mutate import by_explore, session
from harness.mutate.plan import Plan
from harness.runs import run_folder

OWN_LOGGING: bool = True
# --steer: the explorer's modes each mutant is explored in (steered?), in turn
STEER_MODES: dict[str, tuple[bool, ...]] = {"off": (False,), "on": (True,), "both": (False, True)}
HOST_TOOLS: tuple[str, ...] = ("build",)


def register(sub: argparse._SubParsersAction) -> None:
    mu = sub.add_parser("mutate", help="measure the suite: which mutants of kernels/mutants/ "
                        "its tests kill", description=main.__doc__)
    options.kernel(mu, "the kernel to build (a build kernel or a source tree)")
    mu.add_argument("--mutants", metavar="SET", help="comma-separated mutant ids or globs "
                    "('003', '01*'), kernel files ('trace.c'), or .patch files (default: all)")
    options.selection(mu, "only tests matching EXPR (pytest -k); a mutant's Tests: header "
                      "narrows it further")
    mu.add_argument("--whole-suite", action="store_true", help="run every mutant on the "
                    "tests of the unmutated kernel, ignoring its Tests: header: slower, but "
                    "measures what a broken kernel costs the whole suite")
    mu.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="guests each "
                    "mutant's test run uses at once (./lab run -j N; the kernel's selftests "
                    "spread case by case); mutants are still built one at a time (on 2 cores "
                    "parallel kernel builds only slow each other)")
    mu.add_argument("--explore", metavar="BUDGET", help="judge each mutant with `./lab "
                    "explore` (BUDGET per path its file serves, e.g. 2m) instead of the suite")
    mu.add_argument("--seeds", default="1", metavar="S,S", help="with --explore: the "
                    "explorer's seeds, each mutant explored once per seed (default 1)")
    mu.add_argument("--actors", type=int, default=1, choices=(1, 2, 3, 4), help="with "
                    "--explore: threads at once per sequence (./lab explore --actors)")
    mu.add_argument("--processes", action="store_true", help="with --actors: actors as "
                    "processes (./lab explore --processes)")
    mu.add_argument("--load", default="", metavar="NAME[@CPU],...", help="with --explore: "
                    "loads beside each sequence (./lab explore --load): race mutants")
    mu.add_argument("--paths", default="", metavar="PATH,...", help="with --explore: only "
                    "these of the explorer's paths each mutant's file serves (default: all)")
    mu.add_argument("--steer", choices=STEER_MODES, default="off", help="with --explore: the "
                    "explorer blind (off), steered by the edges it has run (on), or both taking "
                    "turns per seed; on and both mutate the kernel's coverage variant "
                    "(./lab build --coverage)")
    mu.add_argument("--selftests", action="store_true", help="run the kernel's own selftests "
                    "of these paths on every mutant too: a column of the kill table says "
                    "whether they caught it (the kill rate stays the suite's)")
    options.pytest_args(mu)
    mu.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Measure the suite: build and test the unmutated kernel, then each mutant of
    kernels/mutants/ (a small patch breaking one ABI rule of the ring-buffer paths): apply,
    rebuild incrementally, run the same tests, revert. Prints the kill table; exit 1 if a
    mutant that built and booted survived."""
    cfg, spec = options.config_and_kernel(args)
    mutants = select(catalog(), args.mutants)
    explore_s = parse_budget(args.explore) if args.explore else None
    if args.jobs < 1:
        raise LabError(f"-j {args.jobs}: expected 1 or more guests")
    seeds, modes = explorer_runs(args.seeds, args.steer, explore_s is not None)
    if explore_s is None and (args.actors != 1 or args.load or args.processes):
        raise LabError("--actors, --processes and --load choose the explorer's runs: add "
                       "--explore BUDGET")
    if args.processes and args.actors == 1:
        raise LabError("--processes makes the actors processes: add --actors 2 (to 4)")
    check_loads(args.load)
    only = tuple(p.strip() for p in args.paths.split(",") if p.strip())
    if only and explore_s is None:
        raise LabError("--paths chooses the explorer's paths: add --explore BUDGET")
    by_explore.check_paths(tuple(mutants), only)
    if True in modes:   # steering reads the gcov counters: the coverage variant is mutated
        spec = gcov.variant(cfg, spec)
        cfg = cfg.with_kernel(spec)
    out = run_folder.open_run(cfg, args, f"mutate-{lab_config.file_safe(spec.name)}")
    return session.run(Plan(cfg, spec, tuple(mutants), args.k, tuple(args.pytest_args), out,
                            whole_suite=args.whole_suite, explore_s=explore_s,
                            selftests=args.selftests, jobs=args.jobs, seeds=seeds,
                            modes=modes, actors=args.actors, load=args.load,
                            processes=args.processes, paths=only))


def explorer_runs(seeds: str, steer: str, exploring: bool) -> tuple[tuple[int, ...],
                                                                  tuple[bool, ...]]:
    """--seeds and --steer, checked: (seeds, modes: steered or not)."""
    if not exploring and (seeds != "1" or steer != "off"):
        raise LabError("--seeds and --steer choose the explorer's runs: add --explore BUDGET")
    try:
        numbers = tuple(dict.fromkeys(int(s) for s in seeds.split(",")))
    except ValueError:
        raise LabError(f"--seeds {seeds!r}: expected whole numbers separated by commas, "
                       "e.g. 0,1,2") from None
    return numbers, STEER_MODES[steer]
