"""The `./lab` command line: run, boot, ssh, doctor, selftest, bench."""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness import cache, config as lab_config, host, progress
from harness.boot import accel
from harness.commands import lab_run
from harness.debian import mirror
from harness.kernels import kernel
from harness.results import history, known_issues, matrix
from harness.errors import LabError
from harness.lab import Lab

log = logging.getLogger("ringlab")
REPO = Path(__file__).resolve().parent.parent
SUITE = REPO / "tests" / "kernel"


def _setup_logging(verbose: bool, logfile: Path | None = None) -> None:
    root = logging.getLogger()
    root.setLevel(logging.DEBUG)
    for h in list(root.handlers):
        root.removeHandler(h)
    screen = logging.StreamHandler(sys.stderr)
    screen.setLevel(logging.DEBUG if verbose else logging.INFO)
    screen.setFormatter(logging.Formatter("lab: %(message)s" if not verbose else
                                          "lab: %(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    root.addHandler(screen)
    if logfile is not None:
        logfile.parent.mkdir(parents=True, exist_ok=True)
        f = logging.FileHandler(logfile)
        f.setLevel(logging.DEBUG)
        f.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(f)
    # paramiko logs a traceback for every refused attempt while the guest's sshd starts;
    # harness/boot/ssh.py reports what matters.
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)


def _config(args: argparse.Namespace) -> lab_config.LabConfig:
    path = Path(args.lab_config or os.environ.get("RINGLAB_CONFIG") or REPO / "lab.yaml")
    return lab_config.load(path)


def cmd_run(args: argparse.Namespace) -> int:
    """The main job: the kernel test suite on one kernel (or several), with reports."""
    cfg = _config(args)
    names = _kernel_names(cfg, args.kernel)
    known_issues.load()  # a broken list is a clear error here, not a pytest INTERNALERROR
    if len(names) > 1:
        return _run_many(cfg, args, names)
    report_dir = Path(args.report_dir) if args.report_dir else \
        cfg.reports_dir / time.strftime(f"%Y%m%d-%H%M%S-{lab_config.file_safe(names[0])}")
    _make_report_dir(report_dir)
    _setup_logging(args.verbose, report_dir / "lab.log")
    if not args.report_dir:
        _point_latest(cfg, report_dir)
    # Fetch, build and prepare the kernel before pytest collects anything: progress on screen,
    # and a kernel that cannot be had is one `lab: error:` naming it, not an error per test.
    prepared = cfg
    if isinstance(cfg.kernel(names[0]).source, lab_config.BuildKernel):
        prepared = lab_config.with_build(cfg, names[0], tuple(Path(s).resolve()
                                                              for s in args.series),
                                         Path(args.tree).resolve() if args.tree else None)
    try:
        Lab(prepared, refresh=args.refresh).kernel(names[0])
    except LabError as e:
        # A multi-kernel table and a nightly cell say "not run: why" from this.
        (report_dir / "summary.json").write_text(json.dumps(
            {"kernel": names[0], "not_run": e.message, "counts": {}}, indent=2))
        raise
    args.refresh = False  # done: the suite's own Lab finds the kernel prepared
    return _run_suite(cfg, args, names[0], report_dir)


def _make_report_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / ".writable").touch()
        (path / ".writable").unlink()
    except OSError as e:
        raise LabError(f"cannot write reports to {path}: {e.strerror}",
                       hint="set reports.dir in lab.yaml to a folder you can write") from None


def _kernel_names(cfg: lab_config.LabConfig, arg: str | None) -> list[str]:
    """--kernel: one name, a comma-separated list, or 'all' (every kernel of lab.yaml)."""
    if arg == "all":
        return sorted(cfg.kernels)
    names = [n.strip() for n in (arg or "").split(",") if n.strip()] or [cfg.kernel(None).name]
    return [cfg.kernel(n).name for n in names]  # each checked: unknown names are an error


def _point_latest(cfg: lab_config.LabConfig, report_dir: Path) -> None:
    latest = cfg.reports_dir / "latest"
    if latest.is_symlink() or not latest.exists():
        latest.unlink(missing_ok=True)
        latest.symlink_to(report_dir.name)


