"""`./lab mutate`: the suite measures its own strength.

Each mutant (kernels/mutants/NNN-name.patch) is a small patch to one of the four files of the
ring-buffer mapping paths that breaks one ABI rule. The command builds and tests the unmutated
kernel, then for each mutant: applies it, rebuilds, runs the selected tests through the same
`./lab run` command line review and bisect use, and reverts it. A mutant is killed when a test
that passed on the unmutated kernel in this run fails on the mutant; one that does not build
or boot is never a kill.

Why the builds stay incremental: mutants are applied to a hard-link copy of the kernel's tree
kept at a stable path in the cache (`mutate/<tree>/src`), given to the build as its tree
(like `./lab bisect-step --tree`), so every build uses the same source path and `make O=`
folder. A patched file becomes a new file (git apply writes a new file; the others stay
links); reverting puts the original inode back, with its mtime, and deletes the object built
from the mutated file, so the next build recompiles exactly that file (a ccache hit).
"""
from __future__ import annotations

import contextlib
import argparse
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import statistics
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness import cache, config as lab_config, paths
from harness.commands import options
from harness.runs import child_run, request, run_folder
from harness.runs.child_run import ChildRun
from harness.config import BuildKernel, LabConfig, with_build
from harness.errors import BuildError, LabError
from harness.kernels import mutants as catalogs, trees
from harness.kernels.mutants import (  # noqa: F401 (the catalog, as callers know it)
    CATALOG, KERNEL_FILES, Mutant, MutantError, catalog, parse, select)
from harness.kernels.series import Patch
from harness.results import history, matrix

log = logging.getLogger(__name__)
REPO = paths.REPO
KILLED, SURVIVED, NOT_BUILT, NOT_BOOTED, NOT_RUN = (
    "killed", "survived", "not built", "not booted", "not run")


# What a test may have been on the unmutated kernel for its failure on a mutant to kill it.
JUDGED_BASELINE = ("passed", "xfailed")


# --- judging a run ------------------------------------------------------------------------

@dataclass
class MutantResult:
    """One row of the kill table."""
    id: str
    file: str
    rule: str
    outcome: str                                 # killed, survived, not built, ...
    killed_by: list[str] = field(default_factory=list)
    why: str = ""                                # first failure line, build error, ...
    build_s: float = 0.0
    run_s: float = 0.0
    fixes_revert: str | None = None
    report: str = ""                             # the mutant's ./lab run report folder
    selftest_killers: list[str] | None = None    # with --selftests: the kernel's own that failed


def judge(baseline: ChildRun, child: ChildRun) -> tuple[str, list[str], str]:
    """(outcome, killing tests, why) of a mutant's run against the unmutated run. A kill
    needs a test that passed on the unmutated kernel, or xfailed there, and failed here for
    a reason other than a guest that did not boot. An xfail is a known kernel issue excusing
    exactly its symptom; the same test failing means a check outside that symptom failed
    (048 on 6.12.107: the known issue drops the refused first map's error, the mutant then
    leaves resize disabled, and the test fails on that)."""
    if child.summary is None:
        return NOT_RUN, [], "the test run wrote no summary.json"
    if child.not_run:  # the mutated kernel could not be prepared: nothing was judged
        return NOT_RUN, [], f"not run: {child.not_run}"
    if not child.summary.get("results"):  # the selection holds no test for this mutant
        return SURVIVED, [], "no test of the selection ran"
    failed = [t for t, o in child.outcomes.items() if o in history.FAILING]
    killers = [t for t in failed if matrix.SELFTEST not in t
               and baseline.outcomes.get(t) in JUDGED_BASELINE and not child.without_guest(t)]
    if killers:
        first = next(r for r in child.summary.get("results", [])
                     if r["test"] == killers[0] and r["outcome"] != "rerun")
        line = (first.get("reason") or "").strip().splitlines()
        return KILLED, killers, f"{killers[0].split('::')[-1]}: {line[0] if line else ''}"
    if not child.booted or any(child.without_guest(t) for t in failed):
        return NOT_BOOTED, [], "the guest did not boot"
    return SURVIVED, [], ""


def selftest_killers(baseline: ChildRun, child: ChildRun) -> list[str]:
    """The kernel's own selftest cases that passed on the unmutated kernel and fail here."""
    return [t for t, o in child.outcomes.items() if matrix.SELFTEST in t
            and o in history.FAILING and baseline.outcomes.get(t) in JUDGED_BASELINE
            and not child.without_guest(t)]


