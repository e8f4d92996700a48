"""A run's summary: summary.json's document and summary.txt's lines, from what the run recorded.

Pure functions (no files, no clock, no pytest), so the pytest plugin only gathers and writes,
and the wording a reader sees is tested on a real run's summary.json (tests/unit/data).
"""
from __future__ import annotations

from typing import Any

from harness.results import history


def build(kernel: str, kernel_info: dict[str, Any], boots: list[dict], facts: dict[str, str],
          between_tests: list[dict], results: list[dict], exit_status: int,
          duration_s: float, splat_detection: dict | None = None) -> dict[str, Any]:
    """summary.json's document: what ran on which kernel, every result in order, the counts,
    and whether the lab proved it sees this kernel's splats (harness/splat_proof.py)."""
    counts: dict[str, int] = {}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    return {"kernel": kernel, "release": kernel_info.get("release"),
            "arch": kernel_info.get("arch"), "kernel_description": kernel_info.get("description"),
            "kernel_commit": kernel_info.get("commit"), "series": kernel_info.get("series", []),
            "boots": boots, "counts": counts, "exit_status": int(exit_status),
            "duration_s": round(duration_s, 1), "kernel_facts": facts,
            "splats_between_tests": between_tests, "splat_detection": splat_detection,
            "results": results}


def render(doc: dict[str, Any]) -> str:
    """summary.txt: the run in a few header lines, then each test that did not simply pass,
    with what failed first (the rule's message, not where it was raised)."""
    results: list[dict] = doc["results"]
    lines = [f"ringlab run on kernel {doc['kernel']} "
             f"({doc['kernel_description'] or 'not prepared'})",
             "boots: " + (", ".join(_boot(b) for b in doc["boots"]) or "none"),
             "results: " + (", ".join(f"{v} {k}" for k, v in sorted(doc["counts"].items()))
                            or "no tests ran")]
    lines.append(detection_line(doc.get("splat_detection")))
    if doc["kernel_commit"]:
        lines.append(f"kernel commit: {doc['kernel_commit']}")
    lines += [f"series: {s}" for s in doc["series"]]
    lines += [f"kernel: {name}: {value}" for name, value in sorted(doc["kernel_facts"].items())]
    final = history.outcomes(doc)
    last = {r["test"]: r for r in results if r["outcome"] != "rerun"}
    for r in results:
        if r["outcome"] == "rerun":
            lines += _rerun_lines(r, final.get(r["test"]))
        elif r is last.get(r["test"]) and r["outcome"] != "passed":
            again = " (again on a rerun in a fresh guest)" if any(
                x["test"] == r["test"] and x["outcome"] == "rerun" for x in results) else ""
            lines.append(f"  {r['outcome'].upper():7s} {r['test']}: "
                         f"{first_line(r['reason'])}{again}")
            if r.get("teardown_error"):
                lines.append(f"          then: {first_line(r['teardown_error'])}")
            if r.get("splats"):
                lines.append(f"          {splat_line(r['splats'][0])}")
        if r is last.get(r["test"]):
            lines += [f"  NOT SEEN known issue {i} in {r['test']} on this kernel"
                      for i in r.get("not_seen", [])]
            if r.get("replaced"):
                lines.append(f"  GUEST REPLACED after {r['test']}: {r['replaced']}")
    return "\n".join(lines) + "\n"


def detection_line(proof: dict | None) -> str:
    """Whether the lab saw the splats it fired on this kernel before the run: a run that
    cannot show it sees them says so in its header."""
    if proof is None:
        return "WARNING: splat detection not proved on this kernel: this run did not try " \
               "(only ./lab run does)"
    if not proof.get("proved"):
        return f"WARNING: splat detection not proved on this kernel: {proof.get('why')}"
    titles = "; ".join(t for ts in proof.get("seen", {}).values() for t in ts)
    return f"splat detection: proved on this kernel ({titles})" + \
        (", cached" if proof.get("cached") else "")


def _boot(b: dict) -> str:
    return f"{b['cpus']} cpu {b['memory_mb']} MB {b['boot_s']} s " \
           f"({b['accel']}{', restored' if b.get('restored') else ''})"


def _rerun_lines(r: dict, final: str | None) -> list[str]:
    """A failed attempt that was rerun: said only when the rerun passed (FLAKY or RERUN); a
    rerun that failed again is said on the test's own line."""
    if final == "flaky":
        return [f"  FLAKY   {r['test']}: failed, then did not reproduce on a rerun in a fresh "
                f"guest: {first_line(r['reason'])}"]
    if final == "passed":
        return [f"  RERUN   {r['test']}: passed on a fresh guest after the "
                f"{r.get('broke', ['guest'])[0]} broke: {first_line(r['reason'])}"]
    return []


def splat_line(splat: dict) -> str:
    """A splat in one line of summary.txt: its title, and where it happened as file:line when
    it was decoded, or why not."""
    frames = splat.get("decoded") or []
    where = f" at {frames[0]}" if frames else \
        (f" (not decoded: {splat['not_decoded']})" if splat.get("not_decoded") else "")
    return f"splat: {splat['title']}{where}"[:400]


def first_line(text: str) -> str:
    """The first non-blank line, cut to fit one line of summary.txt."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:300]
