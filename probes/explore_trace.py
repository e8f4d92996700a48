"""The trace-mmap path for probe_explore.py: a tracing instance's per-CPU ring buffers mapped
into user space (include/uapi/linux/trace_mmap.h), with the writes that must be refused while
they are mapped.

TraceModel is pure (unit tested on the host); TraceWorld makes the calls, as root, in a fresh
instance per sequence, pinned to CPU 0 (so trace_marker writes land in CPU 0's buffer). The
rules, from kernel/trace/ring_buffer.c (ring_buffer_map(), __rb_map_vma(), ring_buffer_resize(),
ring_buffer_subbuf_order_set(), ring_buffer_map_get_reader()) and kernel/trace/trace.c,
trace_snapshot.c (tracing_buffers_mmap(), tracing_buffers_may_split(),
tracing_arm_snapshot_locked()):
- a mapping is read-only, shared, never executable: PROT_WRITE on an O_RDONLY fd is the VFS's
  EACCES, on an O_RDWR fd or a private mapping the driver's EPERM; PROT_EXEC and MAP_PRIVATE:
  EPERM; VM_MAYWRITE is cleared, so mprotect(PROT_WRITE) later is EACCES (whatever the fd);
- a mapping is at most the meta page and every sub-buffer (one sub-buffer more: EINVAL) and
  starts on a sub-buffer boundary (pgoff 1 with sub-buffers of more than a page: EINVAL);
- no split (munmap of a part, mremap shrink: EINVAL), no growth (mremap grow: EFAULT,
  VM_DONTEXPAND), no MREMAP_DONTUNMAP (EINVAL); a move keeps the mapping;
- an ioctl other than GET_READER (and 0, the wake-up): ENOTTY (trace_mmap.h has no other);
- while any CPU buffer of the instance is mapped: buffer_size_kb EBUSY, a new
  buffer_subbuf_size_kb EBUSY (the same size: nothing to do, 0), a snapshot (echo 1 >
  snapshot) EBUSY; after the last munmap all of them work again;
- TRACE_MMAP_IOCTL_GET_READER: ENODEV on a CPU not mapped, else 0; after it the meta page's
  `entries` counts every event written to that CPU, and `subbuf_size` is the one in use;
- a mapping is VM_DONTCOPY: a child of fork() has it only after MADV_DOFORK (which 7.x
  refuses);
- at the end, with everything unmapped and closed: the buffer resizes and the instance is
  removed (rmdir), and no splat.
Stdlib only.
"""
from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import random
from contextlib import contextmanager
from collections.abc import Iterator
from dataclasses import dataclass, field

BUFFER_KB = (8, 32, 128)
SUBBUF_KB = (4, 8)
WRITES = (1, 10, 60)
MREMAPS = ("move", "move", "grow", "shrink", "dontunmap")
MARKER = b"ringlab\n"


def ref_id(a: object) -> int | None:
    """The step id an "@ID" argument names."""
    return int(a[1:]) if isinstance(a, str) and a.startswith("@") else None


@dataclass
class TraceVma:
    fd: int
    cpu: int
    whole: bool               # meta page and every sub-buffer, or the meta page only
    has_meta: bool = True     # from pgoff 0 (not "off": the first sub-buffer only)
    live: bool = True
    copies_on_fork: bool = False


