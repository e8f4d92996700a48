"""A known issue's reproducer: made from the failure `./lab explore` kept for it
(tests/kernel/explore/<issue>--*.json) by the explorer's own generators, built on the host as
a static binary (the guests have no compiler), and run as root on each kernel asked for."""
from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import LabError
from harness.explore import kept, reproducer
from harness.explore.kept import KeptFailure
from harness.explore.report import KEPT
from harness.findings.mail import ReproRun
from harness.resources import Lab

# The page size the reproducer is written for: the lab's x86 guests (a 64 KiB-page arm64
# kernel needs its own, made by `./lab explore` there).
PAGE = 4096
RUN_S = 120.0


def kept_failure(issue_id: str, kept_dir: Path = KEPT) -> KeptFailure | None:
    """The shortest failure kept for the issue, if `./lab explore --keep` kept one."""
    found = [kept.load(p) for p in sorted(kept_dir.glob(f"{issue_id}--*.json"))]
    if not found:
        return None
    f = min(found, key=lambda k: len(k.steps))
    # What the explorer's guest said about itself, for a 1-vCPU 4 KiB-page guest without the
    # test PMU or a tracepoint: the model's expectations need it, the program reads the rest.
    # The tracefs files of the kernels the lab runs (buffer_subbuf_size_kb since 6.8): a
    # sequence that writes one must keep that step, and the program says if a kernel lacks it.
    f.env = {"page_size": PAGE, "ncpus": 1, "has_pmu": False, "tp_id": None, "has_tp": False,
             "mlock_kb": f.setup.get("mlock_pages", 0) * PAGE // 1024,
             "has_snapshot": True, "has_subbuf": True}
    return f


def write(folder: Path, f: KeptFailure) -> list[Path]:
    """repro.py and repro.c in `folder`."""
    return reproducer.write(folder, f, f.why)


def build(source: Path) -> Path:
    """`source` built as a static binary beside it (the guests' rootfs has no compiler)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise LabError("gcc is not installed on this host: it builds the reproducer",
                       hint="apt install gcc libc6-dev (./lab installs them for build verbs)")
    out = source.with_suffix("")
    p = subprocess.run([gcc, "-static", "-O2", "-Wall", "-pthread", "-o", str(out), str(source)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise LabError(f"the reproducer {source} does not build: "
                       + "; ".join(p.stderr.strip().splitlines()[:3]))
    return out


def run_on(lab: Lab, kernel: str, binary: Path, console_log: Path) -> ReproRun:
    """The binary run as root in a fresh guest of `kernel`."""
    with lab.boot(kernel, console_log) as g:
        g.ssh.push(binary, "/tmp/repro")
        r = g.run("chmod +x /tmp/repro && /tmp/repro", timeout=RUN_S)
        out = tuple((r.stdout + r.stderr).splitlines())
        return ReproRun(kernel, g.kernel.release, g.kernel.description, r.exit_status, out)