# --- the tree mutants are applied to ------------------------------------------------------

class Workspace:
    """The hard-link copy of a kernel tree that mutants are applied to, one at a time, and
    always reverted. Locked: two `./lab mutate` runs on one tree would mix mutants."""

    def __init__(self, tree: Path, cache_root: Path) -> None:
        self.tree = tree
        digest = hashlib.sha256(str(tree).encode()).hexdigest()[:16]
        self.root = cache.Layout(cache_root).mutate(digest)
        self.src = self.root / "src"
        self.backup = self.root / "orig"
        self.marker = self.root / "applied.json"
        self._lock: int | None = None

    @contextlib.contextmanager
    def opened(self) -> Iterator[Workspace]:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LabError(f"another ./lab mutate is using the tree {self.tree} "
                           f"({self.root} is locked)", hint="wait for it to finish") from None
        self._lock = fd
        usage = cache.Usage(self.root.parent.parent)  # ./lab gc leaves it be meanwhile
        usage.use(self.root)
        try:
            self.recover()
            trees.link_farm(self.tree, self.src)  # fresh links: the tree may have changed
            yield self
        finally:
            usage.close()
            os.close(fd)
            self._lock = None

    def recover(self) -> None:
        """Undo what a run killed with a mutant applied left: its objects in the build folders
        (the sources are made again from the tree)."""
        if not self.marker.exists():
            return
        try:
            state = json.loads(self.marker.read_text())
        except ValueError:
            state = {}
        log.warning("an earlier ./lab mutate stopped with mutant %s applied; cleaning up",
                    state.get("mutant", "?"))
        for out in state.get("outs", []):
            for rel in state.get("paths", []):
                drop_object(Path(out), rel)
        shutil.rmtree(self.backup, ignore_errors=True)
        self.marker.unlink()

    def check(self, mutant: Mutant) -> None:
        """Raise a MutantError naming the mutant and its rejected hunk unless it applies."""
        p = _git_apply(mutant, self.src, "--check")
        if p.returncode == 0:
            return
        m = re.search(r"error: patch failed: (\S+):(\d+)", p.stderr)
        hunk = Patch(mutant.path.name, mutant.text, mutant.path).hunk(
            m.group(1), int(m.group(2))) if m else None
        where = f" at {m.group(1)}:{m.group(2)}" if m else ""
        raise MutantError(f"mutant {mutant.path} does not apply to {self.tree}{where}: "
                          + "; ".join(p.stderr.strip().splitlines()[:2])
                          + (f"\nrejected hunk:\n{hunk}" if hunk else ""),
                          hint="rebase the mutant on this tree, or leave it out with --mutants")

    @contextlib.contextmanager
    def applied(self, mutant: Mutant, outs: list[Path]) -> Iterator[None]:
        """The mutant applied for the duration of the block, reverted however it ends."""
        self.check(mutant)
        shutil.rmtree(self.backup, ignore_errors=True)
        self.backup.mkdir(parents=True)
        rel = mutant.file
        original = self.src / rel
        saved = self.backup / rel
        saved.parent.mkdir(parents=True, exist_ok=True)
        os.link(original, saved)  # the original inode, mtime and all
        cache.write_atomic(self.marker, json.dumps(
            {"mutant": mutant.id, "paths": [rel], "outs": [str(o) for o in outs]}).encode())
        try:
            p = _git_apply(mutant, self.src)
            if p.returncode != 0:
                raise MutantError(f"mutant {mutant.path}: git apply failed: "
                                  f"{p.stderr.strip()[:300]}")
            yield
        finally:
            os.replace(saved, original)
            for out in outs:
                drop_object(out, rel)
            shutil.rmtree(self.backup, ignore_errors=True)
            self.marker.unlink(missing_ok=True)


def drop_object(out: Path, rel: str) -> None:
    """Delete the object make built from `rel` in the build folder `out`: with the source's
    old mtime back, make would otherwise keep the mutant's object."""
    (out / rel).with_suffix(".o").unlink(missing_ok=True)


def _git_apply(mutant: Mutant, tree: Path, *flags: str) -> subprocess.CompletedProcess:
    # GIT_CEILING_DIRECTORIES: never take a repository above the copy for the one to patch.
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tree.parent)}
    return subprocess.run(["git", "apply", "--whitespace=nowarn", *flags, "-"],
                          input=mutant.text, cwd=tree, capture_output=True, text=True, env=env)