def _run_suite(cfg: lab_config.LabConfig, args: argparse.Namespace, kernel_name: str,
               report_dir: Path) -> int:
    import pytest

    argv = [str(SUITE), "-p", "harness.pytest_plugin", "--lab-config", str(cfg.path),
            "--kernel", kernel_name, "--lab-report-dir", str(report_dir),
            "--junitxml", str(report_dir / "junit.xml"), "-o", "junit_logging=system-out",
            "--html", str(report_dir / "report.html"), "--self-contained-html",
            "-o", "junit_suite_name=ringlab", "-p", "no:cacheprovider", "-rfEsxXR"]
    for s in args.series:
        argv += ["--lab-series", s]
    if args.tree:
        argv += ["--lab-tree", args.tree]
    if args.keep_guest:
        argv.append("--keep-guest")
    if args.refresh:
        argv.append("--lab-refresh")
    if args.k:
        argv += ["-k", args.k]
    try:
        jobs = lab_run.run_jobs(cfg.machine.cpus, args.jobs)
    except ValueError as e:
        raise LabError(str(e)) from None
    if jobs > 1:  # pytest-xdist: a guest pool per worker, a test file stays on one worker
        argv += ["-n", str(jobs), "--dist", "loadfile"]
    argv += args.pytest_args
    log.debug("pytest %s", " ".join(argv))
    code = pytest.main(argv)
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        log.error("no test was selected (check -k / the test path)")
    elif args.history and (report_dir / "summary.json").exists():
        kept, comparison = history.record(Path(args.history), report_dir / "summary.json")
        text = "\n".join(comparison.lines()) + "\n"
        (report_dir / "history.txt").write_text(text)
        (report_dir / "history.json").write_text(history.as_json(comparison))
        print(text, end="")
        log.info("run kept in %s", kept)
    log.info("reports in %s", report_dir)
    return int(code)


def _run_many(cfg: lab_config.LabConfig, args: argparse.Namespace, names: list[str]) -> int:
    """The suite on each kernel, one after the other (each in its own process, with its own
    reports in a sub-folder), then one table with a column per kernel."""
    safe = {n: lab_config.file_safe(n) for n in names}
    parent = cfg.reports_dir / time.strftime("%Y%m%d-%H%M%S-" + "+".join(safe.values()))
    _make_report_dir(parent)
    _setup_logging(args.verbose, parent / "lab.log")
    _point_latest(cfg, parent)
    codes = {}
    for name in names:
        argv = lab_run.argv(lab_run.RunRequest(
            cfg.path, name, parent / safe[name], selection=args.k, jobs=args.jobs,
            refresh=args.refresh, history=args.history, pytest_args=tuple(args.pytest_args)))
        log.info("kernel %s: %s", name, " ".join(argv))
        codes[name] = subprocess.run(argv, cwd=REPO).returncode
    table = matrix.build({n: parent / safe[n] / "summary.json" for n in names})
    (parent / "summary.json").write_text(json.dumps(table, indent=2))
    text = matrix.render(table)
    (parent / "summary.txt").write_text(text)
    print(text, end="")
    log.info("reports in %s", parent)
    return max(codes.values())


def _state_path(lab: Lab) -> Path:
    return lab.cache_root / "guests" / "booted.json"


def cmd_boot(args: argparse.Namespace) -> int:
    """Boot a guest and keep it until Ctrl-C; `./lab ssh` finds it."""
    cfg = _config(args)
    lab = Lab(cfg, refresh=args.refresh)
    k = cfg.kernel(args.kernel)
    console_log = cfg.reports_dir / f"boot-{lab_config.file_safe(k.name)}-console.log"
    with lab.boot(k.name, console_log, cpus=args.cpus, cmdline=args.cmdline or "") as g:
        # Ctrl-C from here on is the way to stop: it may come while "Ctrl-C stops it" is still
        # being printed (a script that waits for that line signals at once), so the print is
        # inside the try too, not before it.
        try:
            state = {"pid": os.getpid(), "port": g.record.ssh_port,
                     "key": str(g.plan.key.private), "host_key": g.plan.rootfs.host_key,
                     "kernel": k.name, "release": g.kernel.release}
            cache.write_atomic(_state_path(lab), json.dumps(state).encode())
            print(f"guest {k.name} ({g.kernel.release}) up in {g.record.boot_s:.1f} s, accel "
                  f"{g.plan.accel}; console log: {console_log}\n"
                  f"  shell: ./lab ssh     (or: {' '.join(_ssh_argv(lab, state))})\n"
                  f"Ctrl-C stops it.", flush=True)
            while g.health() is None:
                time.sleep(1)
            log.error("guest died: %s", g.health())
            return 1
        except KeyboardInterrupt:
            return 0
        finally:
            _state_path(lab).unlink(missing_ok=True)


def _ssh_argv(lab: Lab, state: dict) -> list[str]:
    known = lab.cache_root / "ssh" / "known_hosts"
    cache.write_atomic(known, f"ringlab-guest {state['host_key']}\n".encode())
    return ["ssh", "-p", str(state["port"]), "-i", state["key"], "-o", "IdentitiesOnly=yes",
            "-o", "HostKeyAlias=ringlab-guest", "-o", f"UserKnownHostsFile={known}",
            "-o", "StrictHostKeyChecking=yes", "root@127.0.0.1"]


def cmd_ssh(args: argparse.Namespace) -> int:
    """A shell in the guest of `./lab boot`, or in a throw-away guest booted for it."""
    lab = Lab(_config(args))
    host.require(tuple(t for t in host.ALL_TOOLS if t.command == "ssh"))
    try:
        state = json.loads(_state_path(lab).read_text())
        os.kill(state["pid"], 0)
    except (OSError, ValueError, KeyError):
        state = None
    if state is not None:
        return subprocess.call(_ssh_argv(lab, state) + args.command)
    log.info("no guest from `./lab boot` is running; booting a throw-away one")
    k = lab.config.kernel(args.kernel)
    console_log = lab.config.reports_dir / f"ssh-{lab_config.file_safe(k.name)}-console.log"
    with lab.boot(k.name, console_log) as g:
        state = {"port": g.record.ssh_port, "key": str(g.plan.key.private),
                 "host_key": g.plan.rootfs.host_key}
        return subprocess.call(_ssh_argv(lab, state) + args.command)


