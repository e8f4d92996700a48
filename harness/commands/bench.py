"""`./lab bench KIND`: the benchmarks' command line, read and dispatched. What each bench does
is one module of harness/bench/ (docs/benchmarks.md)."""
from __future__ import annotations

import argparse

from harness import arch as arches
from harness.bench import (aux, boot, build, cpu_models, explore, parallel, perf_ring,
                           tcg_threads, throwaway, trace_mmap)
from harness.commands import options
from harness.errors import ConfigError
from harness.explore.session import check_loads
from harness.nightly import bench as nightly_bench
from harness.runs import run_folder

# The bench logs to the screen; each bench writes its own results folder (bench/report.py).
OWN_LOGGING: bool = False
# Host tool groups beyond the base ones: none, but `bench build` builds kernels.
HOST_TOOLS: tuple[str, ...] = ()
HOST_TOOLS_WITH: dict[str, tuple[str, ...]] = {"build": ("build",)}


def register(sub: argparse._SubParsersAction) -> None:
    be = sub.add_parser("bench", help="benchmarks", description="Benchmarks.")
    bsub = be.add_subparsers(dest="bench", required=True, metavar="BENCH")
    for add in (_boot, _perf_ring, _trace_mmap, _parallel, _aux, _build, _cpu_models,
                _tcg_threads, _explore, _nightly):
        add(bsub)
    be.set_defaults(func=main)


def _boot(bsub: argparse._SubParsersAction) -> None:
    bb = bsub.add_parser("boot", help="boot time, probe round trip, harness RSS, cold start",
                         description="QEMU start to SSH-ready (N boots), probe round trip, "
                         "harness peak RSS; --cold also times download + rootfs build.")
    options.kernel(bb)
    options.runs(bb, 5, "boots to time")
    bb.add_argument("--probe-runs", type=int, default=30, help="probe round trips (default 30)")
    bb.add_argument("--cpus", type=int, help="vCPUs (default: machine.cpus)")
    bb.add_argument("--cold", action="store_true", help="also time a cold start in an empty "
                    "cache (download + rootfs build)")
    bb.add_argument("--throwaway", action="store_true", help="instead: where the time of a "
                    "throw-away `./lab ssh -- true` goes, step by step (RUNS guests, default "
                    "5), against its 1 s target")


def _perf_ring(bsub: argparse._SubParsersAction) -> None:
    _probe_bench(bsub, "perf-ring", "perf ring buffer: mmap vs read() rates, test wall",
                 "Records/s read through the mmap'd perf buffer vs counter reads/s through "
                 "read() of a group, and the wall time of tests/kernel/test_perf_ring.py.")


def _trace_mmap(bsub: argparse._SubParsersAction) -> None:
    bt = _probe_bench(bsub, "trace-mmap", "tracefs buffer: mmap vs read() vs splice() rates",
                      "Events/s consumed from a tracefs CPU buffer through the mapping, read() "
                      "and splice() of trace_pipe_raw (transport only and parsed), and the "
                      "wall time of tests/kernel/test_trace_mmap.py.")
    bt.add_argument("--events", type=int, default=20000,
                    help="trace_marker events a run (default 20000)")


def _parallel(bsub: argparse._SubParsersAction) -> None:
    bp = bsub.add_parser("parallel", help="the whole suite serial vs the default -j auto",
                         description="Wall time of the whole suite (child `./lab run`s) "
                         "serial (-j 1) and with the default -j auto, the modes taking turns, "
                         "RUNS times each after one untimed warm-up; min/median/max, the ratio "
                         f"to serial (targets: <= {parallel.PARALLEL_TARGET:g}x and a median "
                         f"<= {parallel.DEFAULT_TARGET_S:g} s) and the tests whose outcome "
                         "changed between runs of a mode. Exit 1 if a target was missed.")
    options.kernel(bp)
    options.runs(bp, 5, "runs per mode")
    options.selection(bp)


def _aux(bsub: argparse._SubParsersAction) -> None:
    _probe_bench(bsub, "aux", "perf AUX: bytes/s through the test PMU and a reader",
                 "AUX bytes/s through the lab's test PMU and the probe's reader (records "
                 "consumed; every byte checked).")


def _build(bsub: argparse._SubParsersAction) -> None:
    bk = bsub.add_parser("build", help="kernel build times: full, incremental, a bisect step",
                         description="Full builds of Debian's linux-source-6.12 with "
                         "minimal.config and ringbuf.config (no ccache), an incremental rebuild "
                         "after touching kernel/trace/ring_buffer.c, and one bisect step end to "
                         "end (rebuild after a one-file change, boot, one probe).")
    bk.add_argument("--no-ringbuf", action="store_true", help="skip the ringbuf.config build, "
                    "the longest")


