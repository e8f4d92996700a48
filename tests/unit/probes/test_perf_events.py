"""probes/perf_events.py on the host: the lost-record sum, the test PMU's type, the
tracepoint's id (through tracefs), the allowance's mapping sizes."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

import perf_abi as perf  # from probes/ (pytest's pythonpath): guest-side, stdlib only
import perf_events
import probelib
import tracefs
from perf_buffer import Record


def record(rtype: int, *words: int) -> Record:
    payload = struct.pack(f"<{len(words)}Q", *words)
    return Record(rtype, 0, 8 + len(payload), payload, 0, False)


def test_lost_count_sums_the_lost_records_only() -> None:
    records = [record(perf.PERF_RECORD_SAMPLE, 1, 99), record(perf.PERF_RECORD_LOST, 7, 3),
               record(perf.PERF_RECORD_LOST, 7, 40), record(perf.PERF_RECORD_LOST_SAMPLES, 5)]
    assert perf_events.lost_count(records) == 43
    assert perf_events.lost_count([]) == 0


def test_test_pmu_type_is_read_from_sysfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    monkeypatch.setattr(perf_events, "PMU_DEVICES", str(tmp_path))
    (tmp_path / "ringlab_aux").mkdir()
    (tmp_path / "ringlab_aux" / "type").write_text("42\n")
    assert perf_events.test_pmu_type("ringlab_aux") == 42


def test_a_test_pmu_not_loaded_skips_naming_its_module(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(perf_events, "PMU_DEVICES", str(tmp_path))
    with pytest.raises(probelib.Skip) as e:
        perf_events.test_pmu_type("ringlab_inpage")
    assert str(e.value) == (f"the test PMU ringlab_inpage is not loaded (kernels/modules/"
                            f"ringlab_inpage): {tmp_path}/ringlab_inpage/type: No such file "
                            f"or directory")


def test_tracepoint_id_from_either_tracefs_place(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    tracing, debug = tmp_path / "tracing", tmp_path / "debug"
    monkeypatch.setattr(tracefs, "ROOTS", (str(tracing), str(debug)))
    with pytest.raises(probelib.Skip) as e:
        perf_events.tracepoint_id()
    assert str(e.value) == (f"kernel has no tracepoint syscalls/sys_enter_getppid under "
                            f"{tracing} or {debug}")
    event = debug / "events" / "syscalls" / "sys_enter_getppid"
    event.mkdir(parents=True)
    (event / "id").write_text("512\n")
    assert perf_events.tracepoint_id() == 512


@pytest.mark.parametrize("pages", [0, 1, 2, 3, 17, 129, 516])
def test_allowance_sizes_map_exactly_the_pages(pages: int) -> None:
    sizes = perf_events.allowance_sizes(pages)
    assert sum(sizes) == pages and sizes == sorted(sizes, reverse=True)
    assert all(s == 1 or (s - 1) & (s - 2) == 0 for s in sizes)  # 1 + 2^n pages each
