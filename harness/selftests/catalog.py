"""Which of the kernel's selftests the lab runs, and how one case is named and started.

The programs of tools/testing/selftests that exercise the four paths (issue 30 §3), and the
ftracetest cases that touch ring buffers and instances. A kselftest_harness.h program lists
its cases with `-l` and runs one with `-r FIXTURE.VARIANT.TEST`, so each case is one pytest
test; an ftracetest case is one .tc file (run with -K for KTAP).
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass

from harness.kernels.mutants import watchers_of_folder

# kselftest target -> its programs that map or fill ring buffers.
PROGRAMS: dict[str, tuple[str, ...]] = {
    "perf_events": ("mmap", "watermark_signal", "sigtrap_threads", "remove_on_exec"),
    "ring-buffer": ("map_test",),
}
# ftracetest cases (globs under test.d/): the trace remotes where the tree has them, buffer
# size, sub-buffers, snapshot, instances, snapshot triggers. The remotes first: they are the
# costliest (remotes/trace.tc 3.4 min under TCG, the others 10-22 s), and under -j the cases
# start in this order, so the long ones do not start last.
FTRACE_CASES: tuple[str, ...] = (
    "remotes/*.tc", "remotes/*/*.tc",
    "00basic/ringbuffer_size.tc", "00basic/ringbuffer_subbuf_size.tc", "00basic/snapshot.tc",
    "00basic/snapshot1.tc", "00basic/trace_pipe.tc", "instances/*.tc",
    "trigger/trigger-snapshot.tc", "trigger/trigger-trace-marker-snapshot.tc",
)
# What a program assumes of the machine without checking it (it fails, not skips, without):
# the lab asks the guest first and skips with this reason. key: target/program.
HW_PMU_CHECK = (
    "python3 -c 'import ctypes,os,struct,sys; a=bytearray(128); "
    "struct.pack_into(\"IIQ\",a,0,0,128,1); struct.pack_into(\"Q\",a,40,1|1<<5|1<<6); "
    "b=(ctypes.c_char*128).from_buffer(a); l=ctypes.CDLL(None,use_errno=True); "
    "fd=l.syscall({\"x86_64\":298,\"aarch64\":241}[os.uname().machine],b,0,-1,-1,0); "
    "sys.exit(0 if fd>=0 else \"perf_event_open: \"+os.strerror(ctypes.get_errno()))'")
NEEDS: dict[str, tuple[str, str]] = {
    "perf_events/remove_on_exec": (
        "a hardware PMU counting instructions (its fixture asserts perf_event_open of "
        "PERF_TYPE_HARDWARE/PERF_COUNT_HW_INSTRUCTIONS succeeds)", HW_PMU_CHECK),
}
# The lab's test module loaded before a program, when the lab can build it: ringlab_aux is an
# AUX-capable PMU, so mmap.c's AUX variants find one even under TCG.
MODULES: dict[str, str] = {"perf_events/mmap": "ringlab_aux"}
# Shell commands run before an ftracetest case whose `requires:` names the key: the test
# remote (CONFIG_TRACE_REMOTE_TEST) is a module the remotes/ cases expect loaded.
SETUP: dict[str, str] = {"remotes/test": "modprobe remote_test"}
# vCPUs a case needs to test what it is for, by its pytest id: remotes/hotplug.tc offlines a
# CPU and skips itself on fewer than 2 ("[ $(get_cpu_ids | wc -l) -ge 2 ] || return 1"), and
# reset.tc leaves out its second CPU's part; the guest marker gives them a 2-vCPU guest. (On
# x86 hotplug.tc still skips: it offlines the first CPU, and cpu0 has no `online` file there.)
CPUS: dict[str, int] = {"ftrace/remotes/hotplug": 2, "ftrace/remotes/reset": 2}
KSELFTEST = "kselftest"   # the -k that picks the kernel's own (their pytest file's name)
DEFAULT_TIMEOUT_S = 45
FTRACE_LOG = "log: "   # the prefix of an ftracetest case's log lines in its output
FTRACE_LOG_TAIL = 8  # kselftest's own default (runner.sh) when a target has no settings


@dataclass(frozen=True)
class SelftestCase:
    """One case: a kselftest_harness case of a program, or one ftracetest .tc file."""
    target: str           # kselftest target: perf_events, ring-buffer, ftrace
    program: str          # the program (ftracetest for ftrace)
    case: str             # FIXTURE[.VARIANT].TEST, or the .tc path under test.d/
    timeout_s: int = DEFAULT_TIMEOUT_S
    requires: str = ""    # ftracetest: the case's `requires:` line (its skip reason)

    @property
    def key(self) -> str:
        """target/program, as NEEDS and MODULES name it."""
        return f"{self.target}/{self.program}"

    def setup(self) -> str | None:
        """The SETUP command this case wants first, if any."""
        return next((c for need, c in SETUP.items() if need in self.requires.split()), None)

    @property
    def cpus(self) -> int | None:
        """The vCPUs the case needs (CPUS), None: the lab's default guest."""
        return CPUS.get(self.id)

    @property
    def id(self) -> str:
        """The pytest id: target/program/case (stable across kernels, for the tables)."""
        if self.target == "ftrace":
            return f"ftrace/{self.case.removesuffix('.tc')}"
        return f"{self.target}/{self.program}/{self.case}"

    def command(self, root: str) -> str:
        """The shell command that runs this case alone in the guest, the bundle at `root`."""
        where = f"{root}/{self.target}"
        if self.target == "ftrace":
            # -v: a failing case's log (its `set -x` trace) follows its result, as # lines;
            # -k keeps every case's log, whose tail (FTRACE_LOG lines) says why a case that
            # prints no reason skipped (the check before its exit_unsupported).
            return (f"cd {shlex.quote(where)} && d=$(mktemp -d) && ./ftracetest -K -v -k "
                    f"-l $d test.d/{shlex.quote(self.case)} 2>&1; s=$?; for f in $d/*-log.*; "
                    f"do tail -n {FTRACE_LOG_TAIL} \"$f\" | sed 's/^/# {FTRACE_LOG}/'; done; "
                    "rm -rf $d; exit $s")
        return f"cd {shlex.quote(where)} && ./{self.program} -r {shlex.quote(self.case)} 2>&1"