# --- the run ------------------------------------------------------------------------------

@dataclass
class Plan:
    """What one `./lab mutate` does."""
    cfg: LabConfig
    name: str
    mutants: list[Mutant]
    selection: str | None
    pytest_args: list[str]
    report_dir: Path
    # Every mutant on the same tests as the unmutated kernel, its Tests: header ignored: what
    # a broken kernel costs the whole suite (issue 23 §3), not only which tests kill it.
    whole_suite: bool = False
    # Judge with `./lab explore` instead of the suite: this many seconds per path the
    # mutant's file serves (EXPLORE_PATHS), seed 1, stopping at the first failure no known
    # issue explains; a kill is such a failure, confirmed on a fresh guest, that the
    # unmutated kernel's explore did not have.
    explore_s: float | None = None
    # The kernel's own selftests too, every case on every mutant: a column of the kill table
    # says whether they caught it; the kill rate stays ours.
    selftests: bool = False


# The explorer's paths a kernel file serves.
EXPLORE_PATHS = {"kernel/events/core.c": ("pinning", "perf-ring", "perf-aux"),
                 "kernel/events/ring_buffer.c": ("perf-ring", "perf-aux"),
                 "kernel/trace/ring_buffer.c": ("trace-mmap",),
                 "kernel/trace/trace.c": ("trace-mmap",)}


def _explore(plan: Plan, tree: Path, paths: tuple[str, ...], out_dir: Path,
             stop_at_new: bool = True) -> tuple[dict[str, str], float]:
    """`./lab explore` of the kernel built from `tree` on `paths`: {failure key: what failed}
    of its confirmed failures that no known issue explains, and the wall time."""
    from harness.explore import report
    from harness.explore.session import Explore, ExploreRequest
    from harness.resources import Lab

    out_dir.mkdir(parents=True, exist_ok=True)
    lab = Lab(with_build(plan.cfg, plan.name, tree=tree))
    run = Explore(lab, ExploreRequest(plan.name, paths, plan.explore_s or 60, seed=1,
                                      stop_at_new=stop_at_new), out_dir,
                  say=lambda line: log.debug("%s", line))
    start = time.monotonic()
    try:
        run.run_all()
    finally:
        run.stop_guest()
        # every failure, known or new, with its reproducers: why a mutant was judged so
        report.write(out_dir, run.req, plan.name, run.kernel.release, run.results, False)
    found = {f.key: f"{f.key}: {f.got}"[:200] for r in run.results
             for f in r.failures.values() if f.confirmed and not f.known_issue}
    return found, time.monotonic() - start


def _explore_paths(mutants: list[Mutant]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for m in mutants for p in EXPLORE_PATHS.get(m.file, ())))


def _and(a: str | None, b: str | None) -> str | None:
    if a and b:
        return f"({a}) and ({b})"
    return a or b


def _run_tests(plan: Plan, tree: Path, selection: str | None, run_dir: Path
               ) -> tuple[ChildRun, float]:
    """`./lab run` of the kernel built from `tree`, in a child (as review and bisect do); its
    output goes to run_dir.log. Stopped (and its guests with it) if we are interrupted."""
    if plan.selftests and selection:
        selection = f"({selection}) or kselftest"
    req = request.make(plan.cfg, plan.name, run_dir, selection=selection,
                               tree=tree, selftests=plan.selftests,
                               pytest_args=tuple(plan.pytest_args))
    start = time.monotonic()
    with open(f"{run_dir}.log", "w") as out:
        out.write("$ " + " ".join(child_run.argv(req)) + "\n")
        out.flush()
        child = child_run.run(req, stdout=out, stderr=subprocess.STDOUT)
    return child, time.monotonic() - start


