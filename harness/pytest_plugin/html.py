"""The HTML plugin: report.html's title and environment table (pytest-html's metadata).
Registered only when pytest-metadata is importable: without pytest-html there is no HTML
report to fill."""
from __future__ import annotations

import os
from typing import Any

import pytest

from harness.guest.guest import Guest
from harness.pytest_plugin.context import RunContext
from harness.pytest_plugin.guests import Watch


class Html:
    def __init__(self, ctx: RunContext, config: pytest.Config, metadata_key: Any) -> None:
        self.ctx = ctx
        self.config = config
        self.metadata_key = metadata_key

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_report_title(self, report: Any) -> None:
        report.title = f"ringlab: {self.ctx.kernel_name}"

    def note_boot(self, g: Guest, watch: Watch) -> None:
        """The run's facts (some known only once a guest is up) for report.html's environment
        table; set per test, cheap, so a replacement guest updates them too."""
        meta = self.config.stash.get(self.metadata_key, None)
        if meta is None:
            return
        k = g.kernel
        meta.update({"lab.yaml": str(self.ctx.lab_config.path), "lab commit": self.ctx.commit,
                     "host": os.uname().nodename, "host kernel": os.uname().release,
                     "kernel release": k.release, "kernel": k.description,
                     **({"kernel commit": k.commit} if k.commit else {}),
                     **({"series": ", ".join(k.series)} if k.series else {}),
                     **({"kernel config": str(k.config)} if k.config else {}),
                     "accel": f"{g.plan.accel} ({g.plan.cpus} cpu, {g.plan.memory_mb} MB)"})


def metadata_key() -> Any:
    """pytest-metadata's stash key, or None when it is not installed."""
    try:
        from pytest_metadata.plugin import metadata_key as key
    except ImportError:
        return None
    return key
