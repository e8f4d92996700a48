"""What the lab adds to a pytest report: one `report.ringlab` record, and the events a worker
sends the controller on it.

The record is kept on the report as a plain dict (dataclasses.asdict), because under
pytest-xdist a report crosses processes through pytest's own serialisation
(`_report_to_json`), which copies `report.__dict__` and carries JSON-able values as they are.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import pytest

# The record's fields a test's entry in results.jsonl and summary.json keeps when set.
ENTRY_FIELDS = ("splats", "taint", "not_seen", "replaced", "also", "broke")


@dataclass
class Record:
    """What the guest said about one phase of a test, and what the lab decided on it."""
    splats: list[dict] = field(default_factory=list)    # kernel splats, as dicts (decoded)
    taint: list[int] = field(default_factory=list)      # [before, after] if the mask changed
    not_seen: list[str] = field(default_factory=list)   # known issues that did not show
    replaced: str = ""                                  # why the guest was replaced after it
    also: list[str] = field(default_factory=list)       # failures besides the first
    broke: list[str] = field(default_factory=list)      # [cause, what]: the guest broke
    events: list[dict] = field(default_factory=list)    # what the run learnt (see Outbox)

    def entry_fields(self) -> dict[str, object]:
        """The fields a test's result entry keeps: only those set."""
        return {k: v for k, v in asdict(self).items() if k in ENTRY_FIELDS and v}


def of(report: pytest.TestReport) -> Record:
    """The record of a report (an empty one if the lab added none), also after the report
    crossed from an xdist worker as JSON."""
    data = getattr(report, "ringlab", None) or {}
    names = {f.name for f in fields(Record)}
    return Record(**{k: v for k, v in data.items() if k in names})


def save(report: pytest.TestReport, record: Record) -> None:
    """Put the record on the report as plain data, so it survives serialisation."""
    setattr(report, "ringlab", asdict(record))  # an attribute of our own, as pytest allows


class Outbox:
    """What a process learnt about the run (boots, the kernel, facts, splats between tests,
    failed boots), sent on its next test report. Under pytest-xdist only the controller writes
    the run's files, so a worker's knowledge travels this way; a serial run takes the same
    path within one process."""

    def __init__(self) -> None:
        self._events: list[dict] = []

    def emit(self, kind: str, **data: object) -> None:
        self._events.append({"kind": kind, **data})

    def take(self) -> list[dict]:
        """Every event not yet taken, in order."""
        events, self._events = self._events, []
        return events
