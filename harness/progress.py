"""Progress on screen for anything that takes more than a few seconds.

rich draws bars and spinners on a terminal; when stderr is not a terminal (CI, pytest capture)
the same calls log one line at the start and one at the end, with the elapsed time; so does
work in a background thread.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn,
                           TimeElapsedColumn, TransferSpeedColumn)

log = logging.getLogger("ringlab")


def _console() -> Console | None:
    """A terminal's console for the main thread; None elsewhere: work in a background thread
    (the rootfs made ahead) logs its start and end lines, as it would without a terminal,
    rather than draw a second spinner over the main thread's."""
    if not sys.stderr.isatty() or threading.current_thread() is not threading.main_thread():
        return None
    return Console(stderr=True)


@contextlib.contextmanager
def step(title: str) -> Iterator[Callable[[str], None]]:
    """A spinner for work of unknown length; yields a function that updates the status text."""
    start = time.monotonic()
    console = _console()
    log.info("%s ...", title)
    if console is None:
        yield lambda text: log.debug("%s: %s", title, text)
    else:
        with console.status(title) as status:
            yield lambda text: status.update(f"{title}: {text}")
    log.info("%s: done in %.1f s", title, time.monotonic() - start)


@contextlib.contextmanager
def transfer(title: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A byte-counting bar; yields a function to call with each chunk's size."""
    start = time.monotonic()
    console = _console()
    log.info("%s (%s bytes) ...", title, total if total is not None else "?")
    if console is None:
        yield lambda n: None
    else:
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                   DownloadColumn(), TransferSpeedColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task(title, total=total)
            yield lambda n: bar.advance(task, n)
    log.info("%s: done in %.1f s", title, time.monotonic() - start)