def _build(plan: Plan, tree: Path):
    """Build the kernel from `tree` (incrementally); (kernel, build report)."""
    from harness.resources import Lab

    lab = Lab(with_build(plan.cfg, plan.name, tree=tree))
    k = lab.kernel(plan.name)
    return k, lab.builds[plan.name]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep the per-build progress lines off the screen: one line per mutant is the report."""
    screen = logging.getLogger("ringlab")
    level = screen.level
    screen.setLevel(logging.WARNING)
    try:
        yield
    finally:
        screen.setLevel(level)


def run(plan: Plan) -> int:
    """The whole mutation run; prints the kill table. Exit 0 when every built and booted
    mutant was killed, 1 when some survived."""
    spec = plan.cfg.kernel(plan.name)
    if not isinstance(spec.source, BuildKernel):
        raise LabError(f"kernel {plan.name} is not a `build` kernel of {plan.cfg.path}: "
                       "./lab mutate rebuilds the kernel with each mutant")
    from harness.resources import Lab

    start = time.monotonic()
    tree = Lab(plan.cfg).builder().tree(spec, spec.source)
    ws = Workspace(tree, cache.cache_root(plan.cfg.cache_dir))
    results: list[MutantResult] = []
    with ws.opened():
        # Each mutant's patch for this tree; every mutant must have one before hours are spent.
        plan.mutants, newer = catalogs.since_split(plan.mutants, ws.src)
        for line in newer:
            log.info("mutate: %s", line)
        plan.mutants = catalogs.for_tree_all(plan.mutants, ws.src, ws.tree)
        log.info("mutate: building the unmutated kernel %s from %s", plan.name, ws.src)
        t = time.monotonic()
        k, report = _build(plan, ws.src)
        base_build = time.monotonic() - t
        outs = [report.out] if report.out else ([k.build_dir] if k.build_dir else [])
        base_dir = plan.report_dir / "unmutated"
        if plan.explore_s:
            return _run_explore(plan, ws, k, outs, base_dir, base_build, start, tree)
        log.info("mutate: running the tests on the unmutated kernel %s (%s)", k.release,
                 plan.selection or "the whole suite")
        base, base_run = _run_tests(plan, ws.src, plan.selection, base_dir)
        if base.summary is None or base.exit_code not in (0, 1):
            raise LabError(f"the tests could not run on the unmutated kernel (exit "
                           f"{base.exit_code}); see {base_dir}.log")
        if not base.booted:
            raise LabError(f"the unmutated kernel did not boot; see {base_dir}")
        counts = ", ".join(f"{v} {o}" for o, v in sorted(base.summary.get("counts", {}).items()))
        log.info("mutate: unmutated kernel: %s (build %.0f s, run %.0f s)", counts, base_build,
                 base_run)
        for i, m in enumerate(plan.mutants, 1):
            results.append(_one(plan, ws, m, outs, base))
            r = results[-1]
            log.info("mutant %d/%d %s: %s%s (build %.0f s, run %.0f s)", i, len(plan.mutants),
                     m.id, r.outcome.upper(), f": {r.why}" if r.why else "", r.build_s, r.run_s)
    wall = time.monotonic() - start
    doc = {"kernel": plan.name, "release": k.release, "tree": str(tree),
           "selection": plan.selection, "whole_suite": plan.whole_suite,
           "wall_s": round(wall, 1),
           "unmutated": {"counts": base.summary.get("counts", {}),
                         "build_s": round(base_build, 1),
                         "run_s": round(base_run, 1), "report": str(base_dir)},
           "totals": totals(results), "mutants": [asdict(r) for r in results]}
    text = render(doc)
    (plan.report_dir / "mutate.json").write_text(json.dumps(doc, indent=2) + "\n")
    (plan.report_dir / "mutate.txt").write_text(text)
    print(text, end="")
    log.info("mutate reports in %s", plan.report_dir)
    return 1 if doc["totals"][SURVIVED] else 0


def _run_explore(plan: Plan, ws: Workspace, k, outs: list[Path], base_dir: Path,
                 base_build: float, start: float, tree: Path) -> int:
    """The mutation run judged by the explorer: the unmutated kernel explored on every path
    the mutants' files serve, then each mutant on its own file's paths."""
    paths = _explore_paths(plan.mutants)
    log.info("mutate: exploring the unmutated kernel %s (%s, %.0f s each)", k.release,
             ", ".join(paths), plan.explore_s)
    base, base_run = _explore(plan, ws.src, paths, base_dir, stop_at_new=False)
    log.info("mutate: unmutated kernel: %d confirmed failure(s) no known issue explains: %s", len(base),
             "; ".join(base.values()) or "none")
    results: list[MutantResult] = []
    for i, m in enumerate(plan.mutants, 1):
        r, run_dir = _result(plan, m)
        found: dict[str, str] = {}
        with _mutant_built(plan, ws, m, outs, r) as built:
            if built:
                try:
                    found, run_s = _explore(plan, ws.src, EXPLORE_PATHS.get(m.file, ()),
                                            run_dir)
                    r.run_s = round(run_s, 1)
                except LabError as e:
                    r.outcome, r.why = NOT_BOOTED, e.message.splitlines()[0][:300]
        new = [v for key, v in found.items() if key not in base]
        if r.outcome == NOT_RUN:
            r.outcome = KILLED if new else SURVIVED
            r.killed_by, r.why = list(new), new[0] if new else ""
        results.append(r)
        log.info("mutant %d/%d %s: %s%s (build %.0f s, explore %.0f s)", i,
                 len(plan.mutants), m.id, r.outcome.upper(), f": {r.why}" if r.why else "",
                 r.build_s, r.run_s)
    doc = {"kernel": plan.name, "release": k.release, "tree": str(tree),
           "selection": f"./lab explore {' '.join(paths)} --budget {plan.explore_s:g}s "
                        "--seed 1", "whole_suite": False,
           "wall_s": round(time.monotonic() - start, 1),
           "unmutated": {"counts": {"new confirmed failures": len(base)},
                         "build_s": round(base_build, 1), "run_s": round(base_run, 1),
                         "report": str(base_dir)},
           "totals": totals(results), "mutants": [asdict(r) for r in results]}
    text = render(doc)
    (plan.report_dir / "mutate.json").write_text(json.dumps(doc, indent=2) + "\n")
    (plan.report_dir / "mutate.txt").write_text(text)
    print(text, end="")
    return 1 if doc["totals"][SURVIVED] else 0


def _one(plan: Plan, ws: Workspace, m: Mutant, outs: list[Path], baseline: ChildRun
         ) -> MutantResult:
    r, run_dir = _result(plan, m)
    with _mutant_built(plan, ws, m, outs, r) as built:
        if not built:
            return r
        tests = plan.selection if plan.whole_suite else _and(plan.selection, m.tests)
        child, run_s = _run_tests(plan, ws.src, tests, run_dir)
        r.run_s = round(run_s, 1)
    r.outcome, r.killed_by, r.why = judge(baseline, child)
    if plan.selftests and child.summary is not None and not child.not_run:
        r.selftest_killers = selftest_killers(baseline, child)
    if r.outcome == NOT_RUN:
        r.why = f"./lab run exit {child.exit_code}; see {run_dir}.log"
    return r


def _result(plan: Plan, m: Mutant) -> tuple[MutantResult, Path]:
    """A mutant's result, not run yet, and the folder its run reports to."""
    run_dir = plan.report_dir / "mutants" / m.id
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    return MutantResult(m.id, m.file, m.rule, NOT_RUN, fixes_revert=m.fixes_revert,
                        report=str(run_dir)), run_dir


