"""The charging rule of perf_mmap() (kernel/events/core.c), as a model the pinning tests replay
their scripts through (tests/kernel/test_pinning.py; unit tested in tests/unit)."""
from __future__ import annotations

from dataclasses import dataclass, field

EXEMPT = ("root", "user+ipc_lock")   # capable(CAP_IPC_LOCK)


@dataclass
class ChargeModel:
    ncpus: int
    page_kb: int
    mlock_kb: int
    rlimit_kb: int
    paranoid: int
    who: str = "root"
    locked: dict[str, int] = field(default_factory=lambda: {"root": 0, "lab": 0})
    pinned: int = 0
    maps: list[tuple[str, int, int] | None] = field(default_factory=list)
    aux: dict[int, tuple[int, int]] = field(default_factory=dict)  # map: (locked, extra)
    fd_open: list[bool] = field(default_factory=list)

    @property
    def user(self) -> str:
        return "root" if self.who == "root" else "lab"

    def charge(self, pages: int, pinned: int) -> tuple[str, int]:
        """(errno or 'ok', pages going to pinned_vm) for a mapping of `pages`."""
        limit = self.mlock_kb // self.page_kb * self.ncpus
        user_locked = min(self.locked[self.user], limit) + pages
        extra = max(0, user_locked - limit)
        exempt = self.who in EXEMPT or self.paranoid < 0
        if pinned + extra > self.rlimit_kb // self.page_kb and not exempt:
            return "EPERM", 0
        return "ok", extra

    def step(self, op: str) -> str:
        name, _, arg = op.partition("=")
        if name == "mlock":
            self.mlock_kb = int(arg)
        elif name == "rlimit":
            self.rlimit_kb = int(arg)
        elif name == "as":
            self.who = arg
        elif name in ("map", "pmu-map"):
            pages = int(arg)
            data = pages - 1
            if data & (data - 1):   # perf_mmap(): 1 + 2^n pages, else EINVAL
                self.maps.append(None)
                self.fd_open.append(False)
                return "EINVAL"
            result, extra = self.charge(pages, self.pinned)
            if result != "ok":
                self.maps.append(None)
                self.fd_open.append(False)
                return result
            self.locked[self.user] += pages - extra
            self.pinned += extra
            self.maps.append((self.user, pages - extra, extra))
            self.fd_open.append(True)
        elif name == "unmap":
            m = self.maps[int(arg)]
            if m is None:
                return "not mapped"
            user, locked, extra = m
            # perf_mmap_close(): the AUX area's charge goes back to rb->mmap_user, the user
            # who mapped the data buffer, and to this mm's pinned_vm.
            aux_locked, aux_extra = self.aux.pop(int(arg), (0, 0))
            self.locked[user] -= locked + aux_locked
            self.pinned -= extra + aux_extra
            self.maps[int(arg)] = None
        elif name == "close":
            self.fd_open[int(arg)] = False
        elif name == "aux":
            index, _, pages = arg.partition(":")
            if self.maps[int(index)] is None:
                return "not mapped"
            n = int(pages)
            if n & (n - 1):
                return "EINVAL"
            result, _ = self.charge(n, self.pinned)
            # A software event has no AUX support: rb_alloc_aux() -> EOPNOTSUPP, nothing
            # charged (the charge is only made when the allocation succeeded).
            return "EPERM" if result == "EPERM" else "EOPNOTSUPP"
        elif name in ("pmu-aux", "pmu-aux-split"):  # a split changes no charge
            return self.map_aux(*(int(x) for x in arg.split(":")))
        elif name in ("remap", "pmu-aux-again"):
            # perf_mmap(): a buffer (or AUX area) already mapped is only referenced again
            # (rb->mmap_count, rb->aux_mmap_count): the buffer is charged once, by its first
            # mapping, and perf_mmap_close() gives it back once, at the last munmap.
            i = int(arg)
            mapped = self.maps[i] is not None and (name == "remap" or i in self.aux)
            return "ok" if mapped else "not mapped"
        elif name == "fork-map":
            result, _ = self.charge(int(arg), 0)  # a new process: its own pinned_vm
            return result
        return "ok"

    def map_aux(self, index: int, pages: int) -> str:
        """An AUX area on a PMU that has one (the test PMU), on a map without one yet: the
        same charge as a data buffer of `pages` (perf_mmap(): user_extra = nr_pages, then
        `accounting:`), refused with nothing charged."""
        if self.maps[index] is None:
            return "not mapped"
        if pages & (pages - 1):
            return "EINVAL"
        result, extra = self.charge(pages, self.pinned)
        if result != "ok":
            return result
        self.locked[self.user] += pages - extra
        self.pinned += extra
        self.aux[index] = (pages - extra, extra)
        return "ok"