def cmd_module(args: argparse.Namespace) -> int:
    """Build a test module of kernels/modules/ for a kernel of lab.yaml; print the .ko path."""
    cfg = _config(args)
    _setup_logging(args.verbose)
    print(Lab(cfg).module(args.name, args.kernel))
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    """Build a `build` kernel of lab.yaml (nothing happens if it is built already): its tree,
    series and config fragments; print the image, the release and any fragment option that did
    not survive olddefconfig."""
    cfg = _config(args)
    spec = cfg.kernel(args.kernel)
    if not isinstance(spec.source, lab_config.BuildKernel):
        raise LabError(f"kernel {spec.name} is not a `build` kernel of {cfg.path}; the build "
                       f"kernels are: {', '.join(_build_kernels(cfg)) or 'none'}")
    k, report = Lab(cfg).builder().prepare(spec, spec.source)
    print(f"{spec.name}: {k.release}: {k.vmlinuz}")
    print(f"  {'cached (nothing changed)' if report.cached else f'built in {report.seconds:.0f} s'}"
          + (f", {report.compiled} make steps, log {report.log}" if not report.cached else ""))
    for d in report.dropped:
        print(f"  fragment option not in the final .config: {d}")
    return 0


def cmd_review(args: argparse.Namespace) -> int:
    """Review a patch series: build the kernel without and with it, run the same tests on
    both, measure both (interleaved: base, patched, base, ...; a fresh guest per sample), and
    print what the series changed. Exit 1 (REGRESSION) if a test newly fails, newly flakes or
    newly skips, a new kernel warning appears, or a benchmark figure of a path the series
    touches is worse in every pair (patched/base < 0.95) with a median ratio < 0.90 while no
    figure of an untouched path (a control) moved as much. Exit 4 ("too noisy to judge") when
    a control did move as much; exit 0 otherwise. Figures from fewer than 3 runs per kernel
    are shown, not judged."""
    from harness.commands import bench
    from harness.kernels import series as patch_series
    from harness.results import review

    cfg = _config(args)
    name = cfg.kernel(args.kernel).name
    series = Path(args.series).resolve()
    patched_cfg = lab_config.with_build(cfg, name, (series,))
    out = cfg.reports_dir / time.strftime(f"%Y%m%d-%H%M%S-review-{lab_config.file_safe(name)}")
    _make_report_dir(out)
    _setup_logging(args.verbose, out / "lab.log")
    _point_latest(cfg, out)
    # Both builds first: a series that does not apply, or a build error, stops here.
    Lab(cfg).kernel(name)
    Lab(patched_cfg).kernel(name)
    for label, extra in (("base", ()), ("patched", (series,))):
        argv = lab_run.argv(lab_run.RunRequest(
            cfg.path, name, out / label, selection=args.k, series=extra,
            pytest_args=tuple(args.pytest_args)))
        log.info("review: %s: %s", label, " ".join(argv))
        code = subprocess.run(argv, cwd=REPO).returncode
        if code not in (0, 1):
            raise LabError(f"the {label} run could not complete (exit {code}); see {out / label}")
    pairs = bench.review_figures({"base": cfg, "patched": patched_cfg}, name, out,
                                 args.bench_runs) if args.bench_runs else []
    touched = review.touched_paths(review.touched_files(
        [p.text for p in patch_series.read(series)]))
    docs = {label: json.loads((out / label / "summary.json").read_text())
            for label in ("base", "patched")}
    result = review.compare(docs["base"], docs["patched"], pairs, touched)
    text = "\n".join([f"review of {series} on {name}", *result.lines()]) + "\n"
    (out / "review.txt").write_text(text)
    (out / "review.json").write_text(result.as_json())
    print(text, end="")
    log.info("review reports in %s", out)
    return result.exit_status


def cmd_bisect(args: argparse.Namespace) -> int:
    """Find the first bad commit between --good and --bad of a `build` kernel's git tree: git
    bisect run with a step that builds, boots and runs the selected tests."""
    from harness.commands import bisect

    cfg = _config(args)
    name = cfg.kernel(args.kernel).name
    out = cfg.reports_dir / time.strftime(f"%Y%m%d-%H%M%S-bisect-{lab_config.file_safe(name)}")
    _make_report_dir(out)
    _setup_logging(args.verbose, out / "lab.log")
    _point_latest(cfg, out)
    return bisect.run(cfg, name, args.good, args.bad, args.k, args.on_build_failure, out,
                      args.pytest_args, args.on_boot_failure)


