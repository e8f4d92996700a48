"""A bisect step's verdict as `git bisect run` takes it (0 good, 1 bad, 125 skip, 255 abort),
judged from its child `./lab run`, and steps.jsonl, the record of every step with its timing."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.runs.child_run import ChildRun

GOOD, BAD, SKIP, ABORT = 0, 1, 125, 255
POLICY = {"skip": SKIP, "bad": BAD, "abort": ABORT}  # --on-build-failure, --on-boot-failure
RESULT = {GOOD: "good", BAD: "bad", SKIP: "skip", ABORT: "abort"}


@dataclass
class Step:
    """One line of steps.jsonl."""
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


def status(child: ChildRun, on_boot_failure: str) -> int:
    """The exit status for git bisect run of a step's `./lab run`. A test that failed on a
    booted guest is evidence: bad. A kernel that did not boot (every failing test failed for
    want of a guest) says nothing of the tests, so it is what --on-boot-failure says (skip by
    default). A run that could not judge the commit aborts the bisect."""
    if child.exit_code == 0:
        return GOOD
    if child.exit_code == 1:
        return POLICY[on_boot_failure] if child.boot_failed_only else BAD
    return ABORT


EXCUSED = "excused as known issues: "


def why(child: ChildRun) -> str:
    """What steps.jsonl says of a step: the tests that failed, or why the run could not judge
    the commit; of a good one, the tests a known issue excused (xfailed), if any: a bisect
    for the return of a known issue wants --known-issues-fail."""
    if child.exit_code == 0:
        excused = sorted({t.split("::")[-1] for t, o in child.outcomes.items()
                          if o == "xfailed"})
        return EXCUSED + ", ".join(excused[:5]) if excused else ""
    if child.exit_code == 1 and child.boot_failed_only:
        return (f"the kernel did not boot ({len(child.no_guest)} test(s) without a guest; see "
                f"{child.run_dir})")
    if child.exit_code == 1:
        if child.summary is None or not child.failing:
            return "tests failed"
        # The child run's one reading of its outcomes (a flaky test failed here too).
        return "failed: " + ", ".join(sorted({t.split("::")[-1] for t in child.failing})[:5])
    return (f"the test run could not judge this commit (pytest exit {child.exit_code}; see "
            f"{child.run_dir})")


def read(path: Path) -> list[Step]:
    if not path.exists():
        return []
    return [Step(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def record(path: Path, s: Step) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(asdict(s)) + "\n")
