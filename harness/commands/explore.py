"""`./lab explore`: find ring-buffer bugs nobody wrote a test for (harness/explore/)."""
from __future__ import annotations

import argparse

from harness import splat_proof
from harness.commands import options
from harness.errors import LabError
from harness.explore import drive
from harness.explore.session import (CONFIRM_GUESTS, CONFIRM_TIMES, ExploreRequest, check_loads,
                                     explore_load, parse_budget)
from harness.probe_modules import explore_paths
from harness.resources import Lab
from harness.runs import request as run_request, run_folder
from harness.runs.request import RunRequest

# Read by harness/cli.py, and as text by harness/host.py (./lab's host check): literals only.
OWN_LOGGING: bool = True
HOST_TOOLS: tuple[str, ...] = ()

DEFAULT_BUDGET = "60s"


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("explore", help="random sequences of calls on the ring-buffer paths, "
                       "checked against the ABI's model; failures shrunk, with reproducers",
                       description=main.__doc__)
    e.add_argument("paths", nargs="*", metavar="PATH", help="a path the explorer models, as "
                   "probes/explore_*.py name them (an unknown one lists them; default: every "
                   "one the kernel has)")
    options.kernel(e)
    e.add_argument("--budget", default=DEFAULT_BUDGET, help="time per path: 90s, 10m, 1h "
                   f"(default {DEFAULT_BUDGET})")
    e.add_argument("--seed", default="0", help="the sequences' seed (default 0): the same seed "
                   "on the same kernel makes the same calls")
    e.add_argument("--actors", default="1", help="1, or 2 to 4: threads making their own "
                   "sequences at once on a 2-vCPU guest (one user, one instance), judged by "
                   "the end state and the kernel log")
    e.add_argument("--processes", action="store_true", help="with --actors: each actor a "
                   "process of its own (an mm each: one's mmap() does not wait for another's "
                   "munmap() on mmap_lock), not a thread")
    e.add_argument("--load", default="", metavar="NAME[@CPU],...", help="loads beside every "
                   "sequence, each in a process pinned to its CPU (default: the last): "
                   + "; ".join(f"{n} ({ld.doc})" for n, ld in explore_load.LOADS.items()) +
                   "; judged like actors, on a 2-vCPU guest")
    e.add_argument("--confirm", default=str(CONFIRM_GUESTS), metavar="N", help="fresh guests "
                   "a failure of actors or loads is replayed on, and reported k of N "
                   f"(default {CONFIRM_GUESTS}, each {CONFIRM_TIMES} replays)")
    e.add_argument("--steer", action="store_true", help="on a coverage kernel (./lab build "
                   "--coverage): keep the sequences that run new edges of the ring-buffer files "
                   "and start half of the later ones from a prefix of one (docs/coverage.md)")
    e.add_argument("--keep", action="store_true", help="keep each confirmed failure under "
                   "tests/kernel/explore/, which the suite replays on every run")
    # A nightly cell's explore gets the cell's request whole (its kernel, variant or branch
    # included, and its report folder): harness/nightly/cell.py.
    e.add_argument("--request", help=argparse.SUPPRESS)
    e.set_defaults(func=main)


def request(args: argparse.Namespace, kernel: str) -> ExploreRequest:
    """The command line, checked: one `lab: error:` naming the culprit."""
    known = explore_paths()
    for p in args.paths:
        if p not in known:
            raise LabError(f"unknown path {p!r}: expected one of {', '.join(known)}")
    try:
        seed = int(args.seed)
    except ValueError:
        raise LabError(f"--seed {args.seed!r}: expected a whole number") from None
    if args.actors not in ("1", "2", "3", "4"):
        raise LabError(f"--actors {args.actors!r}: expected 1 to 4")
    check_loads(args.load)
    if args.processes and args.actors == "1":
        raise LabError("--processes makes the actors processes: add --actors 2 (to 4)")
    if not args.confirm.isdigit() or not 1 <= int(args.confirm) <= 20:
        raise LabError(f"--confirm {args.confirm!r}: expected 1 to 20 fresh guests")
    return ExploreRequest(kernel=kernel, paths=tuple(dict.fromkeys(args.paths)),
                          budget_s=parse_budget(args.budget), seed=seed, actors=int(args.actors),
                          steer=args.steer, load=args.load, keep=args.keep,
                          confirm_guests=int(args.confirm), processes=args.processes)


def main(args: argparse.Namespace) -> int:
    """Random sequences of ordinary calls on each path for the budget, each step checked
    against the model of the ABI (docs/explore.md); every distinct failure shrunk to its
    shortest sequence, run again on a fresh guest, bound to a known issue or called new,
    written to reports/<run>/explore.json with repro.py and repro.c. Exit 1 if a new failure
    was confirmed, 0 otherwise."""
    if args.request:
        run = RunRequest.from_json(args.request)
        cfg, spec = run_request.run_config(run), run.kernel
        out = run_folder.make(run.report_dir)
        run_folder.setup_logging(args.verbose, out / "lab.log")
    else:
        cfg, spec = options.config_and_kernel(args)
        out = run_folder.open_run(cfg, args, "explore")
    req = request(args, spec.name)
    lab = Lab(cfg)

    def prove(kernel: str) -> None:
        """A quiet kernel log means nothing until the lab has seen this kernel splat."""
        splat_proof.write(splat_proof.prove(lab, kernel, out / "splat-proof"), out)

    return drive.run(lab, req, out, prove)