def cmd_bisect_step(args: argparse.Namespace) -> int:
    """One bisect step on the commit checked out in --tree (default: the current folder):
    build, boot, run the selected tests; exit 0 good, 1 bad, 125 skip (build or boot
    failure), 255 abort. Usable by hand: git bisect run ./lab bisect-step --kernel NAME -k EXPR"""
    from harness.commands import bisect

    cfg = _config(args)
    name = cfg.kernel(args.kernel).name
    tree = Path(args.tree or os.getcwd()).resolve()
    out = Path(args.report_dir) if args.report_dir else \
        cfg.reports_dir / time.strftime(
            f"%Y%m%d-%H%M%S-bisect-step-{lab_config.file_safe(name)}")
    _make_report_dir(out)
    steps = Path(args.steps_log) if args.steps_log else out / "steps.jsonl"
    return bisect.step(cfg, name, tree, args.k, args.on_build_failure, steps, out,
                       args.pytest_args, args.on_boot_failure)


def cmd_mutate(args: argparse.Namespace) -> int:
    """Measure the suite: build and test the unmutated kernel, then each mutant of
    kernels/mutants/ (a small patch breaking one ABI rule of the ring-buffer paths): apply,
    rebuild incrementally, run the same tests, revert. Prints the kill table; exit 1 if a
    mutant that built and booted survived."""
    from harness.commands import mutate

    cfg = _config(args)
    name = cfg.kernel(args.kernel).name
    mutants = mutate.select(mutate.catalog(), args.mutants)
    if args.jobs > 1:
        log.warning("-j %d: mutants run one at a time for now (on 2 cores two kernel builds "
                    "only slow each other; make already uses every core)", args.jobs)
    out = cfg.reports_dir / time.strftime(f"%Y%m%d-%H%M%S-mutate-{lab_config.file_safe(name)}")
    _make_report_dir(out)
    _setup_logging(args.verbose, out / "lab.log")
    _point_latest(cfg, out)
    return mutate.run(mutate.Plan(cfg, name, mutants, args.k, args.pytest_args, out))


def cmd_nightly(args: argparse.Namespace) -> int:
    """lab.yaml's nightly matrix (kernels x config variants x guest profiles x test
    selections), each cell a `./lab run` of its own run as a Dask task: on a LocalCluster the
    lab starts (workers: host cores / guest vCPUs), or with --scheduler on an existing Dask
    cluster whose workers are lab hosts at this checkout's commit. One report: the matrix, the
    cells' report folders, one merged kcidb.json, history per kernel line. Exit 0 if every
    cell passed, 1 otherwise."""
    from harness.commands import nightly

    cfg = _config(args)
    nightly.cells(cfg)  # a config without a nightly section fails before any folder is made
    out = cfg.reports_dir / time.strftime("%Y%m%d-%H%M%S-nightly")
    _make_report_dir(out)
    _setup_logging(args.verbose, out / "lab.log")
    _point_latest(cfg, out)
    return nightly.run(nightly.Plan(
        cfg, out, scheduler=args.scheduler, workers=args.workers,
        history=Path(args.history).resolve() if args.history else None,
        refresh=False if args.no_refresh else None, only=tuple(args.cell)))


def cmd_splats(args: argparse.Namespace) -> int:
    """The kernel splats of a console log, offline (like kunit.py's parse stage): each one's
    title, RIP, call trace and tainting modules; with --kernel of a kernel the lab built, its
    frames as file:line. Exit 1 if there is any, 0 if none, 2 if the file cannot be read."""
    from harness.boot import decode, splats

    text = _read_console_log(Path(args.log))
    found = [s.as_dict() for s in splats.find(text.splitlines())]
    if args.kernel and found:
        cfg = _config(args)
        spec = cfg.kernel(args.kernel)
        if not isinstance(spec.source, lab_config.BuildKernel):
            raise LabError(f"--kernel {spec.name}: not a `build` kernel of {cfg.path}, so there "
                           f"is no vmlinux to decode with; the build kernels are: "
                           f"{', '.join(_build_kernels(cfg)) or 'none'}")
        found = decode.with_decoded(found, decode.decoder_for(Lab(cfg).kernel(spec.name)),
                                    limit=len(found))
    for i, s in enumerate(found, 1):
        print(f"splat {i} of {len(found)}: " + "\n".join(decode.render(s)))
    print(f"{len(found)} splat(s) in {args.log}")
    return 1 if found else 0


