"""`./lab bisect` and `./lab bisect-step`: find the commit that broke a test.

bisect checks the revisions, then runs `git bisect run ./lab bisect-step ...` in a worktree
of the kernel's tree kept in the cache (the user's checkout is never moved, and the worktree's
build folder survives between bisects, so each step's build is incremental). A step builds the
commit (a build failure is `skip` by default: exit 125), boots it (a kernel that does not
boot is `skip` by default too: it says nothing of the tests), runs the test selection, and
answers good (0) or bad (1); anything the lab itself cannot do aborts the bisect (255).
Every step is appended to steps.jsonl with its timing.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import cache, config as lab_config, paths
from harness.commands import options
from harness.runs import child_run, request, run_folder
from harness.runs.child_run import ChildRun
from harness.kernels import trees
from harness.config import BuildKernel, LabConfig, with_build
from harness.errors import BisectError, BuildError, LabError

log = logging.getLogger(__name__)
REPO = paths.REPO
GOOD, BAD, SKIP, ABORT = 0, 1, 125, 255
BUILD_FAILURE = {"skip": SKIP, "bad": BAD, "abort": ABORT}
BOOT_FAILURE = {"skip": SKIP, "bad": BAD, "abort": ABORT}
RESULT = {GOOD: "good", BAD: "bad", SKIP: "skip", ABORT: "abort"}


@dataclass
class Step:
    commit: str
    subject: str
    result: str          # good, bad, skip, abort
    why: str
    build_s: float
    test_s: float
    total_s: float

    def line(self) -> str:
        return (f"{self.commit[:12]} {self.result:5s} build {self.build_s:6.1f} s  test "
                f"{self.test_s:6.1f} s  total {self.total_s:6.1f} s  {self.subject[:60]}"
                + (f"  [{self.why}]" if self.why else ""))


def _tree(cfg: LabConfig, name: str) -> Path:
    spec = cfg.kernel(name)
    if not isinstance(spec.source, BuildKernel) or not isinstance(spec.source.tree, Path):
        raise BisectError(f"kernel {name} is not a `build` kernel with a tree folder in "
                          f"{cfg.path}: there is nothing to bisect")
    tree = spec.source.tree
    if not trees.is_git(tree):
        raise BisectError(f"kernels.{name}.build.tree: {tree} is not a git checkout")
    return tree


def _commit(tree: Path, rev: str, option: str) -> str:
    p = subprocess.run(["git", "-C", str(tree), "rev-parse", "--verify", "--quiet",
                        f"{rev}^{{commit}}"], capture_output=True, text=True)
    if p.returncode != 0:
        raise BisectError(f"{option} {rev}: not a commit of {tree}")
    return p.stdout.strip()


def _is_ancestor(tree: Path, a: str, b: str) -> bool:
    return subprocess.run(["git", "-C", str(tree), "merge-base", "--is-ancestor", a, b]
                          ).returncode == 0


def check_revisions(tree: Path, good: str, bad: str) -> tuple[str, str]:
    """The two commits, or a BisectError saying what is wrong with them."""
    g, b = _commit(tree, good, "--good"), _commit(tree, bad, "--bad")
    if g == b:
        raise BisectError(f"--good {good} and --bad {bad} are the same commit ({g[:12]})")
    if _is_ancestor(tree, b, g):
        raise BisectError(f"--good {good} is newer than --bad {bad} ({bad} is an ancestor of "
                          f"{good})", hint="swap them, or bisect a fix with git bisect's "
                          "old/new terms by hand")
    if not _is_ancestor(tree, g, b):
        raise BisectError(f"--good {good} is not an ancestor of --bad {bad}")
    return g, b


def worktree(tree: Path, cache_root: Path, start: str) -> Path:
    """The cache's worktree of `tree` (made on first use), detached at `start`."""
    wt = cache.Layout(cache_root).bisect(hashlib.sha256(str(tree).encode()).hexdigest()[:16])
    if not (wt / ".git").exists():
        wt.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(tree), "worktree", "prune"], capture_output=True)
        trees.git(tree, "worktree", "add", "--detach", str(wt), start)
    else:
        trees.git(wt, "bisect", "reset", "--quiet", check=False)
        trees.git(wt, "checkout", "--quiet", "--force", "--detach", start)
    return wt


