"""One `./lab explore` from a checked request to its exit code: the splat detection proven,
the Explore run (Ctrl-C keeps what was found), the report and its formats written, the
failures said, and the exit code read from them. The verb only parses and calls `run`."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from harness.errors import LabError
from harness.explore import formats, report
from harness.explore.session import Explore, ExploreRequest, PathResult
from harness.resources import Lab

log = logging.getLogger("ringlab")


def exit_code(results: list[PathResult]) -> int:
    """1 if a new failure was confirmed, 0 otherwise; the explorer's own failure is an error
    (its model or its calls are wrong, not the kernel)."""
    own = [f for r in results for f in r.failures.values() if f.check == "explorer"]
    if own:
        raise LabError(f"the explorer itself failed ({own[0].got}): its model or its calls "
                       "are wrong, not the kernel; see the report")
    new = [f for r in results for f in r.failures.values() if f.confirmed and
           not f.known_issue]
    return 1 if new else 0


def run(lab: Lab, req: ExploreRequest, out: Path, prove: Callable[[str], object],
        say: Callable[[str], None] = print) -> int:
    """The explore of `req` into `out`. `prove(kernel name)` proves the splat detection
    first (harness/splat_proof, a sibling layer this package may not import); `say` prints
    the summary (progress goes to the log)."""
    explore = Explore(lab, req, out, lambda s: log.info("%s", s))
    kernel = explore.kernel
    log.info("proving splat detection on %s ...", kernel.name)
    prove(kernel.name)
    started = time.time()
    interrupted = False
    try:
        explore.run_all()
    except KeyboardInterrupt:
        interrupted = True
        log.info("interrupted: keeping what was found")
    finally:
        explore.stop_guest()
        path = report.write(out, req, kernel.name, kernel.release, explore.results, interrupted)
        formats.write(out, kernel.name, kernel.release, explore.results, started)
    for line in report.lines(explore.results):
        say(line)
    if req.keep:
        for f in report.worth_keeping(explore.results):
            say(f"kept: {report.keep(f, kernel.release)}")
    say(f"report: {path}")
    if interrupted:
        raise KeyboardInterrupt
    return exit_code(explore.results)
