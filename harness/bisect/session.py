"""The whole bisect: the revisions checked, then `git bisect run ./lab bisect-step ...` in the
cache's worktree of the kernel's tree, its progress shown, and bisect.txt (every step, the
first bad commit) written and printed."""
from __future__ import annotations

import logging
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness import cache, paths
from harness.bisect import steps
from harness.bisect.revisions import check_revisions, tree_of, worktree
from harness.config import KernelSpec, LabConfig
from harness.kernels import trees

log = logging.getLogger(__name__)
# The lines of git bisect run worth showing as it goes.
PROGRESS = re.compile(r"^(Bisecting:|running |[0-9a-f]{40} is the first bad commit)")
FIRST_BAD = re.compile(r"^([0-9a-f]{40}) is the first bad commit", re.M)


@dataclass(frozen=True)
class BisectRequest:
    """What `./lab bisect` is asked: `cfg` holds `spec` (resolved once, by the verb)."""
    cfg: LabConfig
    spec: KernelSpec
    good: str
    bad: str
    selection: str | None
    report_dir: Path
    pytest_args: tuple[str, ...] = ()
    on_build_failure: str = "skip"
    on_boot_failure: str = "skip"


def step_command(req: BisectRequest, wt: Path, steps_log: Path) -> list[str]:
    """`./lab bisect-step` on the worktree, as git bisect run runs it at each commit. The
    kernel goes by its name: a command-line kernel's name is the form typed, so the step
    finds the same kernel."""
    return ([sys.executable, "-m", "harness.cli", "--lab-config", str(req.cfg.path),
             "bisect-step", "--kernel", req.spec.name, "--tree", str(wt), "--steps-log",
             str(steps_log), "--on-build-failure", req.on_build_failure, "--on-boot-failure",
             req.on_boot_failure, "--report-dir", str(req.report_dir)]
            + (["-k", req.selection] if req.selection else [])
            + (["--", *req.pytest_args] if req.pytest_args else []))


def run(req: BisectRequest) -> int:
    """The bisect; prints the first bad commit and every step. Exit 0 when found."""
    tree = tree_of(req.cfg, req.spec)
    g, b = check_revisions(tree, req.good, req.bad)
    root = cache.cache_root(req.cfg.cache_dir)
    wt = worktree(tree, root, b)
    cache.Usage(root).use(wt)  # held (fd open) until we exit: no gc
    req.report_dir.mkdir(parents=True, exist_ok=True)
    steps_log = req.report_dir / "steps.jsonl"
    start = time.monotonic()
    trees.git(wt, "bisect", "start", b, g)
    try:
        log.info("bisecting %s..%s in %s", g[:12], b[:12], wt)
        code, output = _bisect_run(wt, step_command(req, wt, steps_log),
                                   req.report_dir / "bisect.log")
        bisect_log = trees.git(wt, "bisect", "log", check=False)
    finally:
        trees.git(wt, "bisect", "reset", "--quiet", check=False)
    (req.report_dir / "git-bisect-log.txt").write_text(bisect_log + "\n")
    first = FIRST_BAD.search(output)
    bad_end_passes = first is not None and _bad_end_passes(req, wt, b, first.group(1),
                                                          steps_log)
    done = steps.read(steps_log)
    lines = [f"bisect of {req.spec.name} ({tree}): good {g[:12]}, bad {b[:12]}, "
             f"{len(done)} step(s) in {time.monotonic() - start:.0f} s"]
    lines += ["  " + s.line() for s in done]
    if bad_end_passes:
        lines.append(f"no first bad commit: --bad {req.bad} ({b[:12]}) passes the selected "
                     "tests too, so git bisect's answer (the --bad end, never tested by it) "
                     "is not one")
        if any(s.why.startswith(steps.EXCUSED) for s in done):
            lines.append("  steps passed with known issues excused (above): to find where a "
                         "known issue came in, add --known-issues-fail")
        first = None
    elif first:
        sha = first.group(1)
        subject = trees.git(tree, "show", "-s", "--format=%s", sha, check=False)
        lines.append(f"first bad commit: {sha} {subject}")
    else:
        tail = [ln for ln in output.strip().splitlines() if ln.strip()][-6:]
        lines.append("no first bad commit found (git bisect run exit "
                     f"{code}):\n    " + "\n    ".join(tail))
    text = "\n".join(lines) + "\n"
    (req.report_dir / "bisect.txt").write_text(text)
    print(text, end="")
    log.info("bisect reports in %s", req.report_dir)
    return 0 if first else 1


def _bad_end_passes(req: BisectRequest, wt: Path, bad: str, first: str,
                    steps_log: Path) -> bool:
    """git bisect run never tests the --bad end: when it names that commit first bad with no
    step of its own, the answer is only the user's word. Test it now (one more step, in
    steps.jsonl); whether it passed (a bisect of a symptom the tests excuse, or of none)."""
    if first != bad or any(s.commit == bad for s in steps.read(steps_log)):
        return False
    log.info("bisect: testing the --bad end %s itself (git bisect run never does)", bad[:12])
    trees.git(wt, "checkout", "--quiet", "--force", "--detach", bad)
    code = subprocess.run(step_command(req, wt, steps_log), cwd=paths.REPO).returncode
    return code == steps.GOOD


def _bisect_run(wt: Path, step_cmd: list[str], log_file: Path) -> tuple[int, str]:
    """git bisect run of `step_cmd` in `wt`, its output kept in `log_file` and its progress
    lines logged; (exit status, output)."""
    text = []
    with log_file.open("w") as out:
        proc = subprocess.Popen(["git", "-C", str(wt), "bisect", "run", *step_cmd],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                cwd=paths.REPO)
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            out.flush()
            text.append(line)
            if PROGRESS.match(line):
                log.info("bisect: %s", line.rstrip())
        return proc.wait(), "".join(text)