def harness_cases(listing: str) -> list[str]:
    """The case names (`FIXTURE.VARIANT.TEST`, `FIXTURE.TEST` without variants) from a
    kselftest_harness.h program's `-l` output. That listing prints a fixture's variants and
    tests side by side (columns of 20 and 25, a longer name pushing the next one right), so
    each fixture runs every test under every variant."""
    fixtures: list[tuple[str, list[str], list[str]]] = []
    for line in listing.splitlines():
        if line.startswith("#") or line.startswith("---") or not line.strip():
            continue
        fixture, rest = _column(line, 20)
        variant, test = _column(rest, 25)
        if fixture:
            fixtures.append((fixture, [], []))
        if not fixtures:
            continue
        if variant:
            fixtures[-1][1].append(variant)
        if test.strip():
            fixtures[-1][2].append(test.strip())
    names = []
    for fixture, variants, tests in fixtures:
        for variant in variants or [""]:
            for test in tests:
                names.append(".".join(p for p in (fixture, variant, test) if p))
    return names


def _column(line: str, width: int) -> tuple[str, str]:
    """Split a `%-Ns ` column off the front: (its name or "", the rest of the line)."""
    if line[:1] == " " or not line:
        return "", line[width + 1:]
    name = line.split(" ", 1)[0]
    return name, line[max(width, len(name)) + 1:]


def targets_of(file: str) -> tuple[str, ...] | None:
    """The kselftest targets that can see a change to `file` (a path in the tree); None:
    any of them (a file outside these paths' folders)."""
    watchers = watchers_of_folder(file)   # one table with the explorer's paths
    return watchers.selftest_targets if watchers else None


def selection_for_all(files: list[str]) -> str:
    """The pytest -k of the selftests that can see a change to any of `files`: what the
    unmutated kernel runs, so that every mutant's cases have a verdict to be judged against."""
    targets = [targets_of(f) for f in dict.fromkeys(files)]
    if not targets or None in targets:
        return KSELFTEST
    chosen = dict.fromkeys(t for ts in targets for t in ts or ())
    return f"{KSELFTEST} and ({' or '.join(chosen)})"


def with_selftests(selection: str, selftests: str) -> str:
    """The -k of a run of `selection` (the user's) with the kernel's selftests `selftests`
    picks: added to ours; or, where the user's -k names the kernel's own itself, narrowing
    them (a `-k "kselftest and trace_pipe"` ran every trace case on the unmutated kernel)."""
    if KSELFTEST not in selection:
        return f"({selection}) or ({selftests})"
    return f"({selection}) and (({selftests}) or not {KSELFTEST})"


def selection_for(file: str) -> str:
    """The pytest -k of the kernel's own selftests that can see a change to `file` (a path
    in the tree): their ids start with the target (SelftestCase.id)."""
    targets = targets_of(file)
    if not targets:
        return KSELFTEST
    return f"{KSELFTEST} and ({' or '.join(targets)})"
