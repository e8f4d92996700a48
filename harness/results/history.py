"""Nightly history: every run's summary.json kept by kernel line, and each run compared with
the previous run of the same line: new failures, fixed tests, flaky ones. What each change
means (fixed, new failure, gone, ...) is compare.py's, shared with `./lab review`.

A kernel line is the lab.yaml kernel name (e.g. trixie-cloud): its release moves night to
night, and that is what a nightly wants compared. A test whose guest died and that passed on
its rerun in a fresh guest is flaky, not passed.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.errors import ConfigError
from harness.results import compare as changes
from harness.results.compare import FAILING  # noqa: F401 (callers know it as history.FAILING)


@dataclass
class Comparison:
    kernel: str
    previous: str | None                 # the file compared with, if any
    new_failures: list[str] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)  # passed, now its known issue's xfail
    fixed: list[str] = field(default_factory=list)
    still_failing: list[str] = field(default_factory=list)
    flaky: list[str] = field(default_factory=list)
    new_tests: list[str] = field(default_factory=list)
    gone_tests: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        if self.previous is None:
            head = [f"history: first run of kernel line {self.kernel}"]
        else:
            head = [f"history: compared with {self.previous}"]
        for label, tests in (("NEW FAILURE", self.new_failures),
                             ("KNOWN BACK", self.returned), ("FIXED", self.fixed),
                             ("STILL FAILING", self.still_failing), ("FLAKY", self.flaky),
                             ("NEW TEST", self.new_tests), ("GONE", self.gone_tests)):
            head += [f"  {label:13s} {t}" for t in tests]
        return head


def outcomes(summary: dict) -> dict[str, str]:
    """Each test's final outcome (the last result of a test wins). A test that failed and then
    passed on a rerun is 'flaky', a kernel finding, unless what failed the first time was the
    emulator (the guest broke with no kernel splat: `broke` = ["emulator", ...])."""
    final: dict[str, str] = {}
    flaky: set[str] = set()
    for r in summary.get("results", []):
        if r["outcome"] == "rerun":
            if (r.get("broke") or [None])[0] != "emulator":
                flaky.add(r["test"])
        else:
            final[r["test"]] = r["outcome"]
    return {t: ("flaky" if t in flaky and o == "passed" else o) for t, o in final.items()}


def compare(previous: dict | None, current: dict, previous_name: str | None = None
            ) -> Comparison:
    """This run against the previous one of its line (None: the first run, nothing compared).
    `flaky` lists every test flaky in this run, newly or still: each is a kernel finding."""
    now = outcomes(current)
    c = Comparison(kernel=current.get("kernel", "?"), previous=previous_name)
    c.flaky = sorted(t for t, o in now.items() if o == changes.FLAKY)
    if previous is None:
        return c
    found = changes.changes(outcomes(previous), now)
    c.new_failures = changes.of_kind(found, changes.NEW_FAILURE)
    c.returned = changes.returned(outcomes(previous), now)
    c.fixed = changes.of_kind(found, changes.FIXED)
    c.still_failing = changes.of_kind(found, changes.STILL_FAILING)
    c.new_tests = changes.of_kind(found, changes.NEW_TEST)
    c.gone_tests = changes.of_kind(found, changes.GONE)
    return c


def _kept_order(path: Path) -> tuple[str, int]:
    """Kept runs oldest first: by their time stamp, then the ~N of runs in the same second
    (a plain sort put "STEM~2.json" before "STEM.json")."""
    stem, _, n = path.stem.partition("~")
    return stem, int(n) if n.isdigit() else 1


def record(history_dir: Path, summary_path: Path, line: str | None = None
           ) -> tuple[Path, Comparison]:
    """Keep this run's summary under history_dir/<line>/ and compare it with the newest run
    of the same kernel line kept before it. The line is the run's kernel unless named (a
    nightly cell: the kernel with its config variant, guest profile and test selection, so
    runs of different selections are never compared)."""
    try:
        summary = json.loads(summary_path.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"{summary_path}: cannot read this run's summary: {e}") from None
    line_dir = history_dir / (line or summary.get("kernel", "unknown"))
    try:
        line_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--history {history_dir}: cannot create {line_dir}: "
                          f"{e.strerror}") from None
    earlier = sorted(line_dir.glob("*.json"), key=_kept_order)
    previous = json.loads(earlier[-1].read_text()) if earlier else None
    stem = time.strftime(f"%Y%m%d-%H%M%S-{summary.get('release') or 'unknown'}")
    kept, n = line_dir / f"{stem}.json", 1
    while kept.exists():  # two runs in one second: keep both, in order (_kept_order)
        n += 1
        kept = line_dir / f"{stem}~{n}.json"
    shutil.copyfile(summary_path, kept)
    comparison = compare(previous, summary, earlier[-1].name if earlier else None)
    if line:
        comparison.kernel = line
    return kept, comparison


def as_json(c: Comparison) -> str:
    return json.dumps(asdict(c), indent=2)
