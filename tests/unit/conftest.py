"""Unit-tier fixtures."""
from __future__ import annotations

import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def temp_dir_of_the_tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Python's temp dir for the whole tier is one of pytest's: whatever a test makes with
    tempfile (a guest's folder from guest.boot() with fake guests never stopped, say) stays out
    of the host's /tmp, and a sweep or `./lab gc` a test runs judges only the tier's folders,
    never the guest folders of a lab running on this host."""
    path = tmp_path_factory.mktemp("tempdir")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(tempfile, "tempdir", str(path))
        yield path


@pytest.fixture(autouse=True)
def output_as_off_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pytest run under test prints the same wherever the tier runs: with CI or BUILD_NUMBER
    set, pytest writes each failure's whole message into the short summary too, and a test
    counting a phrase in the output would count it twice (stop 39's CI failure)."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)


@pytest.fixture(autouse=True)
def signal_handlers_restored() -> Iterator[None]:
    """A test that runs cli.main() leaves SIGTERM raising KeyboardInterrupt (what a real
    `./lab` wants); the next test must get the handlers it started with, or a child it forks
    and kills with SIGTERM reports an exception instead of the signal."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)