def run(cfg: LabConfig, name: str, good: str, bad: str, selection: str | None,
        on_build_failure: str, report_dir: Path, pytest_args: list[str],
        on_boot_failure: str = "skip") -> int:
    """The whole bisect; prints the first bad commit and every step. Exit 0 when found."""
    tree = _tree(cfg, name)
    g, b = check_revisions(tree, good, bad)
    wt = worktree(tree, cache.cache_root(cfg.cache_dir), b)
    cache.Usage(cache.cache_root(cfg.cache_dir)).use(wt)  # held (fd open) until we exit: no gc
    report_dir.mkdir(parents=True, exist_ok=True)
    steps_log = report_dir / "steps.jsonl"
    step_cmd = [sys.executable, "-m", "harness.cli", "--lab-config", str(cfg.path),
                "bisect-step", "--kernel", name, "--tree", str(wt), "--steps-log",
                str(steps_log), "--on-build-failure", on_build_failure, "--on-boot-failure",
                on_boot_failure, "--report-dir", str(report_dir)] + \
        (["-k", selection] if selection else []) + (["--", *pytest_args] if pytest_args else [])
    start = time.monotonic()
    trees.git(wt, "bisect", "start", b, g)
    try:
        log.info("bisecting %s..%s in %s", g[:12], b[:12], wt)
        with (report_dir / "bisect.log").open("w") as out:
            proc = subprocess.Popen(["git", "-C", str(wt), "bisect", "run", *step_cmd],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    cwd=REPO)
            assert proc.stdout is not None
            text = []
            for line in proc.stdout:
                out.write(line)
                out.flush()
                text.append(line)
                if re.match(r"^(Bisecting:|running |[0-9a-f]{40} is the first bad commit)",
                            line):
                    log.info("bisect: %s", line.rstrip())
            code = proc.wait()
        bisect_log = trees.git(wt, "bisect", "log", check=False)
    finally:
        trees.git(wt, "bisect", "reset", "--quiet", check=False)
    (report_dir / "git-bisect-log.txt").write_text(bisect_log + "\n")
    steps = read_steps(steps_log)
    output = "".join(text)
    first = re.search(r"^([0-9a-f]{40}) is the first bad commit", output, re.M)
    lines = [f"bisect of {name} ({tree}): good {g[:12]}, bad {b[:12]}, "
             f"{len(steps)} step(s) in {time.monotonic() - start:.0f} s"]
    lines += ["  " + s.line() for s in steps]
    if first:
        sha = first.group(1)
        subject = trees.git(tree, "show", "-s", "--format=%s", sha, check=False)
        lines.append(f"first bad commit: {sha} {subject}")
    else:
        tail = [ln for ln in output.strip().splitlines() if ln.strip()][-6:]
        lines.append("no first bad commit found (git bisect run exit "
                     f"{code}):\n    " + "\n    ".join(tail))
    text_out = "\n".join(lines) + "\n"
    (report_dir / "bisect.txt").write_text(text_out)
    print(text_out, end="")
    log.info("bisect reports in %s", report_dir)
    return 0 if first else 1


