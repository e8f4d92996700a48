"""What an explore leaves: explore.json (per path: sequences, steps, failures), a folder per
distinct failure with failure.json, repro.py and repro.c, a kept copy under
tests/kernel/explore/ when asked, and the lines printed at the end."""
from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness import paths
from harness.explore import kept, reproducer
from harness.explore.session import ExploreRequest, Failure, PathResult

KEPT = paths.EXPLORE_KEPT


def slug(f: Failure) -> str:
    """A failure's folder and test name: what failed (cut to 60), then its known issue whole
    (a splat's title is long; the issue is what tells two failures of one check apart)."""
    what = re.sub(r"[^a-z0-9]+", "-", f"{f.path}-{f.splat or f.check}".lower()).strip("-")
    return what[:60].rstrip("-") + (f"--{f.known_issue}" if f.known_issue else "")


def title(f: Failure) -> str:
    what = f"splat {f.splat}" if f.splat else f"check {f.check}: expected {f.expected}, " \
        f"got {f.got}"
    return f"{f.path}: {what}, after {len(f.steps)} step(s)"


def write(out_dir: Path, request: ExploreRequest, kernel: str, release: str,
          results: list[PathResult], interrupted: bool) -> Path:
    """explore.json and the failures' folders; written whole also after Ctrl-C."""
    doc: dict[str, Any] = {"kernel": kernel, "release": release, "request": asdict(request),
           "interrupted": interrupted, "paths": []}
    for res in results:
        failures = []
        for f in res.failures.values():
            d = dict(f.as_dict(), format=kept.FORMAT)
            if f.steps:
                folder = out_dir / "failures" / slug(f)
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "failure.json").write_text(json.dumps(d, indent=2) + "\n")
                d["reproducers"] = [str(p.relative_to(out_dir))
                                    for p in reproducer.write(folder, f, title(f))]
            failures.append(d)
        doc["paths"].append({"path": res.path, "skipped": res.skipped, "stopped": res.stopped,
                             "sequences": res.sequences, "steps": res.steps,
                             "answers": res.answers,
                             "seconds": round(res.seconds, 1),
                             "steps_per_s": round(res.steps_per_s, 1),
                             "crashes": res.crashes, "failures": failures,
                             **({"load": res.load} if res.load else {}),
                             **({"edges": res.edges} if res.edges is not None else {}),
                             **({"corpus": res.corpus, "steered": res.steered}
                                if res.corpus is not None else {})})
    path = out_dir / "explore.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)
    return path


def worth_keeping(results: list[PathResult]) -> list[Failure]:
    """The confirmed failures, one per known issue (its shortest sequence), every new one."""
    best: dict[str, Failure] = {}
    for res in results:
        for f in res.failures.values():
            if not (f.confirmed and f.steps):
                continue
            key = f.known_issue or f.key
            if key not in best or len(f.steps) < len(best[key].steps):
                best[key] = f
    return list(best.values())


def keep(f: Failure, release: str, kept_dir: Path = KEPT) -> Path:
    """A failure as data the suite replays from then on (tests/kernel/test_explore_replay.py):
    named after its known issue, or new-<what>."""
    what = f.splat.split()[-1] if f.splat else f.check
    name = re.sub(r"[^a-z0-9-]+", "-", f"{f.known_issue or 'new'}--{f.path}-{what}".lower())
    return kept.dump(kept.KeptFailure(
        f.path, f.splat and "splat" or f.check, f.setup, f.steps, title(f), f.traits,
        {"kernel": release, "seed": f.seed, "sequence": f.sequence}), kept_dir / f"{name}.json")


def step_text(path: str, step: dict) -> str:
    """A step as its operation prints it: "mmap @0 9 rw shared"."""
    return reproducer.step_record(step, path).what


def answers_text(answers: dict[str, dict[str, int]]) -> str:
    """Each operation with its answers, most frequent first: "poll 40 (none 30, in 10)"."""
    parts = []
    for op, by in sorted(answers.items(), key=lambda kv: -sum(kv[1].values())):
        said = ", ".join(f"{r} {n}" for r, n in sorted(by.items(), key=lambda rn: -rn[1]))
        parts.append(f"{op} {sum(by.values())} ({said})")
    return "; ".join(parts)


def load_text(name: str, counts: dict, seconds: float) -> str:
    """A load's throughput beside a path: "marker@1 812 rounds/s (3 refused)", and, where the
    load itself failed (the lab's error), in how many sequences and why."""
    refused = counts["rounds"] - counts["ok"]
    rate = counts["rounds"] / seconds if seconds else 0.0
    died = counts.get("died", 0)
    return (f"{name} {rate:.0f} rounds/s" + (f" ({refused} refused)" if refused else "") +
            (f" [LOAD DIED in {died} sequence(s): {counts.get('error', '?')}]" if died else ""))


def lines(results: list[PathResult]) -> list[str]:
    out = []
    for res in results:
        if res.skipped:
            out.append(f"{res.path}: skipped: {res.skipped}")
            continue
        out.append(f"{res.path}: {res.sequences} sequences, {res.steps} steps in "
                   f"{res.seconds:.0f} s ({res.steps_per_s:.0f} steps/s), "
                   f"{len(res.failures)} distinct failure(s), {res.crashes} crash(es)")
        if res.stopped:
            out.append(f"  stopped before its budget: {res.stopped}")
        if res.load:
            out.append("  load beside it: " + ", ".join(
                load_text(name, c, res.seconds) for name, c in res.load.items()))
        if res.answers:
            out.append("  reached: " + answers_text(res.answers))
        for f in res.failures.values():
            if f.check == "explorer":
                out.append(f"  LAB ERROR (the explorer's own, not the kernel's): {f.got} "
                           f"[{f.seen} sequence(s)]")
                continue
            state = "confirmed" if f.confirmed else f"NOT confirmed ({f.confirm_got})"
            issue = f"known issue {f.known_issue}" if f.known_issue else "NEW"
            out.append(f"  {issue}: {title(f)} [{state}; {f.seen} sequence(s)]")
            for s in f.steps:
                out.append(f"      {s['id']}: {step_text(f.path, s)}")
    return out
