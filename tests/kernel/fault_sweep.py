"""Judging a sweep of probes/fault_inject.py: a system call run with its 1st, 2nd, ...
allocation failing. What every mapping path owes such a failure is the same: the call is
refused with ENOMEM or succeeds anyway (a fallback), and the sweep ends with a call that made
all its allocations and succeeded; the path's own test then judges what each attempt left."""
from __future__ import annotations


def check_sweep(sweep: dict, what: str, refusals: tuple[str, ...] = ("ENOMEM",)) -> None:
    """The rules every sweep follows; `what` names the call in the messages."""
    attempts = sweep["attempts"]
    assert sweep["completed"], \
        f"{what}: still allocating after {len(attempts)} injected failures (fault_inject.LIMIT)"
    assert sweep["injected"] > 0, f"{what}: no allocation was made to fail: {attempts}"
    wrong = [(a["nth"], a["outcome"]) for a in attempts
             if a["injected"] and a["outcome"] not in ("ok", *refusals)]
    assert not wrong, \
        f"{what} with its Nth allocation failing must succeed or be refused with " \
        f"{' or '.join(refusals)}: (N, result) {wrong}"
    last = attempts[-1]
    assert last["outcome"] == "ok", \
        f"{what} with no allocation failing (all {last['nth'] - 1} made) was {last['outcome']}"


def where(what: str, attempt: dict) -> str:
    """'first mapping, allocation 3 failing (ENOMEM)', for a message."""
    if not attempt["injected"]:
        return f"{what}, no allocation failing"
    return f"{what}, allocation {attempt['nth']} failing ({attempt['outcome']})"


# warn_alloc()'s reports (harness/kernellog/splats.py titles): an injected failure's own.
INJECTED_TITLES = ("page allocation failure", "vmalloc error")


def not_injected(titles: list[str]) -> list[str]:
    """The splat titles a sweep did not cause itself: all but warn_alloc()'s reports (the
    test carries the injects_allocation_failures marker, so the plugin lets those by too)."""
    return [t for t in titles if not t.startswith(INJECTED_TITLES)]