def _read_console_log(path: Path) -> str:
    """A console log's text; a missing, unreadable or binary file is the user's error."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise LabError(f"cannot read the console log {path}: {e.strerror or e}") from None
    if b"\0" in data[:65536]:
        raise LabError(f"{path} is not a console log (it holds binary data)")
    return data.decode("utf-8", errors="replace")


def _build_kernels(cfg: lab_config.LabConfig) -> list[str]:
    return [n for n, s in cfg.kernels.items() if isinstance(s.source, lab_config.BuildKernel)]


def cmd_doctor(args: argparse.Namespace) -> int:
    """Host dependencies, the KVM verdict, the mirror, the cache."""
    ok = True
    print("host tools:")
    for t in host.ALL_TOOLS:
        found = not host.missing((t,))
        ok &= found
        print(f"  {'ok     ' if found else 'MISSING'} {t.command:20s} ({t.package}: {t.why})")
    try:
        cfg = _config(args)
        print(f"config: {cfg.path} (kernels: {', '.join(cfg.kernels)}; default "
              f"{cfg.default_kernel})")
    except LabError as e:
        print(f"config: ERROR {e}")
        return 2
    try:
        m = mirror.resolve(cfg.mirror)
        print(f"mirror: {m.url} (from {m.origin}; keyring {m.keyring})")
    except LabError as e:
        ok = False
        print(f"mirror: ERROR {e}")
    root = cache.cache_root(cfg.cache_dir)
    verdict = root / "hosts" / f"{accel.host_id()}-kvm.json"
    if verdict.exists():
        v = json.loads(verdict.read_text())
        print(f"kvm: {'works' if v['kvm_works'] else 'does not work'} ({v['reason']}; "
              f"checked {time.ctime(v['checked_at'])}; {verdict})")
    else:
        print(f"kvm: not checked yet (/dev/kvm {'present' if os.path.exists('/dev/kvm') else 'absent'});"
              " the first boot with accel: auto checks it")
    print(f"machine.accel: {cfg.machine.accel}")
    entries = cache.entries(root)
    print(f"cache: {root} ({cache.human(sum(e.size for e in entries))} in entries ./lab gc "
          f"may remove; debs {cache.human(kernel.cache_usage(root, ('debs',)))})")
    for kind, size in cache.sizes_by_kind(entries).items():
        print(f"  {cache.KINDS[kind]:20s} {cache.human(size):>10s} "
              f"({sum(e.kind == kind for e in entries)} entries)")
    return 0 if ok else 1


def cmd_gc(args: argparse.Namespace) -> int:
    """Free the cache: remove build folders, module build roots, unpacked trees, bisect
    worktrees, mutate trees and prepared kernels that none of the last --keep runs used, then
    the least recently used ones beyond --max-size. An entry a running lab holds is skipped."""
    if args.keep < 0:
        raise LabError(f"--keep: expected 0 or more runs, got {args.keep}")
    max_size = cache.parse_size(args.max_size) if args.max_size else None
    root = cache.cache_root(_config(args).cache_dir)
    result = cache.collect(root, args.keep, max_size, dry_run=args.dry_run)
    for line in result.lines():
        print(line)
    return 0


def cmd_selftest(args: argparse.Namespace) -> int:
    """The project's own tests, through tox: unit, then the end-to-end tier; with --all also
    the slow kernel-build tier (kbuild)."""
    tox = shutil.which("tox")
    if tox is None:
        raise LabError("tox is not installed in the lab's virtualenv",
                       hint="rm -rf .venv and run ./lab again")
    env = args.env or ("unit,types,e2e,kbuild" if args.all else None)
    argv = [tox, "-c", str(REPO / "tox.ini")] + (["-e", env] if env else []) + args.tox_args
    log.info("selftest: %s", " ".join(argv))
    return subprocess.call(argv, cwd=REPO)


def cmd_bench(args: argparse.Namespace) -> int:
    from harness.commands import bench

    cfg = _config(args)
    if args.bench == "perf-ring":
        return bench.perf_ring_bench(cfg, args.kernel, runs=args.runs)
    if args.bench == "aux":
        return bench.aux_bench(cfg, args.kernel, runs=args.runs)
    if args.bench == "trace-mmap":
        return bench.trace_mmap_bench(cfg, args.kernel, runs=args.runs, events=args.events)
    if args.bench == "build":
        _setup_logging(args.verbose)
        return bench.build_bench(cfg, ringbuf=not args.no_ringbuf)
    if args.bench == "parallel":
        from harness.commands import bench_parallel
        return bench_parallel.parallel_bench(cfg, args.kernel, runs=args.runs, selection=args.k)
    if args.bench == "cpu-models":
        from harness.commands import bench_cpu
        arch = cfg.kernel(args.kernel).arch
        return bench_cpu.cpu_models_bench(cfg, args.kernel,
                                          bench_cpu.parse_models(args.models, arch), args.runs)
    if args.bench == "nightly":
        return bench.nightly_bench(cfg, args.kernel, tuple(args.k or bench.NIGHTLY_SELECTIONS))
    return bench.boot_bench(cfg, args.kernel, runs=args.runs, probe_runs=args.probe_runs,
                            cold=args.cold, cpus=args.cpus)


KERNEL_FORMS = ("a kernel of lab.yaml, debian:SUITE/FLAVOUR[=VERSION], a kernel image "
                "(bzImage, vmlinuz, arm64 Image), a make O= folder, or a kernel source tree "
                "(built with ringbuf.config)")


def _kernel_option(parser: argparse.ArgumentParser, what: str) -> None:
    """--kernel (every form a kernel can be named in) and --modules for an image."""
    parser.add_argument("--kernel", metavar="KERNEL", help=f"{what}: {KERNEL_FORMS}")
    parser.add_argument("--modules", metavar="DIR", help="with --kernel IMAGE: its modules "
                        "(lib/modules/<release> or the folder holding it; default: found beside "
                        "the image)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="./lab", description="ringlab: a QEMU test lab for the "
                                "kernel's ring-buffer mapping paths")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging on screen")
    p.add_argument("--lab-config", metavar="PATH", help="lab.yaml to use (default: the "
                   "checkout's; or $RINGLAB_CONFIG)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("run", help="run the kernel test suite on a kernel, write reports",
                       description=cmd_run.__doc__)
    _kernel_option(r, "the kernel; several joined by commas, or 'all' of lab.yaml, run one "
                   "after the other into one report with a column per kernel")
    r.add_argument("--report-dir", help=argparse.SUPPRESS)  # set by a multi-kernel run
    # Set by ./lab review and ./lab bisect-step: the build kernel with a series, another tree.
    r.add_argument("--series", action="append", default=[], help=argparse.SUPPRESS)
    r.add_argument("--tree", help=argparse.SUPPRESS)
    r.add_argument("-k", metavar="EXPR", help="only tests matching EXPR (pytest -k)")
    r.add_argument("-j", "--jobs", metavar="N", default="1",
                   help="run N guests at once (pytest-xdist: one guest pool per worker, a test "
                   "file stays on one worker); 'auto': host cores / guest vCPUs (default 1)")
    r.add_argument("--keep-guest", action="store_true", help="keep the guest up at the end")
    r.add_argument("--refresh", action="store_true", help="look for a newer kernel package")
    r.add_argument("--history", metavar="DIR", help="keep this run's summary in DIR and compare "
                   "it with the previous run of the same kernel (new failures, fixed, flaky)")
    r.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    r.set_defaults(func=cmd_run)

    b = sub.add_parser("boot", help="boot a guest and keep it until Ctrl-C",
                       description=cmd_boot.__doc__)
    _kernel_option(b, "the kernel")
    b.add_argument("--cpus", type=int, help="vCPUs (default: machine.cpus)")
    b.add_argument("--cmdline", help="extra kernel command line")
    b.add_argument("--refresh", action="store_true", help="look for a newer kernel package")
    b.set_defaults(func=cmd_boot)

    s = sub.add_parser("ssh", help="a shell in the booted guest", description=cmd_ssh.__doc__)
    _kernel_option(s, "the kernel of a throw-away guest when none is booted")
    s.add_argument("command", nargs="*", help="command to run instead of a shell")
    s.set_defaults(func=cmd_ssh)

    mo = sub.add_parser("module", help="build a test module (kernels/modules/NAME) for a kernel",
                        description=cmd_module.__doc__)
    mo.add_argument("name", help="the module's folder under kernels/modules/")
    _kernel_option(mo, "the kernel")
    mo.set_defaults(func=cmd_module)

    bu = sub.add_parser("build", help="build a kernel from a tree + series + config fragments",
                        description=cmd_build.__doc__)
    _kernel_option(bu, "the kernel to build (a build kernel or a source tree)")
    bu.set_defaults(func=cmd_build)

    rv = sub.add_parser("review", help="a patch series: base vs base+series, one table",
                        description=cmd_review.__doc__,
                        epilog="exit status: 0 no regression, 1 REGRESSION, 4 too noisy to "
                        "judge (a control figure moved as much as a judged one), 2 error")
    rv.add_argument("series", help="a folder of *.patch, a series file, or an mbox (b4 am)")
    _kernel_option(rv, "the kernel to patch, a build kernel (its own series, if any, is part "
                   "of the base) or a source tree")
    rv.add_argument("-k", metavar="EXPR", help="only tests matching EXPR (pytest -k)")
    rv.add_argument("--bench-runs", type=int, default=3, help="throughput runs per kernel, "
                    "interleaved with the other kernel's (0: no benchmark; below 3 the figures "
                    "are shown but not judged; default 3)")
    rv.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    rv.set_defaults(func=cmd_review)

    bi = sub.add_parser("bisect", help="find the commit that broke a test (git bisect run)",
                        description=cmd_bisect.__doc__)
    bi.add_argument("--good", required=True, metavar="REV", help="a commit where the tests pass")
    bi.add_argument("--bad", required=True, metavar="REV", help="a later commit where they fail")
    _kernel_option(bi, "the kernel to bisect (a build kernel or a source tree, a git checkout)")
    bi.add_argument("-k", metavar="EXPR", help="the tests that decide (pytest -k)")
    bi.add_argument("--on-build-failure", choices=("skip", "bad", "abort"), default="skip",
                    help="what a commit that does not build is (default: skip)")
    bi.add_argument("--on-boot-failure", choices=("skip", "bad", "abort"), default="skip",
                    help="what a commit whose kernel does not boot is (default: skip)")
    bi.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    bi.set_defaults(func=cmd_bisect)

    bs = sub.add_parser("bisect-step", help="one bisect step: build, boot, test; exit "
                        "0/1/125 for git bisect run", description=cmd_bisect_step.__doc__)
    _kernel_option(bs, "the kernel to build (a build kernel or a source tree)")
    bs.add_argument("--tree", help="the checkout to build (default: the current folder)")
    bs.add_argument("-k", metavar="EXPR", help="the tests that decide (pytest -k)")
    bs.add_argument("--on-build-failure", choices=("skip", "bad", "abort"), default="skip")
    bs.add_argument("--on-boot-failure", choices=("skip", "bad", "abort"), default="skip")
    bs.add_argument("--steps-log", help=argparse.SUPPRESS)
    bs.add_argument("--report-dir", help=argparse.SUPPRESS)
    bs.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    bs.set_defaults(func=cmd_bisect_step)

    mu = sub.add_parser("mutate", help="measure the suite: which mutants of kernels/mutants/ "
                        "its tests kill", description=cmd_mutate.__doc__)
    _kernel_option(mu, "the kernel to build (a build kernel or a source tree)")
    mu.add_argument("--mutants", metavar="SET", help="comma-separated mutant ids or globs "
                    "('003', '01*'), kernel files ('trace.c'), or .patch files (default: all)")
    mu.add_argument("-k", metavar="EXPR", help="only tests matching EXPR (pytest -k); a "
                    "mutant's Tests: header narrows it further")
    mu.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="accepted, but "
                    "mutants run serially for now (one build at a time: on 2 cores parallel "
                    "kernel builds only slow each other)")
    mu.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    mu.set_defaults(func=cmd_mutate)

    ni = sub.add_parser("nightly", help="lab.yaml's nightly matrix, each cell a ./lab run, as "
                        "Dask tasks (a LocalCluster, or --scheduler)", description=cmd_nightly.__doc__)
    ni.add_argument("--scheduler", metavar="tcp://HOST:8786", help="an existing Dask "
                    "scheduler whose workers are lab hosts (default: a LocalCluster of this host)")
    ni.add_argument("--workers", type=int, metavar="N", help="LocalCluster worker processes "
                    "(default: host cores / guest vCPUs, at most one per cell)")
    ni.add_argument("--cell", action="append", default=[], metavar="NAME", help="only this "
                    "cell (again for more)")
    ni.add_argument("--history", metavar="DIR", help="where runs are kept per kernel line "
                    "(default: nightly.history, else <reports.dir>/history)")
    ni.add_argument("--no-refresh", action="store_true", help="do not look for newer Debian "
                    "kernel packages (default: nightly.refresh)")
    ni.set_defaults(func=cmd_nightly)

    sp = sub.add_parser("splats", help="the kernel splats of a console log (decoded with "
                        "--kernel of a built kernel); exit 1 if any", description=cmd_splats.__doc__)
    sp.add_argument("log", metavar="CONSOLE.LOG", help="a console log (console-<kernel>.log of a "
                    "report, or any kernel log)")
    _kernel_option(sp, "a kernel with a vmlinux (a build kernel, a make O= folder): decode the "
                   "frames to file:line with it")
    sp.set_defaults(func=cmd_splats)

    d = sub.add_parser("doctor", help="check the host, KVM, mirror and cache",
                       description=cmd_doctor.__doc__)
    d.set_defaults(func=cmd_doctor)

    gc = sub.add_parser("gc", help="free the cache: entries not used by the last N runs, or "
                        "beyond a size", description=cmd_gc.__doc__)
    gc.add_argument("--keep", type=int, default=5, metavar="N", help="keep what the last N "
                    "runs used (default 5)")
    gc.add_argument("--max-size", metavar="SIZE", help="then remove the least recently used "
                    "entries until the rest fits (20G, 512M)")
    gc.add_argument("--dry-run", action="store_true", help="say what would be freed, remove "
                    "nothing")
    gc.set_defaults(func=cmd_gc)

    t = sub.add_parser("selftest", help="run the project's own tests (via tox)",
                       description=cmd_selftest.__doc__)
    t.add_argument("-e", "--env", help="tox environments (default: unit,types,e2e)")
    t.add_argument("--all", action="store_true", help="also the slow tier that builds and "
                   "bisects real kernels (tox env kbuild)")
    t.add_argument("tox_args", nargs="*", help="more tox arguments (after --)")
    t.set_defaults(func=cmd_selftest)

    be = sub.add_parser("bench", help="benchmarks", description="Benchmarks.")
    bsub = be.add_subparsers(dest="bench", required=True, metavar="BENCH")
    bb = bsub.add_parser("boot", help="boot time, probe round trip, harness RSS, cold start",
                         description="QEMU start to SSH-ready (N boots), probe round trip, "
                         "harness peak RSS; --cold also times download + rootfs build.")
    _kernel_option(bb, "the kernel")
    bb.add_argument("--runs", type=int, default=5, help="boots to time (default 5)")
    bb.add_argument("--probe-runs", type=int, default=30, help="probe round trips (default 30)")
    bb.add_argument("--cpus", type=int, help="vCPUs (default: machine.cpus)")
    bb.add_argument("--cold", action="store_true", help="also time a cold start in an empty "
                    "cache (download + rootfs build)")
    bb.set_defaults(func=cmd_bench)
    _bench_parser(bsub, "perf-ring", "perf ring buffer: mmap vs read() rates, test wall",
                  "Records/s read through the mmap'd perf buffer vs counter reads/s through "
                  "read() of a group, and the wall time of tests/kernel/test_perf_ring.py.")
    bt = _bench_parser(bsub, "trace-mmap", "tracefs buffer: mmap vs read() vs splice() rates",
                       "Events/s consumed from a tracefs CPU buffer through the mapping, read() "
                       "and splice() of trace_pipe_raw (transport only and parsed), and the "
                       "wall time of tests/kernel/test_trace_mmap.py.")
    bp = bsub.add_parser("parallel", help="the whole suite serial vs -j 2 vs -j auto",
                         description="Wall time of the whole suite (child `./lab run`s) "
                         "serial, with -j 2 and with -j auto, the modes taking turns, RUNS "
                         "times each after one untimed warm-up; min/median/max, the ratio to "
                         "serial (target: -j 2 <= 0.6x) and the tests whose outcome changed "
                         "between runs of a mode. Exit 1 if -j 2 missed the target.")
    _kernel_option(bp, "the kernel")
    bp.add_argument("--runs", type=int, default=5, help="runs per mode (default 5)")
    bp.add_argument("-k", metavar="EXPR", help="only tests matching EXPR (pytest -k)")
    bp.set_defaults(func=cmd_bench)
    _bench_parser(bsub, "aux", "perf AUX: bytes/s through the test PMU and a reader",
                  "AUX bytes/s through the lab's test PMU and the probe's reader (records "
                  "consumed; every byte checked).")
    bk = bsub.add_parser("build", help="kernel build times: full, incremental, a bisect step",
                         description="Full builds of Debian's linux-source-6.12 with "
                         "minimal.config and ringbuf.config (no ccache), an incremental rebuild "
                         "after touching kernel/trace/ring_buffer.c, and one bisect step end to "
                         "end (rebuild after a one-file change, boot, one probe).")
    bk.add_argument("--no-ringbuf", action="store_true", help="skip the ~15 min ringbuf build")
    bk.set_defaults(func=cmd_bench)
    bc = bsub.add_parser("cpu-models", help="TCG CPU models: boot to SSH ready, clean or not",
                         description="Boots the kernel RUNS times per TCG CPU model, the "
                         "models taking turns, snapshots off: QEMU start to SSH ready of the "
                         "boots with no kernel splat, and what went wrong in the others.")
    _kernel_option(bc, "the kernel")
    bc.add_argument("--runs", type=int, default=3, help="boots per model (default 3)")
    bc.add_argument("--models", help="';'-separated -cpu values (default for arm64: "
                    "max;max,pauth-impdef=on;cortex-a72;neoverse-n1)")
    bc.set_defaults(func=cmd_bench)
    bn = bsub.add_parser("nightly", help="a 2-cell nightly on a LocalCluster vs the same two "
                         "./lab runs in turn, wall time",
                         description="Wall time of a nightly of one kernel with two test "
                         "selections (two cells) on a LocalCluster of two workers, against "
                         "the same two `./lab run`s one after the other.")
    _kernel_option(bn, "the kernel (default: default_kernel)")
    bn.add_argument("-k", action="append", metavar="EXPR", help="a cell's test selection "
                    "(twice; default: two small ones)")
    bn.set_defaults(func=cmd_bench)
    bt.add_argument("--events", type=int, default=20000,
                    help="trace_marker events a run (default 20000)")
    return p


def _bench_parser(bsub: argparse._SubParsersAction, name: str, help_: str, description: str
                  ) -> argparse.ArgumentParser:
    """A probe benchmark's subcommand: --kernel and --runs."""
    b = bsub.add_parser(name, help=help_, description=description)
    _kernel_option(b, "the kernel")
    b.add_argument("--runs", type=int, default=3, help="throughput runs (default 3)")
    b.set_defaults(func=cmd_bench)
    return b


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "modules", None):
        if not args.kernel:
            print("lab: error: --modules goes with --kernel IMAGE", file=sys.stderr)
            return 2
        # One name travels to child runs: IMAGE?modules=DIR (harness/config.py).
        args.kernel = f"{args.kernel}{lab_config.MODULES_SUFFIX}{args.modules}"
    # One id for this command and every lab it starts (./lab gc --keep counts runs).
    os.environ.setdefault(cache.RUN_ENV, cache.new_run_id())
    if args.command != "run":
        _setup_logging(args.verbose)
    # SIGTERM takes the same path as Ctrl-C, so every guest is stopped on the way out. SIGINT
    # is set too: a lab started as a background job of a script inherits it ignored, and its
    # `kill -INT` (or a test's) would then never stop `./lab boot`.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return args.func(args)
    except LabError as e:
        print(f"lab: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("lab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