@dataclass
class TraceModel:
    path: str
    setup: dict
    fds: dict[int, int] = field(default_factory=dict)          # id: cpu
    writable_fds: set[int] = field(default_factory=set)        # opened O_RDWR
    vmas: dict[int, TraceVma] = field(default_factory=dict)
    buffer_kb: int = 0
    subbuf_kb: int = 0
    written: int | None = 0   # events written to CPU 0 since the instance began; None: unknown
    meta_fresh: bool = False  # a GET_READER on CPU 0 was the last step
    traits: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.buffer_kb = self.setup["buffer_kb"]
        self.subbuf_kb = self.setup["subbuf_kb"]

    def mapped(self, cpu: int | None = None) -> int:
        return sum(v.live and (cpu is None or v.cpu == cpu) for v in self.vmas.values())

    def vma(self, step: dict) -> TraceVma | None:
        i = ref_id(step["args"][0])
        v = self.vmas.get(i) if i is not None else None
        return v if v is not None and v.live else None

    def valid(self, step: dict) -> bool:
        op = step["op"]
        if op in ("open", "fork", "write", "resize", "subbuf", "snapshot"):
            return (op != "snapshot" or self.setup.get("has_snapshot", False)) and \
                (op != "subbuf" or self.setup.get("has_subbuf", False))
        if op in ("close", "mmap", "get-reader", "ioctl"):
            return ref_id(step["args"][0]) in self.fds
        v = self.vma(step)
        if op == "munmap-part" or op == "mremap" and step["args"][1] == "shrink":
            return v is not None and v.whole
        return v is not None

    def expect(self, step: dict) -> frozenset[str]:
        op, args = step["op"], step["args"]
        busy = self.mapped() > 0
        if op == "mmap":
            prot, share = args[2], args[3]
            if prot == "rw" and share == "shared" and ref_id(args[0]) not in self.writable_fds:
                return frozenset({"EACCES"})
            if share != "shared" or prot != "r":
                return frozenset({"EPERM"})
            if args[1] == "past":
                return frozenset({"EINVAL"})
            if args[1] == "off" and self.subbuf_kb * 1024 > self.setup.get("page_size", 4096):
                return frozenset({"EINVAL"})
            return frozenset({"ok"})
        if op == "mprotect":
            return frozenset({"EACCES"})
        if op == "ioctl":
            return frozenset({"ENOTTY"})
        if op == "munmap-part":
            return frozenset({"EINVAL"})
        if op == "mremap":
            # a move: ok (EINVAL where the kernel refuses moving a VM_IO mapping)
            return frozenset({"move": {"ok", "EINVAL"}, "grow": {"EFAULT"},
                              "shrink": {"EINVAL"}, "dontunmap": {"EINVAL"}}[args[1]])
        if op == "madvise":
            # MADV_DOFORK: refused on VM_IO/VM_PFNMAP (7.x), let through on 6.12
            return frozenset({"ok", "EINVAL"})
        if op == "fork":
            n = sum(v.live and v.copies_on_fork for v in self.vmas.values())
            return frozenset({f"inherits {n}" if n else "ok"})
        if op == "get-reader":
            return frozenset({"ok" if self.mapped(self.fds[int(args[0][1:])]) else "ENODEV"})
        if op == "resize":
            return frozenset({"EBUSY" if busy else "ok"})
        if op == "subbuf":
            return frozenset({"ok" if args[0] == self.subbuf_kb or not busy else "EBUSY"})
        if op == "snapshot":
            return frozenset({"EBUSY" if busy and args[0] == 1 else "ok"})
        return frozenset({"ok"})

    def apply(self, step: dict, result: str) -> None:
        op, args, sid = step["op"], step["args"], step["id"]
        self.meta_fresh = False
        if result != "ok" and not result.startswith("inherits "):   # a fork's child said so
            return
        if op == "open":
            self.fds[sid] = args[0]
            if args[1:] == ["rw"]:
                self.writable_fds.add(sid)
        elif op == "close":
            del self.fds[int(args[0][1:])]
            if self.mapped():
                self.traits.add("closed-while-mapped")
        elif op == "mmap":
            if self.mapped(self.fds[int(args[0][1:])]):
                self.traits.add("mapped-again")
            self.vmas[sid] = TraceVma(int(args[0][1:]), self.fds[int(args[0][1:])],
                                      args[1] == "all", has_meta=args[1] != "off")
        elif op == "munmap":
            self.vmas[int(args[0][1:])].live = False
        elif op == "mremap" and args[1] == "move":
            self.traits.add("moved")
        elif op == "madvise":
            v = self.vma(step)
            assert v is not None
            v.copies_on_fork = True
        elif op == "fork" and any(v.live and v.copies_on_fork for v in self.vmas.values()):
            self.traits.add("fork-inherits-a-mapping")
        elif op == "get-reader":
            self.meta_fresh = self.fds[int(args[0][1:])] == 0
        elif op == "write" and self.written is not None:
            self.written += args[0]
        elif op in ("resize", "subbuf", "snapshot"):
            # A new size reallocates the buffers, a snapshot swaps them: what CPU 0 counted
            # is no longer known here.
            if op == "resize" and args[0] != self.buffer_kb or op == "subbuf" and \
                    args[0] != self.subbuf_kb or op == "snapshot" and args[0] == 1:
                self.written = None
            if op == "resize":
                self.buffer_kb = args[0]
            if op == "subbuf":
                self.subbuf_kb = args[0]

    def observe(self) -> dict:
        """For a live mapping of CPU 0: the sub-buffer size in use; right after GET_READER,
        every event written."""
        live = [s for s, v in sorted(self.vmas.items()) if v.live and v.cpu == 0 and v.has_meta]
        if not live:
            return {}
        want: dict = {"subbuf_size": self.subbuf_kb * 1024}
        if self.meta_fresh and self.written is not None:
            want["entries"] = self.written
        return {f"meta@{live[0]}": want}

    def release(self) -> None:
        for v in self.vmas.values():
            v.live = False
        self.fds.clear()

    def end(self) -> dict:
        return {"resize": "ok", "rmdir": "ok"}

    def choose(self, rng: random.Random, sid: int) -> dict | None:
        cpus = [c for c in (0, 1) if c < self.setup["ncpus"]]
        options: list[tuple[float, dict]] = [
            (3 if len(self.fds) < 2 else 0.5,
             {"op": "open", "args": [rng.choice(cpus)] + (["rw"] if rng.random() < 0.3 else [])}),
            (2, {"op": "write", "args": [rng.choice(WRITES)]}),
            (1, {"op": "resize", "args": [rng.choice(BUFFER_KB)]}),
            (0.7, {"op": "subbuf", "args": [rng.choice(SUBBUF_KB)]}),
            (0.7, {"op": "snapshot", "args": [rng.choice((1, 0))]})]
        for s in self.fds:
            prot = rng.choice(("rw", "rx")) if rng.random() < 0.15 else "r"
            share = "private" if rng.random() < 0.1 else "shared"
            what = rng.choice(("past", "off")) if rng.random() < 0.15 else \
                rng.choice(("all", "meta"))
            options.append((4, {"op": "mmap", "args": [f"@{s}", what, prot, share]}))
            options.append((0.7, {"op": "close", "args": [f"@{s}"]}))
            options.append((2, {"op": "get-reader", "args": [f"@{s}"]}))
            options.append((0.2, {"op": "ioctl", "args": [f"@{s}"]}))
        for s, v in self.vmas.items():
            if v.live:
                options.append((3, {"op": "munmap", "args": [f"@{s}"]}))
                options.append((0.5, {"op": "madvise", "args": [f"@{s}", "dofork"]}))
                options.append((0.4, {"op": "mremap", "args": [f"@{s}", rng.choice(MREMAPS)]}))
                options.append((0.3, {"op": "mprotect", "args": [f"@{s}"]}))
                if v.whole:
                    options.append((0.3, {"op": "munmap-part", "args": [f"@{s}"]}))
        if self.mapped():
            options.append((0.6, {"op": "fork", "args": []}))
        options = [(w, o) for w, o in options if self.valid(o)]
        pick = rng.random() * sum(w for w, _ in options)
        for w, o in options:
            pick -= w
            if pick <= 0:
                return o
        return options[-1][1]