@contextlib.contextmanager
def _mutant_built(plan: Plan, ws: Workspace, m: Mutant, outs: list[Path], r: MutantResult
                  ) -> Iterator[bool]:
    """The mutant applied and its kernel rebuilt for the body (True), or NOT_BUILT in `r`
    (False); reverted after, its prepared kernel dropped from the cache."""
    with ws.applied(m, outs):
        t = time.monotonic()
        try:
            with _quiet():
                k, _ = _build(plan, ws.src)
        except BuildError as e:
            r.build_s = round(time.monotonic() - t, 1)
            r.outcome, r.why = NOT_BUILT, e.message.splitlines()[0][:300]
            yield False
            return
        r.build_s = round(time.monotonic() - t, 1)
        try:
            yield True
        finally:
            _forget(k.vmlinuz.parent)


def _forget(entry: Path) -> None:
    """Drop a mutant's prepared kernel from the cache: it is never booted again, and a
    defconfig kernel's entry (image + modules) is tens of MB a mutant."""
    if entry.parent.name == "kernels" and entry.name.startswith("build-"):
        shutil.rmtree(entry, ignore_errors=True)


def totals(results: list[MutantResult]) -> dict:
    """Counts per outcome and the kill rate over the mutants the suite could judge (built
    and booted)."""
    counts = {o: sum(r.outcome == o for r in results)
              for o in (KILLED, SURVIVED, NOT_BUILT, NOT_BOOTED, NOT_RUN)}
    judged = counts[KILLED] + counts[SURVIVED]
    return {**counts, "judged": judged,
            "kill_rate": round(counts[KILLED] / judged, 3) if judged else None}


