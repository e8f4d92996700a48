"""harness/progress.py: progress for long work. Off a terminal (CI, pytest capture) the same
calls log one line at the start and one at the end; on one, rich draws, and the caller's
update functions reach the status/bar, from the main thread only. A step that fails does not
claim it was done."""
from __future__ import annotations

import io
import logging
import threading

import pytest
from rich.console import Console

from harness import progress


@pytest.fixture
def no_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "_console", lambda: None)


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ringlab"]


def test_a_step_off_a_terminal_logs_its_start_updates_and_end(
        no_terminal: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="ringlab")
    with progress.step("building rootfs") as update:
        update("debootstrap")
    said = _messages(caplog)
    assert said[:2] == ["building rootfs ...", "building rootfs: debootstrap"]
    assert said[2].startswith("building rootfs: done in ") and said[2].endswith(" s")
    assert len(said) == 3


def test_a_failed_step_does_not_say_done(no_terminal: None,
                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="ringlab")
    with pytest.raises(RuntimeError), progress.step("unpacking"):
        raise RuntimeError("broken")
    assert not any("done in" in m for m in _messages(caplog))


def test_a_transfer_says_its_size_or_that_it_is_unknown(
        no_terminal: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ringlab")
    with progress.transfer("kernel.deb", 1234) as advance:
        advance(1000)
    with progress.transfer("Packages.xz", None):
        pass
    said = _messages(caplog)
    assert "kernel.deb (1234 bytes) ..." in said and "Packages.xz (? bytes) ..." in said
    assert sum(m.endswith(" s") and ": done in " in m for m in said) == 2


def test_on_a_terminal_the_status_shows_the_update(monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=80)
    monkeypatch.setattr(progress, "_console", lambda: console)
    shown: list[object] = []
    real = console.status

    def status(title: str) -> object:
        s = real(title)
        shown.append(s)
        return s
    monkeypatch.setattr(console, "status", status)
    caplog.set_level(logging.DEBUG, logger="ringlab")
    with progress.step("booting") as update:
        update("waiting for sshd")
        assert str(shown[0].status) == "booting: waiting for sshd"  # type: ignore[attr-defined]
    assert "booting: waiting for sshd" not in _messages(caplog)  # the screen's, not the log's
    assert _messages(caplog)[-1].startswith("booting: done in ")


def test_on_a_terminal_a_transfer_advances_its_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=80)
    monkeypatch.setattr(progress, "_console", lambda: console)
    seen = []
    real = progress.Progress.advance

    def advance(self: progress.Progress, task: object, n: float) -> None:
        real(self, task, n)  # type: ignore[arg-type]
        seen.append(self.tasks[0].completed)
    monkeypatch.setattr(progress.Progress, "advance", advance)
    with progress.transfer("x.deb", 10) as step:
        step(4)
        step(6)
    assert seen == [4, 10]


def test_only_the_main_thread_draws_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rootfs made ahead in a thread logs its lines instead of drawing a spinner over the
    main thread's (two rich displays on one terminal line garble each other)."""
    monkeypatch.setattr(progress.sys, "stderr", type("Tty", (io.StringIO,), {
        "isatty": lambda self: True})())
    assert progress._console() is not None
    seen: list[object] = []
    t = threading.Thread(target=lambda: seen.append(progress._console()))
    t.start()
    t.join()
    assert seen == [None]
