"""Processes that must not outlive the lab: PR_SET_PDEATHSIG (prctl(2)), for QEMU, a nightly
cell's child run and each pytest-xdist worker. A lab killed with SIGKILL runs no cleanup of its
own; the kernel then signals these children for it."""
from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int) -> None:
    """Have the kernel send `sig` to this process when the thread that made it exits. For a
    child between fork and exec (subprocess's preexec_fn)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)


def die_with_parent_now(sig: int, parent: int) -> None:
    """die_with_parent() for a process already running (a pytest-xdist worker) whose parent
    should be `parent`: if that one went before the request was made (this process then has
    another parent), `sig` now."""
    die_with_parent(sig)
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def kill_with_parent() -> None:
    """preexec_fn: SIGKILL when the parent goes (QEMU: nothing of it is worth keeping)."""
    die_with_parent(signal.SIGKILL)


def stop_with_parent() -> None:
    """preexec_fn: SIGTERM when the parent goes (a child ./lab run: its Ctrl-C path, which
    stops its guests)."""
    die_with_parent(signal.SIGTERM)
