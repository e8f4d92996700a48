"""tracefs for the probes: where it is mounted, its files, and tracing instances of our own.

tracefs is at /sys/kernel/tracing; with debugfs mounted it is also reachable at
/sys/kernel/debug/tracing (Documentation/trace/ftrace.rst), the only place on kernels and
setups older than tracefs's own mount point. An instance (instances/NAME) is a trace array with
its own per-CPU buffers: mkdir makes it, rmdir removes it (kernel/trace/trace.c
instance_mkdir()/instance_rmdir()). Stdlib only: this runs in the guest.
"""
from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Iterator, Set as AbstractSet
from contextlib import contextmanager, suppress
from typing import TypeVar

import probelib

ROOTS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
MOUNTS = "/proc/mounts"


def find_root() -> str | None:
    """The first of ROOTS where tracefs is mounted (it has a trace_marker), else None (also
    for a user who may not look inside: tracefs is root's, mode 700)."""
    for root in ROOTS:
        if os.path.exists(f"{root}/trace_marker"):
            return root
    return None


def root() -> str:
    """find_root(), or Skip: the kernel (or the guest) has no tracefs."""
    found = find_root()
    if found is None:
        raise probelib.Skip(f"no tracefs mounted at {' or '.join(ROOTS)}")
    return found


def path(relative: str) -> str:
    """`relative` under the mounted tracefs, or under ROOTS[0] when none is found (so what
    is missing is named where it usually is)."""
    return f"{find_root() or ROOTS[0]}/{relative}"


def read(relative: str) -> str | None:
    """The text of `relative` under the first of ROOTS that lets it be read; None if none
    does."""
    for root in ROOTS:
        try:
            return read_file(f"{root}/{relative}")
        except OSError:
            continue
    return None


def read_file(path: str) -> str:
    with open(path) as f:
        return f.read()


def cpu_stats(instance: str, cpu: int) -> dict[str, str]:
    """per_cpu/cpuN/stats of an instance (its path), parsed."""
    return parse_stats(read_file(f"{instance}/per_cpu/cpu{cpu}/stats"))


def parse_stats(text: str) -> dict[str, str]:
    """A per-CPU stats file as {name: value}: "entries", "overrun", "commit overrun",
    "dropped events", "read events", ... (as trace.c's tracing_stats_read() prints them)."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out


def write_file(path: str, value: str) -> str:
    """Write like `echo value > path`; 'ok' or the errno's name."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    except OSError as e:
        return probelib.errname(e)
    try:
        os.write(fd, value.encode())
        return "ok"
    except OSError as e:
        return probelib.errname(e)
    finally:
        os.close(fd)


def noexec(root: str, mounts: str = MOUNTS) -> bool:
    """Whether the mount at `root` has the noexec option (`mounts`: a mount table in the
    format of /proc/mounts)."""
    for line in read_file(mounts).splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[1] == root:
            return "noexec" in parts[3].split(",")
    return False


class Instance:
    """instances/NAME under `root`: create() makes it (a leftover of a killed run is removed
    first), remove() removes it."""

    def __init__(self, root: str, name: str) -> None:
        self.root, self.name = root, name
        self.path = f"{root}/instances/{name}"

    def create(self) -> None:
        with suppress(FileNotFoundError):
            os.rmdir(self.path)  # a leftover of a killed run
        os.mkdir(self.path)

    def remove(self) -> str:
        """'ok', or the errno's name (EBUSY while a buffer of it is mapped or open)."""
        try:
            os.rmdir(self.path)
            return "ok"
        except OSError as e:
            return probelib.errname(e)

    def set(self, name: str, value: str | int) -> str:
        return write_file(f"{self.path}/{name}", str(value))

    def own_fds(self) -> frozenset[int]:
        """The fds this object itself keeps open on the instance's files (and closes in
        remove()): release() leaves them to it."""
        return frozenset()

    def get(self, name: str) -> str:
        return read_file(f"{self.path}/{name}").strip()


def open_fds_under(path: str) -> dict[int, str]:
    """This process's open fds on files under path: {fd: the file}."""
    held = {}
    for fd in os.listdir("/proc/self/fd"):
        with suppress(OSError):  # the fd listdir itself used, closed since
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(path + "/"):
                held[int(fd)] = target
    return held


def mappings_under(path: str) -> list[tuple[int, int]]:
    """This process's mappings of files under path: (start, end) of each VMA."""
    spans = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].rstrip("\n").startswith(path + "/"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                spans.append((lo, hi))
    return spans


def release(path: str, keep: AbstractSet[int] = frozenset()) -> None:
    """Unmap and close all this process holds of files under path. For a probe that raised
    with an instance's buffer mapped or open: the frames being unwound still hold them, and
    rmdir of the instance is EBUSY until they go, which left the instance behind for the next
    test (a guest changed, so replaced)."""
    for lo, hi in mappings_under(path):
        probelib.libc.munmap(ctypes.c_void_p(lo), hi - lo)
    for fd in set(open_fds_under(path)) - set(keep):
        with suppress(OSError):
            os.close(fd)


InstanceT = TypeVar("InstanceT", bound=Instance)


@contextmanager
def instance(name: str, make: Callable[[str, str], InstanceT]) -> Iterator[InstanceT]:
    """An instance NAME, made by make(root, name) (Instance or a subclass of it), under the
    mounted tracefs (Skip if there is none): created for the duration, removed after."""
    inst = make(root(), name)
    inst.create()
    try:
        yield inst
    except BaseException:
        # so that the instance can go (below) and the guest is as it was
        release(inst.path, inst.own_fds())
        raise
    finally:
        inst.remove()
