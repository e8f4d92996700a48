"""The explorer's operations as cases both reproducer generators are held to: every
operation of the paths' OPS tables (probes/explore_perf.py, probes/explore_trace.py) in every
form its arguments select, and the text the generators made of them, kept in
tests/unit/data/explore-repro/ so a reshaped generator is checked byte for byte against the
one before it."""
from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness.explore import reproducer
from harness.probe_modules import probe_module

DATA = Path(__file__).resolve().parents[1] / "data" / "explore-repro"


def model_ops(path: str) -> set[str]:
    """The operations of a path: its OPS table."""
    return set(reproducer.world(path).OPS)


def step(i: int, op: str, *args: Any) -> dict[str, Any]:
    """A step with positional arguments (format 1: short to write), named by named_steps()."""
    return {"id": i, "op": op, "args": list(args)}


def named_steps(path: str, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Steps as the explorer records them now: arguments named by their operation."""
    return probe_module("explore_ops").named(reproducer.world(path).OPS, steps)


# Every operation, and every form of it the generators tell apart (the kind of event, the
# mode of a trace open, what a mapping covers, its protection and sharing, each mremap and
# madvise), in an order that makes sense to a reader; ids are distinct so slots differ.
PERF_STEPS = [
    step(0, "open", "dummy"), step(1, "open", "tp"), step(2, "open", "pmu"),
    step(3, "mmap", "@0", 9, "rw", "shared"), step(4, "mmap", "@0", 3, "r", "private"),
    step(5, "mmap", "@2", 5, "rw", "shared"), step(6, "aux", "@2", 4),
    step(7, "pause", "@1", 1), step(8, "pause", "@1", 0), step(9, "fire", 3),
    step(10, "consume", "@3"), step(11, "poke", "@3", 2),
    step(12, "madvise", "@3", "dofork"), step(13, "madvise", "@3", "dontfork"),
    step(14, "madvise", "@4", "dontdump"), step(15, "madvise", "@4", "wipeonfork"),
    step(16, "fork"), step(17, "mremap", "@3", "move"), step(18, "mremap", "@3", "grow"),
    step(19, "mremap", "@4", "shrink"), step(20, "mremap", "@4", "dontunmap"),
    step(21, "munmap-part", "@5"), step(22, "munmap", "@3"), step(23, "close", "@0"),
    step(24, "open", "tp", 0, 4096, 0, "@2"), step(25, "aux", "@2", 4, "after", "r"),
    step(26, "revoke")]
TRACE_STEPS = [
    step(0, "open", 0), step(1, "open", 1, "rw"),
    step(2, "mmap", "@0", "meta", "r", "shared"), step(3, "mmap", "@0", "off", "rw", "private"),
    step(4, "mmap", "@1", "all", "rx", "shared"), step(5, "mmap", "@1", "past", "r", "shared"),
    step(6, "get-reader", "@0"), step(7, "ioctl", "@0"), step(8, "write", 10),
    step(9, "mprotect", "@2"), step(10, "madvise", "@2", "dofork"), step(11, "fork"),
    step(12, "mremap", "@2", "move"), step(13, "mremap", "@4", "grow"),
    step(14, "mremap", "@4", "shrink"), step(15, "mremap", "@4", "dontunmap"),
    step(16, "munmap-part", "@4"), step(17, "resize", 32), step(18, "subbuf", 8),
    step(19, "snapshot", 1), step(20, "munmap", "@2"), step(21, "close", "@0"),
    step(22, "percent", 0), step(23, "poll", "@1"), step(24, "read", "@1"),
    step(25, "get-reader", "@1", "@4"), step(26, "drain", "@1", "@4"),
    step(27, "trigger", "arm"), step(28, "trigger", "disarm"), step(29, "persistent", "fixed")]
REMOTE_STEPS = [
    step(0, "size", 0), step(1, "size", 16), step(2, "enable", 1), step(3, "on", 1),
    step(4, "write", 8), step(5, "open", "all"), step(6, "open", "cpu0"), step(7, "read", "@5"),
    step(8, "show"), step(9, "reset"), step(10, "mmap"), step(11, "close", "@6"),
    step(12, "on", 0)]
STEPS = {"pinning": named_steps("pinning", PERF_STEPS),
         "trace-mmap": named_steps("trace-mmap", TRACE_STEPS),
         "trace-remote": named_steps("trace-remote", REMOTE_STEPS)}


def expectations(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fixed verdicts (not the model's: the test is of the text, not of the ABI): one, two
    and three allowed results, a VmPin check on every other step."""
    allowed = (["ok"], ["ok", "EPERM"], ["EINVAL", "ENOMEM", "ok"])
    return [{"step": s, "allowed": allowed[k % 3], "vm_pin_kb": k * 4 if k % 2 else None}
            for k, s in enumerate(steps)]


def failure(path: str, who: str = "user", steps: list | None = None) -> SimpleNamespace:
    """A failure of the path as the generators read one (who: the user the perf setup makes)."""
    trace = path == "trace-mmap"
    setup = {"buffer_kb": 8, "subbuf_kb": 4} if trace else \
        {"mlock_pages": 9, "rlimit_pages": 8, "who": who}
    env = {"ncpus": 1, "instance": "x", "has_snapshot": True, "has_subbuf": True} if trace else \
        {"page_size": 4096, "ncpus": 1, "mlock_kb": 36, "has_pmu": True, "has_tp": True}
    if path == "trace-remote":
        setup, env = {"size_kb": 7}, {"ncpus": 1}
    return SimpleNamespace(path=path, check="allowance", setup=setup, env=env,
                           steps=STEPS[path] if steps is None else steps)


def same_as_kept(name: str, text: str) -> None:
    """The text equals the one kept under `name` (as `name`.txt: data, not code of ours);
    RINGLAB_REGEN_REPRO=1 keeps it instead."""
    kept = DATA / (name if name.endswith(".txt") else f"{name}.txt")
    if os.environ.get("RINGLAB_REGEN_REPRO") == "1":
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(text)
    assert text == kept.read_text(), f"{name}: the generated text changed"
