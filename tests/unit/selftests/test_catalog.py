"""Which of the kernel's own selftests `./lab mutate --selftests` runs on a mutant of a file
(catalog.selection_for): the -k it gives, fed to pytest itself on the real case ids."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.selftests import catalog

IDS = ["perf_events/mmap/perf_mmap.rb.map", "perf_events/watermark_signal/global.watermark_signal",
       "ring-buffer/map_test/map.subbuf_size_4k.data_mmap", "ftrace/00basic/snapshot",
       "ftrace/remotes/trace"]


def picked(tmp_path: Path, expr: str, ours: bool = False) -> list[str]:
    """The case ids pytest's -k `expr` selects from a test file named as ours (with `ours`,
    the names of our own tests it selects too)."""
    (tmp_path / "test_kselftest.py").write_text(
        "import pytest\n"
        f"@pytest.mark.parametrize('case', {IDS!r}, ids={IDS!r})\n"
        "def test_selftest(case):\n    pass\n")
    (tmp_path / "test_mapping.py").write_text("def test_ours():\n    pass\n")
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                          "no:cacheprovider", "-k", expr, "test_kselftest.py",
                          "test_mapping.py"],
                         cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    ids = [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "[" in line]
    return ids + ([line.split("::")[-1] for line in out.splitlines()
                   if line.endswith("::test_ours")] if ours else [])


@pytest.mark.parametrize("file, want", [
    ("kernel/events/core.c", IDS[:2]),
    ("kernel/events/ring_buffer.c", IDS[:2]),
    ("kernel/trace/ring_buffer.c", IDS[2:]),
    ("kernel/trace/trace_remote.c", IDS[2:]),
    ("kernel/trace/trace_snapshot.c", IDS[2:]),  # by its folder
    ("mm/mmap.c", IDS),                       # a file not named: every target
])
def test_a_mutants_file_picks_the_targets_that_exercise_it(tmp_path: Path, file: str,
                                                            want: list[str]) -> None:
    assert picked(tmp_path, catalog.selection_for(file)) == want


@pytest.mark.parametrize("files, want", [
    (["kernel/events/core.c", "kernel/events/ring_buffer.c"], IDS[:2]),
    (["kernel/events/core.c", "kernel/trace/trace.c"], IDS),
    (["kernel/trace/ring_buffer.c", "mm/mmap.c"], IDS),
])
def test_the_unmutated_kernel_runs_every_target_its_mutants_will(
        tmp_path: Path, files: list[str], want: list[str]) -> None:
    assert picked(tmp_path, catalog.selection_for_all(files)) == want


def test_a_case_that_offlines_a_cpu_asks_for_a_guest_with_two() -> None:
    """remotes/hotplug.tc skips itself on one CPU ("UNSUPPORTED after: [ 1 -ge 2 ]", seen on
    the 7.3 tree's run): the lab gives it two instead of calling that the kernel's skip."""
    hotplug = catalog.SelftestCase("ftrace", "ftracetest", "remotes/hotplug.tc")
    trace = catalog.SelftestCase("ftrace", "ftracetest", "remotes/trace.tc")
    assert (hotplug.id, hotplug.cpus, trace.cpus) == ("ftrace/remotes/hotplug", 2, None)


@pytest.mark.parametrize("user, want", [
    ("test_ours", ["perf_events/mmap/perf_mmap.rb.map",
                   "perf_events/watermark_signal/global.watermark_signal", "test_ours"]),
    ("kselftest and watermark", ["perf_events/watermark_signal/global.watermark_signal"]),
    ("test_ours or (kselftest and rb)", ["perf_events/mmap/perf_mmap.rb.map", "test_ours"]),
])
def test_the_users_k_adds_ours_or_narrows_the_kernels_own(tmp_path: Path, user: str,
                                                          want: list[str]) -> None:
    """With --selftests, a mutant of kernel/events/ runs perf_events' cases beside ours; a -k
    naming the kernel's own picks among them (round 8: "kselftest and ... trace_pipe" ran
    all 27 trace cases)."""
    expr = catalog.with_selftests(user, catalog.selection_for("kernel/events/core.c"))
    assert sorted(picked(tmp_path, expr, ours=True)) == sorted(want)