# --- the calls --------------------------------------------------------------------------------

MADV_DOFORK = 11
UNKNOWN_IOCTL = 0x5221      # _IO('R', 0x21): GET_READER's neighbour, which no kernel defines


class TraceWorld:
    """The calls of TraceModel's operations, as root, in the sequence's own instance."""

    @staticmethod
    def model(path: str, setup: dict) -> TraceModel:
        return TraceModel(path, setup)

    @staticmethod
    def traits(path: str, setup: dict, steps: list[dict]) -> set[str]:
        model = TraceModel(path, setup)
        for step in steps:
            if model.valid(step):
                allowed = model.expect(step)
                model.apply(step, "ok" if "ok" in allowed else min(allowed))
        return model.traits

    @staticmethod
    def simpler(step: dict) -> list[dict]:
        """Simpler forms of a step for the shrinker: the meta page only, fewer writes, an
        O_RDONLY fd."""
        op, a = step["op"], step.get("args", [])
        if op == "mmap" and a[1] != "meta":
            return [{"args": [a[0], "meta", a[2], a[3]]}]
        if op == "open" and a[1:]:
            return [{"args": a[:1]}]
        if op == "write" and a[0] > 1:
            return [{"args": [n]} for n in (1, 10) if n < a[0]]
        return []

    @staticmethod
    def missing(path: str) -> str | None:
        import tracefs
        root = tracefs.find_root()
        if root is None:
            return "no tracefs mounted (CONFIG_TRACING)"
        if not os.path.isdir(f"{root}/instances"):
            return f"{root} has no instances/"
        return None

    @staticmethod
    def setup(path: str, rng: random.Random) -> dict:
        return {"buffer_kb": rng.choice(BUFFER_KB), "subbuf_kb": rng.choice(SUBBUF_KB)}

    @staticmethod
    @contextmanager
    def session(path: str) -> Iterator[None]:
        yield

    @staticmethod
    @contextmanager
    def prepared(path: str, setup: dict) -> Iterator[dict]:
        """A fresh instance with the sequence's buffer and sub-buffer sizes; removed after
        (unless the sequence's own end check removed it, or could not)."""
        import tracefs
        root = tracefs.find_root()
        name = f"ringlab-x-{os.getpid()}-{random.getrandbits(32):08x}"
        inst = f"{root}/instances/{name}"
        os.mkdir(inst)
        try:
            _write(f"{inst}/buffer_size_kb", setup["buffer_kb"])
            sub = f"{inst}/buffer_subbuf_size_kb"
            if os.path.exists(sub):
                _write(sub, setup["subbuf_kb"])
            yield {"instance": inst, "ncpus": os.sysconf("SC_NPROCESSORS_ONLN"),
                   "page_size": os.sysconf("SC_PAGE_SIZE"),
                   "has_snapshot": os.path.exists(f"{inst}/snapshot"),
                   "has_subbuf": os.path.exists(sub)}
        finally:
            if os.path.isdir(inst):
                try:
                    os.rmdir(inst)
                except OSError:
                    pass    # the sequence's end check failed on it; the instance stays

    def __init__(self, path: str, setup: dict, uid: int) -> None:
        self.cfg, self.inst = setup, setup["instance"]
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.fds: dict[int, int] = {}
        self.vmas: dict[int, tuple[int, int]] = {}
        self.stray: list[tuple[int, int]] = []
        os.sched_setaffinity(0, {0})

    def do(self, step: dict) -> str:
        import probelib
        try:
            return getattr(self, "op_" + step["op"].replace("-", "_"))(step["id"], *step["args"])
        except OSError as e:
            return probelib.errname(e)

    def _fd(self, a: str) -> int:
        return self.fds[int(a[1:])]

    def op_open(self, sid: int, cpu: int, mode: str = "r") -> str:
        self.fds[sid] = os.open(f"{self.inst}/per_cpu/cpu{cpu}/trace_pipe_raw",
                                (os.O_RDWR if mode == "rw" else os.O_RDONLY) | os.O_NONBLOCK)
        return "ok"

    def op_close(self, sid: int, f: str) -> str:
        os.close(self.fds.pop(int(f[1:])))
        return "ok"

    def _mmap(self, fd: int, length: int, prot: int, flags: int, offset: int = 0) -> int:
        from probelib import libc, libc_error, mapped
        addr = libc.mmap(None, length, prot, flags, fd, offset)
        if not mapped(addr):
            raise libc_error()
        return addr

    def op_mmap(self, sid: int, f: str, what: str, prot: str, share: str) -> str:
        """The meta page; or (what == "all") the meta page first, then meta page and every
        sub-buffer as its fields say (trace_mmap.h), then the first mapping undone ("past":
        one sub-buffer more); or ("off") one page at page offset 1."""
        import trace_abi
        from probelib import libc
        fd = self._fd(f)
        p = mmap.PROT_READ | {"rw": mmap.PROT_WRITE, "rx": mmap.PROT_EXEC}.get(prot, 0)
        flags = mmap.MAP_SHARED if share == "shared" else mmap.MAP_PRIVATE
        if what == "off":
            self.vmas[sid] = (self._mmap(fd, self.page, p, flags, self.page), self.page)
            return "ok"
        addr = self._mmap(fd, self.page, p, flags)
        length = self.page
        if what in ("all", "past"):
            meta = trace_abi.TraceBufferMeta.from_address(addr)
            whole = meta.meta_page_size + (meta.nr_subbufs + (what == "past")) * \
                meta.subbuf_size
            try:
                new = self._mmap(fd, whole, p, flags)
            finally:
                libc.munmap(ctypes.c_void_p(addr), self.page)
            addr, length = new, whole
        self.vmas[sid] = (addr, length)
        return "ok"

    def op_munmap(self, sid: int, m: str) -> str:
        from probelib import errno_result, libc
        addr, length = self.vmas[int(m[1:])]
        r = errno_result(libc.munmap(ctypes.c_void_p(addr), length) == 0)
        if r == "ok":
            del self.vmas[int(m[1:])]
        return r

    def op_munmap_part(self, sid: int, m: str) -> str:
        from probelib import errno_result, libc
        addr, length = self.vmas[int(m[1:])]
        return errno_result(libc.munmap(ctypes.c_void_p(addr + length - self.page),
                                        self.page) == 0)

    def op_mremap(self, sid: int, m: str, how: str) -> str:
        """A move keeps the mapping (at its new address); what a resize the model refuses
        made anyway is undone at the end (the step already failed)."""
        import probelib
        addr, length = self.vmas[int(m[1:])]
        r, new, new_len = probelib.remap(addr, length, how)
        if r == "ok" and how == "move":
            self.vmas[int(m[1:])] = (new, length)
        elif r == "ok":
            self.stray.append((new, new_len))
        return r

    def op_mprotect(self, sid: int, m: str) -> str:
        from probelib import errno_result, libc
        addr, length = self.vmas[int(m[1:])]
        return errno_result(libc.mprotect(ctypes.c_void_p(addr), length,
                                          mmap.PROT_READ | mmap.PROT_WRITE) == 0)

    def op_ioctl(self, sid: int, f: str) -> str:
        fcntl.ioctl(self._fd(f), UNKNOWN_IOCTL)
        return "ok"

    def op_madvise(self, sid: int, m: str, advice: str) -> str:
        from probelib import errno_result, libc
        addr, length = self.vmas[int(m[1:])]
        return errno_result(libc.madvise(ctypes.c_void_p(addr), length, MADV_DOFORK) == 0)

    def op_fork(self, sid: int) -> str:
        """A child that says how many of the mappings it inherited (VM_DONTCOPY: none unless
        MADV_DOFORK let it through)."""
        import probelib
        return probelib.fork_inheriting(list(self.vmas.values()))

    def op_get_reader(self, sid: int, f: str) -> str:
        import trace_abi
        fcntl.ioctl(self._fd(f), trace_abi.TRACE_MMAP_IOCTL_GET_READER)
        return "ok"

    def op_write(self, sid: int, n: int) -> str:
        fd = os.open(f"{self.inst}/trace_marker", os.O_WRONLY)
        try:
            for _ in range(n):
                os.write(fd, MARKER)
        finally:
            os.close(fd)
        return "ok"

    def op_resize(self, sid: int, kb: int) -> str:
        return _write(f"{self.inst}/buffer_size_kb", kb)

    def op_subbuf(self, sid: int, kb: int) -> str:
        return _write(f"{self.inst}/buffer_subbuf_size_kb", kb)

    def op_snapshot(self, sid: int, value: int) -> str:
        return _write(f"{self.inst}/snapshot", value)

    def observe(self, expected: dict) -> dict:
        import trace_abi
        out = {}
        for key, want in expected.items():
            meta = trace_abi.TraceBufferMeta.from_address(self.vmas[int(key[5:])][0])
            out[key] = {k: getattr(meta, k) for k in want}
        return out

    def release(self) -> None:
        from probelib import libc
        for addr, length in list(self.vmas.values()) + self.stray:
            libc.munmap(ctypes.c_void_p(addr), length)
        for fd in self.fds.values():
            os.close(fd)
        self.vmas, self.fds, self.stray = {}, {}, []

    def end(self, expected: dict) -> dict:
        import probelib
        resize = _write(f"{self.inst}/buffer_size_kb", self.cfg["buffer_kb"] + 4)
        try:
            os.rmdir(self.inst)
            rmdir = "ok"
        except OSError as e:
            rmdir = probelib.errname(e)
        return {"resize": resize, "rmdir": rmdir}


def _write(path: str, value: object) -> str:
    """`echo value > path`: 'ok' or the errno's name (tracefs.write_file)."""
    import tracefs
    return tracefs.write_file(path, f"{value}\n")
