"""harness/runs/given.py: what `./lab run` hands its plugin in-process. The Lab travels as it
is (the same object, never a copy that would look the kernel up again), and the record is
frozen so no plugin can swap it for another."""
from __future__ import annotations

import dataclasses

import pytest

from harness.runs.given import Given


class _Lab:
    """Stands for harness.resources.Lab: only its identity matters here."""


def test_the_given_lab_is_the_same_object_not_a_copy() -> None:
    lab = _Lab()
    assert Given(lab).lab is lab  # type: ignore[arg-type]


def test_a_given_cannot_be_pointed_at_another_lab() -> None:
    g = Given(_Lab())  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.lab = _Lab()  # type: ignore[misc]
