"""The lab proves its eyes on each kernel: before a run, a throw-away guest fires one WARN and
one BUG from kernels/modules/ringlab_splat, and the lab checks that its splat parser
(harness/kernellog/splats.py) saw both, with their titles. On a kernel with KCSAN (the race
variant) it fires a data race too: KCSAN's reports are the point of that kernel.

A lab that cannot see a splat must not report green (issue 33: every 7.x WARNING was invisible
until the parser learned the v6.19 banner). The proof is cached with the kernel: its key is the
kernel image, the parser's sources and the module's, so it is redone when any of them changes.
Three outcomes:
- proved: both splats seen; the run's summary says so.
- not proved: the lab could not fire them (no modules for this kernel, the kernel did not
  report); the run goes on and its summary says why, as a run-level warning.
- blind: the kernel reported (its taint mask says so) and the parser saw nothing: a lab error
  (exit 2), never a green run.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness import cache
from harness.errors import LabError, ModuleError
from harness.guest.guest import Guest
from harness.kernellog import splats
from harness.kernels import modules
from harness.resources import Lab

log = logging.getLogger(__name__)

PARSER = [Path(splats.__file__), Path(splats.console.__file__)]
MODULE = "ringlab_splat"
VERSION = 2
# What fires, how the kernel's taint mask shows it fired (kernel/panic.c taint_flags), and the
# kind and title the parser must give it: (fire, taint bit, kind, title pattern).
FIRED = (("warn", 9, "WARNING", r"^WARNING at \S*ringlab_splat\.c:\d+ ringlab_splat_warn$"),
         ("bug", 7, "BUG", r"^kernel BUG at \S*ringlab_splat\.c:\d+$"))
# Fired where the module lists it (CONFIG_KCSAN): a report taints nothing, so KCSAN's own
# count of the races it reported (/sys/kernel/debug/kcsan) says whether it reported one.
RACE = ("race", "data_races", "KCSAN",
        r"^KCSAN: data-race in ringlab_splat_race_read / ringlab_splat_race_tick$")
KCSAN_STATS = "/sys/kernel/debug/kcsan"


class Blind(LabError):
    """The kernel reported a splat and the parser saw none."""


@dataclass
class Proof:
    """What the lab saw on one kernel when it fired its splats."""
    kernel: str
    release: str
    proved: bool
    why: str = ""                                      # not proved: why
    seen: dict[str, list[str]] = field(default_factory=dict)  # fired kind -> titles seen
    console: str = ""                                  # the guest's kernel log while firing
    cached: bool = False


FILE = "splat-proof.json"


def write(proof: Proof, report_dir: Path) -> None:
    """The proof into a run's report folder, where its summary reads it (read())."""
    (report_dir / FILE).write_text(json.dumps(asdict(proof), indent=2))


def read(report_dir: Path) -> dict | None:
    """A run's proof as written by write() (without the console), None if it has none."""
    try:
        d = json.loads((report_dir / FILE).read_text())
    except (OSError, ValueError):
        return None
    d.pop("console", None)
    return d


def key(image: Path) -> str:
    """The proof's cache key: the kernel image, the parser, the module's sources."""
    h = hashlib.sha256(f"v{VERSION}\0".encode())
    h.update(hashlib.sha256(image.read_bytes()).digest())
    for p in PARSER:
        h.update(p.read_bytes())
    h.update(modules.source_hash(modules.sources(MODULE)).encode())
    return h.hexdigest()[:16]


def prove(lab: Lab, kernel_name: str, work: Path) -> Proof:
    """The proof for this kernel, from the cache or fired now in a throw-away guest (its
    console log in `work`). Raises Blind if the parser missed what the kernel reported."""
    k = lab.kernel(kernel_name)
    where = lab.layout.root / "splat-proofs" / f"{key(k.vmlinuz)}.json"
    if where.exists():
        proof = Proof(**json.loads(where.read_text()))
        proof.kernel, proof.cached = k.name, True  # the same image under another name
        return proof
    try:
        ko = lab.module(MODULE, kernel_name)
    except ModuleError as e:  # no headers or no module support; or our module's own error
        return Proof(k.name, k.release, False, f"{MODULE} cannot be built for it ({e.message})")
    try:
        proof = fire(lab, kernel_name, ko, work)
    except Blind:
        raise
    except LabError as e:  # the suite's own guests will say what is wrong with this kernel
        return Proof(k.name, k.release, False, f"the proof's guest failed: {e.message}")
    if proof.proved:
        cache.write_atomic(where, json.dumps(asdict(proof), indent=2).encode())
    return proof


