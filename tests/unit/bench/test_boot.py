"""The boot bench's targets per arch and its rows."""
from __future__ import annotations

from harness import arch as arches
from harness.bench import boot, report


def test_each_arch_has_its_own_ssh_target_and_the_lab_s_others() -> None:
    for a in arches.ARCHES.values():
        goals = boot.targets(a)
        assert goals["ssh_ready_s"] == a.ssh_ready_target_s
        assert goals["probe_round_trip_ms"] == boot.TARGETS["probe_round_trip_ms"]


def test_a_row_prints_its_label_unit_and_verdict() -> None:
    row = boot.Row(report.stats([0.8, 1.2, 1.0]), "restore 1 cpu: QEMU start -> SSH ready",
                   "s", boot.RESTORE_TARGET_S)
    assert row.line().startswith("restore 1 cpu") and row.line().endswith("met")
    assert "target" not in boot.Row(report.stats([5.0]), "x", "ms").line()
