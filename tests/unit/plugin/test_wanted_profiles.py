"""The machine profiles a run boots ahead (guests.wanted_profiles): those of the tests that
will run, each once; found after -k has deselected (a `-k kselftest` run booted three
profiles ahead that none of its tests used)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from harness import config
from harness.pytest_plugin.guests import Profile, wanted_profiles


def _item(**kw: object) -> SimpleNamespace:
    marker = SimpleNamespace(kwargs=kw) if kw else None
    return SimpleNamespace(get_closest_marker=lambda name: marker)


def test_each_profile_once_the_unmarked_on_lab_yamls_machine() -> None:
    m = config.MachineSpec(cpus=1, memory_mb=1024)
    items = [_item(), _item(cpus=2), _item(), _item(memory_mb=256), _item(cpus=2),
             _item(warm_reboot=True)]
    assert wanted_profiles(items, m) == (  # type: ignore[arg-type]
        Profile(1, 1024, ""), Profile(2, 1024, ""), Profile(1, 256, ""),
        Profile(1, 1024, "", warm_reboot=True))


def test_a_cmdline_made_from_the_arch_is_the_kernels_arch_line() -> None:
    m = config.MachineSpec(cpus=1, memory_mb=1024)
    per_arch = {"x86_64": "memmap=4M$0x30000000", "arm64": ""}.__getitem__
    items = [_item(cmdline=per_arch), _item(cmdline="nokaslr")]
    assert wanted_profiles(items, m, "arm64") == (  # type: ignore[arg-type]
        Profile(1, 1024, ""), Profile(1, 1024, "nokaslr"))
    assert wanted_profiles(items, m, "x86_64")[0] == (  # type: ignore[arg-type]
        Profile(1, 1024, "memmap=4M$0x30000000"))


def test_collection_finish_sees_only_what_k_left(tmp_path: Path) -> None:
    # The hook the pool reads its profiles in runs after -k's deselection (pytest's own
    # contract; checked because the earlier hook did not).
    (tmp_path / "conftest.py").write_text(
        "def pytest_collection_finish(session):\n"
        "    print('FINISH', sorted(i.name for i in session.items))\n")
    (tmp_path / "test_x.py").write_text("def test_kept():\n    pass\n"
                                        "def test_dropped():\n    pass\n")
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-s", "-p",
                          "no:cacheprovider", "-k", "kept", "test_x.py"], cwd=tmp_path,
                         capture_output=True, text=True).stdout
    assert "FINISH ['test_kept']" in out
