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
from harness.explore.session import explore_cmdline

KEPT = sorted((Path(__file__).parent / "explore").glob("*.json"))


def _case(path: Path) -> object:
    """A kept file's case: one that maps a persistent buffer boots as the explorer's guests do
    (its instances on the command line, for the kernel's arch)."""
    doc = kept.load(path)
    cmdline = explore_cmdline if any(s["op"] == "persistent" for s in doc.steps) else ""
    return pytest.param(path, id=path.stem, marks=pytest.mark.guest(fresh=True, cmdline=cmdline))


def _needs_test_pmu(doc: kept.KeptFailure) -> bool:
    return doc.path == "perf-aux" or any(
        s["op"] == "revoke" or (s["op"] == "open" and s["args"].get("kind") == "pmu")
        for s in doc.steps)


@pytest.mark.parametrize("kept_file", [_case(p) for p in KEPT])
def test_kept_failure(probe_check, check, kept_file: Path,
                      request: pytest.FixtureRequest) -> None:
    doc = kept.load(kept_file)
    if _needs_test_pmu(doc):
        request.getfixturevalue("test_pmu")   # loaded as the explorer loads it; else a skip
    out = probe_check("probe_explore", "replay", doc.path,
                      json.dumps({"setup": doc.setup, "steps": doc.steps}), once=False)
    run = out["replays"][0]
    if not run["steps"] and run["failure"] is None:
        pytest.skip(f"no step of the kept sequence applies on this kernel (the model's "
                    f"preconditions, from what the guest has): first "
                    f"{step_text(doc.path, doc.steps[0])}")
    f = run["failure"]
    if f is not None and f["check"].startswith("splat:"):
        f = None    # the splat itself is in the test's kernel log: the plugin judges it
    steps = "\n  ".join(f"{step_text(doc.path, s)} -> {s['result']}" for s in run["steps"])
    check(f"explore:{f['check'] if f else doc.check}", f is None,
          f"{doc.why}\n  the sequence ({doc.path}, found on {doc.found.get('kernel')}):\n"
          f"  {steps}\n  failed {f and f['check']} at step {f and f['at']}: expected "
          f"{f and f['expected']}, got {f and f['got']}",
          path=doc.path, traits=doc.traits, got=f and f["got"])
