"""Every failure `./lab explore` found and kept (tests/kernel/explore/*.json: data, not code)
replayed on every run: the shortest sequence, checked against the model after each step
(probes/probe_explore.py replay). A kept failure named after a known issue
(<issue id>--<what>.json) is that issue (kernels/known-issues.yaml `explore:`): XFAIL while the
kernel shows it, NOT SEEN once it does not. A splat it causes is the plugin's to attribute."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.explore import kept
from harness.explore.report import step_text

KEPT = sorted((Path(__file__).parent / "explore").glob("*.json"))


@pytest.mark.guest(fresh=True)
@pytest.mark.parametrize("kept_file", KEPT, ids=[p.stem for p in KEPT])
def test_kept_failure(probe_check, check, kept_file: Path) -> None:
    doc = kept.load(kept_file)
    if doc.path == "perf-aux" or any(s["op"] == "open" and s["args"].get("kind") == "pmu"
                                     for s in doc.steps):
        pytest.skip("the kept sequence needs the test PMU, which this test does not load")
    if any(s["op"] in ("persistent", "revoke") for s in doc.steps):
        pytest.skip("the kept sequence needs the explorer's guest (persistent buffers on its "
                    "command line, the test PMU): replay it with ./lab explore")
    out = probe_check("probe_explore", "replay", doc.path,
                      json.dumps({"setup": doc.setup, "steps": doc.steps}), once=False)
    run = out["replays"][0]
    f = run["failure"]
    if f is not None and f["check"].startswith("splat:"):
        f = None    # the splat itself is in the test's kernel log: the plugin judges it
    steps = "\n  ".join(f"{step_text(doc.path, s)} -> {s['result']}" for s in run["steps"])
    check(f"explore:{f['check'] if f else doc.check}", f is None,
          f"{doc.why}\n  the sequence ({doc.path}, found on {doc.found.get('kernel')}):\n"
          f"  {steps}\n  failed {f and f['check']} at step {f and f['at']}: expected "
          f"{f and f['expected']}, got {f and f['got']}",
          path=doc.path, traits=doc.traits, got=f and f["got"])