def _cpu_models(bsub: argparse._SubParsersAction) -> None:
    bc = bsub.add_parser("cpu-models", help="TCG CPU models: boot to SSH ready, clean or not",
                         description="Boots the kernel RUNS times per TCG CPU model, the "
                         "models taking turns, snapshots off: QEMU start to SSH ready of the "
                         "boots with no kernel splat, and what went wrong in the others.")
    options.kernel(bc)
    options.runs(bc, 3, "boots per model")
    bc.add_argument("--models", help="';'-separated -cpu values (default: the arch's "
                    "Arch.tcg_cpu_models)")


def _tcg_threads(bsub: argparse._SubParsersAction) -> None:
    bt = bsub.add_parser("tcg-threads", help="single- vs multi-threaded TCG for several "
                         "vCPUs: do they run together, and does text patching oops",
                         description="Boots a guest of CPUS vCPUs RUNS times per mode "
                         "(single-threaded TCG, multi-threaded with qemu64,-cx16 and with max), "
                         "the modes taking turns, snapshots off: how often both vCPUs run "
                         "inside a 1 ms window (probes/probe_interleave.py), and whether "
                         "flipping every static key and the function tracer under load "
                         "oopses. Exit 1 if no multi-threaded mode was clean every time.")
    options.kernel(bt)
    options.runs(bt, 3, "boots per mode")
    bt.add_argument("--cpus", type=int, default=2, help="vCPUs (default 2)")
    bt.add_argument("--seconds", type=float, default=3.0,
                    help="of the interleave probe (default 3)")


def _explore(bsub: argparse._SubParsersAction) -> None:
    bx = bsub.add_parser("explore", help="the explorer's steps/s and sequences/min per path",
                         description="RUNS runs of SECONDS per path of `./lab explore` in one "
                         "guest (the paths taking turns, a seed per run, shrinking off): "
                         "steps/s and sequences/min, min/median/max; target 50 steps/s per "
                         "path. Exit 1 if a path missed it.")
    options.kernel(bx)
    options.runs(bx, 3, "runs per path")
    bx.add_argument("--seconds", type=float, default=20.0, help="of each run (default 20)")
    bx.add_argument("--actors", type=int, default=1, choices=(1, 2, 3, 4),
                    help="threads at once per sequence (./lab explore --actors)")
    bx.add_argument("--load", default="", metavar="NAME[@CPU],...",
                    help="loads beside each run (./lab explore --load); their rounds/s too")


def _nightly(bsub: argparse._SubParsersAction) -> None:
    bn = bsub.add_parser("nightly", help="a 2-cell nightly on a LocalCluster vs the same two "
                         "./lab runs in turn, wall time",
                         description="Wall time of a nightly of one kernel with two test "
                         "selections (two cells) on a LocalCluster of two workers, against "
                         "the same two `./lab run`s one after the other.")
    options.kernel(bn, "the kernel (default: default_kernel)")
    bn.add_argument("-k", action="append", metavar="EXPR", help="a cell's test selection "
                    "(twice; default: two small ones)")


def _probe_bench(bsub: argparse._SubParsersAction, name: str, help_: str, description: str
                 ) -> argparse.ArgumentParser:
    """A probe benchmark's subcommand: --kernel and --runs."""
    b = bsub.add_parser(name, help=help_, description=description)
    options.kernel(b)
    options.runs(b, 3)
    return b


def main(args: argparse.Namespace) -> int:
    """Run the benchmark named on the command line, the kernel resolved once here."""
    if args.bench == "build":  # no kernel: it builds its own from linux-source
        return build.run(run_folder.config(args), ringbuf=not args.no_ringbuf)
    cfg, spec = options.config_and_kernel(args)
    if args.bench == "perf-ring":
        return perf_ring.run(cfg, spec, runs=args.runs)
    if args.bench == "aux":
        return aux.run(cfg, spec, runs=args.runs)
    if args.bench == "trace-mmap":
        return trace_mmap.run(cfg, spec, runs=args.runs, events=args.events)
    if args.bench == "parallel":
        return parallel.run(cfg, spec, runs=args.runs, selection=args.k)
    if args.bench == "cpu-models":
        models = cpu_models.parse_models(args.models, arches.get(spec.arch))
        return cpu_models.run(cfg, spec, models, args.runs)
    if args.bench == "tcg-threads":
        if args.cpus < 2:
            raise ConfigError(f"--cpus {args.cpus}: at least 2 (two vCPUs to interleave)")
        return tcg_threads.run(cfg, spec, runs=args.runs, cpus=args.cpus, seconds=args.seconds)
    if args.bench == "explore":
        check_loads(args.load)
        return explore.run(cfg, spec, runs=args.runs, seconds=args.seconds, actors=args.actors,
                           load=args.load)
    if args.bench == "nightly":
        return nightly_bench.run(cfg, spec, tuple(args.k or nightly_bench.SELECTIONS))
    if args.throwaway:
        return throwaway.run(cfg, spec, runs=args.runs)
    return boot.run(cfg, spec, runs=args.runs, probe_runs=args.probe_runs, cold=args.cold,
                    cpus=args.cpus)
