"""The AUX bench: MB/s per mode; a skip or a wrong byte stops it."""
from __future__ import annotations

import pytest

from harness.bench import aux
from harness.errors import LabError


def answer(transport: float, verified: float, bad: int = 0) -> dict:
    return {"transport": {"bytes_per_s": transport, "bad_records": 0},
            "verified": {"bytes_per_s": verified, "bad_records": bad}}


def test_rates_are_megabytes_per_second_per_mode() -> None:
    got = aux.mb_per_s([answer(4e8, 1e8), answer(6e8, 3e8)])
    assert got["transport"]["median"] == 500.0 and got["verified"]["max"] == 300.0


def test_a_skip_or_a_wrong_record_is_an_error_not_a_figure() -> None:
    with pytest.raises(LabError, match="cannot run: no PMU"):
        aux.mb_per_s([{"skip": "no PMU"}])
    with pytest.raises(LabError, match="wrong in 3 records"):
        aux.mb_per_s([answer(1e8, 1e8, bad=3)])