def fire(lab: Lab, kernel_name: str, ko: Path, work: Path) -> Proof:
    """Fire each kind of FIRED in a fresh guest and judge what the parser saw."""
    work.mkdir(parents=True, exist_ok=True)
    k = lab.kernel(kernel_name)
    seen: dict[str, list[str]] = {}
    missed: list[str] = []
    with lab.boot(kernel_name, work / "console-splat-proof.log") as g:
        g.insmod(ko)
        g.kmsg()
        start = len(g.kernel_log)
        for kind, *_ in FIRED:
            before = len(g.kernel_log)
            r = g.run(f"echo {kind} > /sys/module/{MODULE}/parameters/fire", timeout=60)
            if r.exit_status != 0:
                return Proof(k.name, k.release, False, f"'echo {kind} > .../fire' failed in "
                             f"the guest: {(r.stderr or r.stdout).strip()}")
            seen[kind] = judge(kind, _settled(g)[before:], g.tainted, k.name, work)
            if not seen[kind]:
                missed.append(kind)
        if RACE[0] in g.run(f"cat /sys/module/{MODULE}/parameters/fire").stdout.split():
            seen[RACE[0]] = fire_race(g, k.name, work)
            if not seen[RACE[0]]:
                missed.append(RACE[0])
        console = "\n".join(g.kernel_log[start:])
    if missed:
        return Proof(k.name, k.release, False, f"the kernel did not report "
                     f"{' and '.join(missed)} when fired", seen, console)
    return _judged(Proof(k.name, k.release, True, "", seen, console))


def judge(kind: str, lines: list[str], tainted: int, kernel: str, work: Path) -> list[str]:
    """The titles the parser gives the splats of `kind` in these lines; raises Blind if it
    gives none while the taint mask says the kernel reported one (-1: mask unknown)."""
    _, bit, want_kind, _ = next(f for f in FIRED if f[0] == kind)
    titles = [s.title for s in splats.find(lines) if s.kind == want_kind]
    if not titles and tainted >= 0 and tainted >> bit & 1:
        raise Blind(f"kernel {kernel} reported the '{kind}' splat (taint bit {bit} set) and "
                    f"the lab's splat parser saw nothing in its log: every splat of a run on "
                    f"it would go unseen", hint=f"the guest's console is in {work}")
    return titles


def kcsan_count(g: Guest, counter: str = RACE[1]) -> int:
    """One of KCSAN's counters in the guest (-1 if it cannot be read)."""
    r = g.run(f"mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug; "
              f"cat {KCSAN_STATS}")
    m = re.search(rf"^{counter}: (\d+)$", r.stdout, re.M)
    return int(m.group(1)) if m else -1


def fire_race(g: Guest, kernel: str, work: Path) -> list[str]:
    """Fire a data race; the titles the parser gives KCSAN's reports of it. Raises Blind if
    KCSAN counted a report the parser did not see."""
    before, counted = len(g.kernel_log), kcsan_count(g)
    g.run(f"echo {RACE[0]} > /sys/module/{MODULE}/parameters/fire", timeout=60)
    titles = [s.title for s in splats.find(_settled(g)[before:]) if s.kind == RACE[2]]
    if not titles and counted >= 0 and kcsan_count(g) > counted:
        raise Blind(f"kernel {kernel} reported a data race (KCSAN's {RACE[1]} went up) and "
                    f"the lab's splat parser saw nothing in its log: every race of a run on "
                    f"it would go unseen", hint=f"the guest's console is in {work}")
    return titles


def _settled(g: Guest) -> list[str]:
    """The guest's kernel log once the report is whole: a BUG in a kernel thread is printed
    after the writer got its answer, so read until two reads in a row add nothing."""
    last = -1
    for _ in range(20):
        g.kmsg()
        if len(g.kernel_log) == last:
            break
        last = len(g.kernel_log)
        time.sleep(0.3)
    return g.kernel_log


def _judged(proof: Proof) -> Proof:
    """A proof whose titles do not say what fired is no proof: the title is what known issues
    and the explorer go by."""
    fired = [(kind, pattern) for kind, _, _, pattern in FIRED]
    if RACE[0] in proof.seen:
        fired.append((RACE[0], RACE[3]))
    for kind, pattern in fired:
        if not any(re.match(pattern, t) for t in proof.seen.get(kind, [])):
            return Proof(proof.kernel, proof.release, False,
                         f"the '{kind}' splat was seen with the title "
                         f"{proof.seen.get(kind)!r}, not one that names where it fired",
                         proof.seen, proof.console)
    return proof