def read_steps(path: Path) -> list[Step]:
    if not path.exists():
        return []
    return [Step(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def step(cfg: LabConfig, name: str, tree: Path, selection: str | None, on_build_failure: str,
         steps_log: Path, report_dir: Path, pytest_args: list[str],
         on_boot_failure: str = "skip") -> int:
    """One bisect step on the commit checked out in `tree`: build, boot, run the selection;
    the exit status git bisect run understands."""
    from harness.resources import Lab

    start = time.monotonic()
    commit = trees.git(tree, "rev-parse", "HEAD")
    subject = trees.git(tree, "show", "-s", "--format=%s", "HEAD", check=False)
    varied = with_build(cfg, name, tree=tree)
    build_s = test_s = 0.0
    try:
        try:
            Lab(varied).kernel(name)  # builds it (or finds it built)
        except BuildError as e:
            build_s = time.monotonic() - start
            code = BUILD_FAILURE[on_build_failure]
            _record(steps_log, Step(commit, subject, RESULT[code], f"build failed: {e.message}",
                                    build_s, 0.0, time.monotonic() - start))
            print(f"bisect-step {commit[:12]}: build failed: {e}", file=sys.stderr)
            return code
        build_s = time.monotonic() - start
        run_dir = report_dir / f"step-{len(read_steps(steps_log)) + 1}-{commit[:12]}"
        t = time.monotonic()
        child = child_run.run(request.make(cfg, name, run_dir, selection=selection,
                                                 tree=tree, pytest_args=tuple(pytest_args)))
        test_s = time.monotonic() - t
    except LabError as e:
        _record(steps_log, Step(commit, subject, "abort", e.message, build_s, test_s,
                                time.monotonic() - start))
        print(f"bisect-step {commit[:12]}: {e}", file=sys.stderr)
        return ABORT
    status = step_status(child, on_boot_failure)
    if status == GOOD:
        why = ""
    elif child.exit_code == 1 and child.boot_failed_only:
        why = (f"the kernel did not boot ({len(child.no_guest)} test(s) without a guest; see "
               f"{run_dir})")
    elif child.exit_code == 1:
        why = _failures(child)
    else:
        why = (f"the test run could not judge this commit (pytest exit {child.exit_code}; see "
               f"{run_dir})")
    _record(steps_log, Step(commit, subject, RESULT[status], why, build_s, test_s,
                            time.monotonic() - start))
    return status


def step_status(child: ChildRun, on_boot_failure: str) -> int:
    """The exit status for git bisect run of a step's `./lab run`. A test that failed on a
    booted guest is evidence: bad. A kernel that did not boot (every failing test failed for
    want of a guest) says nothing of the tests, so it is what --on-boot-failure says (skip by
    default)."""
    if child.exit_code == 0:
        return GOOD
    if child.exit_code == 1:
        return BOOT_FAILURE[on_boot_failure] if child.boot_failed_only else BAD
    return ABORT


def _failures(child: ChildRun) -> str:
    if child.summary is None:
        return "tests failed"
    failed = [r["test"].split("::")[-1] for r in child.summary.get("results", [])
              if r["outcome"] in ("failed", "error")]
    return "failed: " + ", ".join(sorted(set(failed))[:5])


def _record(path: Path, s: Step) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(asdict(s)) + "\n")


def register(sub: argparse._SubParsersAction) -> None:
    bi = sub.add_parser("bisect", help="find the commit that broke a test (git bisect run)",
                        description=main.__doc__)
    bi.add_argument("--good", required=True, metavar="REV", help="a commit where the tests pass")
    bi.add_argument("--bad", required=True, metavar="REV", help="a later commit where they fail")
    options.kernel(bi, "the kernel to bisect (a build kernel or a source tree, a git checkout)")
    options.selection(bi, "the tests that decide (pytest -k)")
    options.failure_policies(bi)
    options.pytest_args(bi)
    bi.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Find the first bad commit between --good and --bad of a `build` kernel's git tree: git
    bisect run with a step that builds, boots and runs the selected tests."""
    cfg, spec = options.config_and_kernel(args)
    name = spec.name
    out = run_folder.open_run(cfg, args, f"bisect-{lab_config.file_safe(name)}")
    return run(cfg, name, args.good, args.bad, args.k, args.on_build_failure, out,
               args.pytest_args, args.on_boot_failure)

