"""harness/findings/repro.py: a known issue's reproducer. The shortest kept failure of the
issue is the one used, with the guest facts the model needs (a 4 KiB page, the allowance in
kB from its pages); a host without gcc, or a reproducer that does not build, is said with the
culprit; a run on a guest comes back as the kernel's ReproRun. gcc and the guest are faked."""
from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness import paths
from harness.errors import LabError
from harness.findings import repro

KEPT = paths.EXPLORE_KEPT / "perf-mmap-second-mapping-charged--pinning-allowance.json"


def _keep(folder: Path, name: str, steps: int, why: str | None = "why", mlock: int = 9) -> None:
    doc: dict[str, Any] = {"path": "pinning", "check": "allowance",
                           "setup": {"mlock_pages": mlock, "rlimit_pages": 1, "who": "user"},
                           "steps": [{"op": "open", "args": ["dummy"], "id": k}
                                     for k in range(steps)]}
    if why is not None:
        doc["why"] = why
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(doc))


def test_the_shortest_kept_failure_of_the_issue_is_used(tmp_path: Path) -> None:
    _keep(tmp_path, "issue-a--long", 5, why="long")
    _keep(tmp_path, "issue-a--short", 2, why="short")
    _keep(tmp_path, "issue-ab--shorter", 1, why="another issue's")
    f = repro.kept_failure("issue-a", tmp_path)
    assert f is not None and f.why == "short" and len(f.steps) == 2


def test_no_kept_failure_is_none(tmp_path: Path) -> None:
    _keep(tmp_path, "other--x", 1)
    assert repro.kept_failure("issue-a", tmp_path) is None


def test_a_kept_failure_gets_the_facts_of_a_small_x86_guest(tmp_path: Path) -> None:
    _keep(tmp_path, "issue-a--x", 1, mlock=9)
    f = repro.kept_failure("issue-a", tmp_path)
    assert f is not None
    assert f.env == {"page_size": 4096, "ncpus": 1, "has_pmu": False, "tp_id": None,
                     "has_tp": False, "mlock_kb": 36, "has_snapshot": True, "has_subbuf": True}


def test_a_failure_kept_without_a_why_is_named_by_its_file(tmp_path: Path) -> None:
    _keep(tmp_path, "issue-a--x", 1, why=None)
    f = repro.kept_failure("issue-a", tmp_path)
    assert f is not None and f.why == "issue-a--x"


def test_a_real_kept_failure_writes_both_reproducers(tmp_path: Path) -> None:
    shutil.copy(KEPT, tmp_path / KEPT.name)
    f = repro.kept_failure("perf-mmap-second-mapping-charged", tmp_path)
    assert f is not None
    written = repro.write(tmp_path / "out", f)
    assert [p.name for p in written] == ["repro.py", "repro.c"]
    assert f.why.replace("*/", "* /") in (tmp_path / "out" / "repro.c").read_text()


def test_a_host_without_gcc_is_told_what_to_install(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(repro.shutil, "which", lambda name: None)
    with pytest.raises(LabError, match="gcc is not installed") as e:
        repro.build(tmp_path / "repro.c")
    assert "apt install gcc" in (e.value.hint or "")


def test_a_reproducer_that_does_not_build_says_the_first_errors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(repro.shutil, "which", lambda name: "/usr/bin/gcc")
    seen: list[list[str]] = []

    def gcc(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        seen.append(argv)
        return subprocess.CompletedProcess(argv, 1, "", "e1\ne2\ne3\ne4\n")
    monkeypatch.setattr(repro.subprocess, "run", gcc)
    src = tmp_path / "repro.c"
    with pytest.raises(LabError) as e:
        repro.build(src)
    assert e.value.message == f"the reproducer {src} does not build: e1; e2; e3"
    assert seen[0][:2] == ["/usr/bin/gcc", "-static"]
    assert seen[0][seen[0].index("-o") + 1] == str(tmp_path / "repro")


def test_a_built_reproducer_is_the_binary_beside_its_source(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(repro.shutil, "which", lambda name: "/usr/bin/gcc")
    monkeypatch.setattr(repro.subprocess, "run",
                        lambda argv, **kw: subprocess.CompletedProcess(argv, 0, "", ""))
    assert repro.build(tmp_path / "repro.c") == tmp_path / "repro"


def test_a_run_on_a_kernel_is_its_exit_status_and_every_line(tmp_path: Path) -> None:
    pushed: list[tuple[Path, str]] = []
    ran: list[tuple[str, float]] = []

    def run(cmd: str, timeout: float) -> SimpleNamespace:
        ran.append((cmd, timeout))
        return SimpleNamespace(stdout="ok 0 - open\nnot ok 1 - mmap\n", stderr="oops\n",
                               exit_status=1)
    g = SimpleNamespace(ssh=SimpleNamespace(push=lambda a, b: pushed.append((a, b))), run=run,
                        kernel=SimpleNamespace(release="7.2.13", description="Debian 7.2"))
    booted: list[tuple[str, Path]] = []

    @contextlib.contextmanager
    def boot(kernel: str, console_log: Path) -> Iterator[SimpleNamespace]:
        booted.append((kernel, console_log))
        yield g
    lab = SimpleNamespace(boot=boot)
    r = repro.run_on(lab, "sid", tmp_path / "repro", tmp_path / "console.log")  # type: ignore[arg-type]
    assert booted == [("sid", tmp_path / "console.log")]
    assert pushed == [(tmp_path / "repro", "/tmp/repro")]
    assert ran[0][0].endswith("/tmp/repro") and ran[0][1] == repro.RUN_S
    assert (r.kernel, r.release, r.described, r.exit_status) == ("sid", "7.2.13", "Debian 7.2", 1)
    assert r.output == ("ok 0 - open", "not ok 1 - mmap", "oops") and r.verdict == "FAIL"
