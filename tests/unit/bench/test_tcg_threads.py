"""`./lab bench tcg-threads` without a guest: a boot's figures and its console judged."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.bench import tcg_threads
from harness.errors import BootError

INTERLEAVE = {"windows_with_every_cpu": {"0.1": 0.1, "1.0": 0.2, "10.0": 0.9},
              "switches_per_s": 280.0, "longest_gap_ms": [14.0, 12.0]}


class _Guest:
    record = SimpleNamespace(ssh_ready_s=8.0)

    def probe(self, name: str, args: list[str], timeout: float) -> SimpleNamespace:
        assert name == "probe_interleave"
        return SimpleNamespace(data=INTERLEAVE)

    def run(self, command: str, timeout: float = 60) -> SimpleNamespace:
        out = "function nop" if "available_tracers" in command else "123"
        return SimpleNamespace(stdout=out, stderr="", exit_status=0, duration_s=3.0)


def _boot(console: str, fail: bool = False):
    @contextlib.contextmanager
    def boot(plan: object) -> Iterator[_Guest]:
        plan.console_log.write_text(console)  # type: ignore[attr-defined]
        if fail:
            raise BootError("the guest died: kernel panic")
        yield _Guest()
    return boot


def test_a_clean_boot_counts_its_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tcg_threads, "boot", _boot("[    1.0] booted\n"))
    found = tcg_threads.ModeRuns("single", "qemu64,-cx16")
    plan = SimpleNamespace(console_log=None)
    monkeypatch.setattr(tcg_threads.dataclasses, "replace", lambda p, **kw: SimpleNamespace(**kw))
    tcg_threads.one_boot(plan, found, 1, tmp_path / "c.log", 3.0)  # type: ignore[arg-type]
    assert found.clean == 1 and found.problems == []
    assert (found.windows_1ms, found.switches_per_s, found.longest_gap_ms) == ([0.2], [280.0],
                                                                             [14.0])
    assert "clean 1/1" in found.lines(1)[0] and "0.200/0.200/0.200" in found.lines(1)[0]


def test_an_oops_in_the_console_makes_the_boot_unclean(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    oops = ("[    9.1] Oops: int3: 0000 [#1] SMP NOPTI\n"
            "[    9.1] RIP: 0010:_raw_spin_lock_irqsave+0x1/0x40\n"
            "[    9.2] Kernel panic - not syncing: Fatal exception in interrupt\n")
    monkeypatch.setattr(tcg_threads, "boot", _boot(oops, fail=True))
    monkeypatch.setattr(tcg_threads.dataclasses, "replace", lambda p, **kw: SimpleNamespace(**kw))
    found = tcg_threads.ModeRuns("multi", "max")
    tcg_threads.one_boot(SimpleNamespace(), found, 1, tmp_path / "c.log", 3.0)  # type: ignore[arg-type]
    assert found.clean == 0
    assert any("the guest died" in p for p in found.problems)
    assert any("Oops: int3" in p for p in found.problems)
    assert "clean 0/1" in found.lines(1)[0] and "-" in found.lines(1)[0]
