"""An explore's results in the reports every `./lab run` writes: junit.xml (for CI), kcidb.json
(for KernelCI) and report.html (for a person). One test per path (failed when a new failure
was found there) and one per distinct failure, so a CI dashboard shows which check failed and
whether a known issue explains it, exactly as it shows a scripted test's result."""
from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path

import junitparser

from harness.explore.report import slug, step_text, title
from harness.explore.session import Failure, PathResult
from harness.results import kcidb


def failure_outcome(f: Failure) -> tuple[str, str]:
    """(summary.json outcome, reason) of one distinct failure. A failure that did not fail
    again on a fresh guest is still a failure: a kernel result that changes between two runs
    is a finding, not noise."""
    if f.check == "explorer":
        return "error", f"the explorer's own error, not the kernel's: {f.got}"
    # a schedule's failure says how often fresh guests showed it again: "2 of 3 fresh guests"
    odds = f" ({f.confirm_got})" if f.confirm_tries else ""
    if f.known_issue and f.confirmed:
        return "xfailed", f"known kernel issue {f.known_issue}: {title(f)}{odds}"
    if f.confirmed:
        return "failed", f"NEW: {title(f)}{odds}"
    return "failed", f"{title(f)}; NOT confirmed on a fresh guest ({f.confirm_got}): flaky"


def outcomes(results: list[PathResult]) -> list[dict]:
    """summary.json-shaped results: {test, outcome, reason, duration_s, splats}."""
    out: list[dict] = []
    for res in results:
        node = f"explore/{res.path}"
        if res.skipped:
            out.append({"test": f"{node}::explore", "outcome": "skipped",
                        "reason": res.skipped, "duration_s": 0.0})
            continue
        per_failure = [(f, *failure_outcome(f)) for f in res.failures.values()]
        bad = [r for f, o, r in per_failure if o in ("failed", "error")]
        out.append({"test": f"{node}::explore", "outcome": "failed" if bad else "passed",
                    "reason": bad[0] if bad else
                    f"{res.sequences} sequences, {res.steps} steps: nothing new",
                    "duration_s": round(res.seconds, 1)})
        for f, outcome, reason in per_failure:
            r = {"test": f"{node}::{slug(f)}", "outcome": outcome, "reason": reason,
                 "duration_s": 0.0, "steps": f.steps, "kmsg": f.kmsg}
            if f.splat:
                r["splats"] = [{"title": f.splat}]
            out.append(r)
    return out


def write(out_dir: Path, kernel: str, release: str, results: list[PathResult],
          started: float) -> list[Path]:
    """junit.xml, kcidb.json and report.html beside explore.json."""
    rows = outcomes(results)
    return [_junit(out_dir / "junit.xml", rows),
            _kcidb(out_dir / "kcidb.json", kernel, release, rows, started),
            _html(out_dir / "report.html", kernel, release, rows)]


def _junit(path: Path, rows: list[dict]) -> Path:
    suite = junitparser.TestSuite("ringlab-explore")
    for r in rows:
        file, _, name = r["test"].partition("::")
        case = junitparser.TestCase(name, classname=file.replace("/", "."), time=r["duration_s"])
        if r["outcome"] == "failed":
            case.result = [junitparser.Failure(r["reason"][:300])]
        elif r["outcome"] == "error":
            case.result = [junitparser.Error(r["reason"][:300])]
        elif r["outcome"] in ("skipped", "xfailed"):
            case.result = [junitparser.Skipped(r["reason"][:300])]
        if r.get("steps") or r.get("kmsg"):
            case.system_out = "\n".join([_steps_text(_path(r), r.get("steps", []))] + r.get("kmsg", []))
        suite.add_testcase(case)
    xml = junitparser.JUnitXml()
    xml.add_testsuite(suite)
    _atomic(path, lambda tmp: xml.write(str(tmp)))
    return path


def _kcidb(path: Path, kernel: str, release: str, rows: list[dict], started: float) -> Path:
    doc = kcidb.from_summary({"kernel": kernel, "release": release, "results": rows}, started)
    _atomic(path, lambda tmp: tmp.write_text(json.dumps(doc, indent=2) + "\n"))
    return path


def _html(path: Path, kernel: str, release: str, rows: list[dict]) -> Path:
    e = html.escape
    body = "".join(
        f"<tr class='{e(r['outcome'])}'><td>{e(r['test'])}</td><td>{e(r['outcome'])}</td>"
        f"<td>{e(r['reason'])}"
        + (f"<pre>{e(_steps_text(_path(r), r['steps']))}</pre>" if r.get("steps") else "")
        + "</td></tr>" for r in rows)
    page = (f"<!doctype html><meta charset='utf-8'><title>ringlab explore: {e(kernel)}</title>"
            "<style>body{font-family:sans-serif}td{vertical-align:top;padding:2px 8px}"
            ".failed,.error{background:#fdd}.xfailed{background:#ffd}.passed{background:#dfd}"
            "</style>"
            f"<h1>./lab explore on {e(kernel)} ({e(release)})</h1>"
            "<p>Each failure's reproducers are in failures/&lt;name&gt;/ beside this page.</p>"
            f"<table><tr><th>test</th><th>outcome</th><th>why</th></tr>{body}</table>\n")
    _atomic(path, lambda tmp: tmp.write_text(page))
    return path


def _path(row: dict) -> str:
    """The path of an outcome row: its test is explore/PATH::what."""
    return str(row["test"]).split("/", 1)[1].split("::", 1)[0]


def _steps_text(path: str, steps: list[dict]) -> str:
    return "\n".join(f"{s['id']}: {step_text(path, s)}" for s in steps)


def _atomic(path: Path, write_to: Callable[[Path], object]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    write_to(tmp)
    tmp.replace(path)