def render(doc: dict) -> str:
    """mutate.txt: the kill table, each mutant's rule and what killed it."""
    t = doc["totals"]
    u = doc["unmutated"]
    lines = [f"mutation run on {doc['kernel']} ({doc['release']}), tests: "
             f"{doc['selection'] or 'the whole suite'}",
             "unmutated kernel: " + ", ".join(f"{v} {o}" for o, v in sorted(u["counts"].items()))
             + f" (build {u['build_s']:.0f} s, run {u['run_s']:.0f} s); only a test that "
             "passed (or xfailed) there can kill", "",
             f"{'mutant':40s} {'outcome':10s} {'build':>6s} {'run':>6s}  killed by / why"]
    for r in doc["mutants"]:
        lines.append(f"{r['id'][:40]:40s} {r['outcome']:10s} {r['build_s']:5.0f}s "
                     f"{r['run_s']:5.0f}s  {r['why']}")
        lines.append(f"    {r['file']}: {r['rule']}"
                     + (f" (reverts {r['fixes_revert']})" if r["fixes_revert"] else ""))
        if len(r["killed_by"]) > 1:
            lines.append(f"    also failed: {', '.join(k.split('::')[-1] for k in r['killed_by'][1:])}"[:300])
        if r.get("selftest_killers") is not None:
            st = r["selftest_killers"]
            lines.append("    kernel selftests: " + ("killed it: " + ", ".join(
                k.split("[", 1)[-1].rstrip("]") for k in st) if st else "survived")[:300])
    rate = f"{100 * t['kill_rate']:.0f}%" if t["kill_rate"] is not None else "n/a"
    judged_st = [r for r in doc["mutants"] if r.get("selftest_killers") is not None
                 and r["outcome"] in (KILLED, SURVIVED)]
    if judged_st:
        lines += ["", f"the kernel's own selftests killed "
                  f"{sum(bool(r['selftest_killers']) for r in judged_st)} of {len(judged_st)} "
                  "judged (ours: below)"]
    if doc.get("whole_suite"):
        lines += ["", cost_line(doc)]
    lines += ["", f"killed {t[KILLED]} of {t['judged']} judged ({rate}); survived {t[SURVIVED]};"
              f" not built {t[NOT_BUILT]}; not booted {t[NOT_BOOTED]}; not run {t[NOT_RUN]}; "
              f"wall {doc['wall_s'] / 60:.1f} min"]
    return "\n".join(lines) + "\n"


def cost_line(doc: dict) -> str:
    """What a mutant costs against the unmutated kernel, each run on the same tests: the
    run-time ratio min / median / max and the slowest mutant (a kernel under review or bisect
    is such a kernel)."""
    base = doc["unmutated"]["run_s"]
    ran = sorted((r["run_s"], r["id"]) for r in doc["mutants"] if r["run_s"] > 0)
    if not ran or base <= 0:
        return "run time against the unmutated kernel: no mutant ran"
    ratios = [s / base for s, _ in ran]
    mid = statistics.median(ratios)
    slow_s, slow_id = ran[-1]
    over = [i for s, i in ran if s > 1.3 * base]
    return (f"run time against the unmutated kernel ({base:.0f} s), {len(ran)} mutants: "
            f"{ratios[0]:.2f} / {mid:.2f} / {ratios[-1]:.2f}x (min / median / max); slowest "
            f"{slow_id} {slow_s:.0f} s; over 1.3x: {', '.join(over) or 'none'}")


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
    mu.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="accepted, but "
                    "mutants run serially for now (one build at a time: on 2 cores parallel "
                    "kernel builds only slow each other)")
    mu.add_argument("--explore", metavar="BUDGET", help="judge each mutant with `./lab "
                    "explore` (BUDGET per path its file serves, e.g. 2m) instead of the suite")
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
    name = spec.name
    mutants = select(catalog(), args.mutants)
    if args.jobs > 1:
        log.warning("-j %d: mutants run one at a time for now (on 2 cores two kernel builds "
                    "only slow each other; make already uses every core)", args.jobs)
    out = run_folder.open_run(cfg, args, f"mutate-{lab_config.file_safe(name)}")
    explore_s = None
    if args.explore:
        from harness.explore.session import parse_budget
        explore_s = parse_budget(args.explore)
    return run(Plan(cfg, name, mutants, args.k, args.pytest_args, out,
                    whole_suite=args.whole_suite, explore_s=explore_s,
                    selftests=args.selftests))

