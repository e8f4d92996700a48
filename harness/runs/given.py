"""What `./lab run` hands its pytest plugin in its own process (pytest.main's `plugins`)."""
from __future__ import annotations

from dataclasses import dataclass

from harness.resources import Lab


@dataclass(frozen=True)
class Given:
    """The Lab that prepared the kernel: the serial run's guests come from it, not from a
    second Lab that would look the kernel up again. xdist workers are other processes: they
    make their own from the request."""
    lab: Lab
