"""Shared plumbing for probes: one JSON document on stdout, errno names, the command line.

Every probe module has `main(argv) -> int` that prints exactly one JSON document; this module
makes that the same for all of them, whether run by hand in a guest or by runner.py.
"""
from __future__ import annotations

import argparse
import ctypes
import errno
import json
import mmap
import os
import signal
import sys
from collections.abc import Callable


PAGE = mmap.PAGESIZE
# The C library, one handle for every probe: mmap(2) and its kin typed here (a pointer
# result is a c_void_p, not a truncated int), anything else a probe calls (capget, ...)
# untyped. use_errno: ctypes.get_errno() after a failed call is that call's errno.
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mremap.restype = ctypes.c_void_p
libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int,
                        ctypes.c_void_p]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
libc.read.restype = ctypes.c_ssize_t
libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.syscall.restype = ctypes.c_long
MAP_FAILED = ctypes.c_void_p(-1).value
# include/uapi/asm-generic/mman-common.h, linux/mman.h (what Python's mmap module lacks)
MAP_FIXED, MAP_ANONYMOUS, PROT_NONE = 0x10, 0x20, 0
MAP_FIXED_NOREPLACE = 0x100000
MREMAP_MAYMOVE, MREMAP_FIXED, MREMAP_DONTUNMAP = 1, 2, 4

def errname(e: OSError | int) -> str:
    """'EINVAL' for an OSError or an errno value."""
    n = e.errno if isinstance(e, OSError) else e
    if n is None:  # an OSError raised without an errno
        return "errno None"
    return _PREFERRED.get(n) or errno.errorcode.get(n, f"errno {n}")


# Aliases with one value: name them as the kernel ABI documents do.
_PREFERRED = {errno.EOPNOTSUPP: "EOPNOTSUPP", errno.EAGAIN: "EAGAIN"}


def outcome(fn: Callable[[], object]) -> str:
    """'ok' if fn() returns, else the name of the errno its OSError carries."""
    try:
        fn()
        return "ok"
    except OSError as e:
        return errname(e)


def errno_result(ok: bool) -> str:
    """'ok', or the name of the errno a failed libc call just left (ctypes.get_errno())."""
    return "ok" if ok else errname(ctypes.get_errno())


def mapped(addr: int | None) -> bool:
    """Whether an address libc's mmap()/mremap() returned is one (not NULL, not MAP_FAILED)."""
    return addr not in (None, MAP_FAILED)


def libc_error() -> OSError:
    """The OSError of the errno a failed libc call just left, to raise."""
    err = ctypes.get_errno()
    return OSError(err, os.strerror(err))


def emit(doc: dict) -> None:
    """Print the probe's one JSON document."""
    json.dump(doc, sys.stdout, indent=None, sort_keys=True)
    sys.stdout.write("\n")
    sys.stdout.flush()


def parser(name: str, description: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=f"python3 {name}.py", description=description)


class Skip(Exception):
    """The kernel lacks what a check needs; the message is the exact reason (the test skips
    with it)."""


def check_main(argv: list[str], probe: str, description: str, checks: dict, args_help: str,
               gate: Callable[[str], None] | None = None) -> int:
    """main() of a multi-check probe: parse CHECK [ARGS], run it (after gate(check), which
    may raise Skip), print {"probe", "check", ...observations} or {"skip": reason}."""
    ns = parse_check(argv, f"probe_{probe}", description, checks, args_help)
    try:
        if gate is not None:
            gate(ns.check)
        result = checks[ns.check](ns.args)
    except Skip as e:
        result = {"skip": str(e)}
    emit({"probe": probe, "check": ns.check, **result})
    return 0


def check_table(namespace: dict) -> dict[str, Callable[[list[str]], dict]]:
    """A probe's checks by name: its check_foo_bar functions as 'foo-bar'."""
    return {name[len("check_"):].replace("_", "-"): fn for name, fn in namespace.items()
            if name.startswith("check_")}


def parse_check(argv: list[str], name: str, description: str, checks: dict,
                args_help: str) -> argparse.Namespace:
    """The command line every multi-check probe takes: CHECK [ARGS...]."""
    p = parser(name, description)
    p.add_argument("check", choices=sorted(checks), help="which rules to probe")
    p.add_argument("args", nargs="*", help=f"check arguments ({args_help})")
    return p.parse_args(argv)


def fork_child(write: Callable[[], bytes]) -> tuple[int, int]:
    """fork(): the child writes write()'s bytes to a pipe and exits 0 (at once, also when
    write() raises); returns (its pid, the pipe's read end) for reap_child()."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.write(w, write())
        finally:
            os._exit(0)
    os.close(w)
    return pid, r


def reap_child(pid: int, r: int) -> tuple[bytes, int]:
    """All that a fork_child() child wrote (to its end), then its wait status."""
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return data, status


def _json_of(fn: Callable[..., dict], *args: object) -> bytes:
    try:
        out = fn(*args)
    except BaseException as e:  # noqa: BLE001 - report anything to the parent
        out = {"error": f"{type(e).__name__}: {e}"}
    return json.dumps(out).encode()


def start_in_child(fn: Callable[..., dict], *args: object) -> tuple[int, int]:
    """fn(*args) in a forked child, which writes its dict as JSON ({"error": ...} if it
    raised); (pid, read end) for reap_child(), so several may run at once."""
    return fork_child(lambda: _json_of(fn, *args))


def in_child(fn: Callable[..., dict], *args: object) -> dict:
    """fn(*args) in a forked child; its dict (through JSON), {"signal": NAME} if a signal
    killed it, {"error": ...} if it raised."""
    data, status = reap_child(*start_in_child(fn, *args))
    if os.WIFSIGNALED(status):
        return {"signal": signal.Signals(os.WTERMSIG(status)).name}
    return json.loads(data)


def remap(addr: int, length: int, how: str) -> tuple[str, int, int]:
    """mremap() of a whole mapping: "move" (MAYMOVE|FIXED onto a spot reserved for it),
    "grow" or "shrink" by a page in place, "dontunmap" (MAYMOVE|DONTUNMAP): (result, the new
    address, its length); a failed move gives its spot back."""
    if how == "move":
        spot = libc.mmap(None, length, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        new = libc.mremap(ctypes.c_void_p(addr), length, length,
                          MREMAP_MAYMOVE | MREMAP_FIXED, ctypes.c_void_p(spot))
        if not mapped(new):
            r = errno_result(False)
            libc.munmap(ctypes.c_void_p(spot), length)
            return r, 0, 0
        return "ok", new, length
    new_len = {"grow": length + PAGE, "shrink": length - PAGE, "dontunmap": length}[how]
    flags = MREMAP_MAYMOVE | MREMAP_DONTUNMAP if how == "dontunmap" else 0
    new = libc.mremap(ctypes.c_void_p(addr), length, new_len, flags, None)
    if not mapped(new):
        return errno_result(False), 0, 0
    return "ok", new, new_len


def fork_inheriting(mappings: list[tuple[int, int]]) -> str:
    """fork() a child that reads the first byte of each of these (addr, length) mappings it
    has and exits with how many it has (mincore(): ENOMEM where nothing is mapped, as after
    VM_DONTCOPY): "ok" when none, "inherits N", or the signal that killed it."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            vec = ctypes.create_string_buffer(1 << 16)
            for addr, length in mappings:
                if libc.mincore(ctypes.c_void_p(addr), length, vec) == 0:
                    ctypes.string_at(addr, 1)
                    code += 1
        except BaseException:  # noqa: BLE001
            code = 255
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"child killed by {signal.Signals(os.WTERMSIG(status)).name}"
    n = os.WEXITSTATUS(status)
    return "ok" if n == 0 else "child failed" if n == 255 else f"inherits {n}"


def child_outcome(fn: Callable[[], object]) -> dict:
    """fn() in a forked child: how it ended ({"exit": status} or {"signal": NAME}) and what
    it returned, as text ("output", empty if it raised)."""
    data, status = reap_child(*fork_child(lambda: str(fn()).encode()))
    if os.WIFSIGNALED(status):
        return {"signal": signal.Signals(os.WTERMSIG(status)).name, "output": data.decode()}
    return {"exit": os.WEXITSTATUS(status), "output": data.decode()}


def vmas_in(addr: int, length: int) -> list[list]:
    """[start, end, perms] (relative to addr) of each VMA of this process overlapping
    [addr, addr+length), from /proc/self/maps: what a split or a refused one left."""
    out = []
    for line in open("/proc/self/maps"):
        span, perms = line.split()[:2]
        lo, hi = (int(x, 16) for x in span.split("-"))
        if lo < addr + length and hi > addr:
            out.append([lo - addr, hi - addr, perms])
    return out


SMAPS = "/proc/self/smaps"


def smaps_vma(addr: int, smaps: str = SMAPS) -> dict[str, str]:
    """The fields of this process's VMA holding addr, from /proc/self/smaps (`smaps`: a file
    in its format), by name: {"Rss": "8 kB", "VmFlags": "rd wr ...", ...}; {} if no VMA holds
    it."""
    fields: dict[str, str] | None = None
    with open(smaps) as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and not head[0].endswith(":"):  # a VMA's first line
                if fields is not None:
                    break
                lo, _, hi = head[0].partition("-")
                try:
                    if int(lo, 16) <= addr < int(hi, 16):
                        fields = {}
                except ValueError:
                    pass
            elif fields is not None:
                name, _, value = line.partition(":")
                fields[name] = value.strip()
    return fields or {}


def smaps_field(addr: int, name: str, smaps: str = SMAPS) -> str | None:
    """One field of smaps_vma(): "8 kB" for Rss, None if the VMA (or it) is not there."""
    return smaps_vma(addr, smaps).get(name)


def vm_flags(addr: int, smaps: str = SMAPS) -> list[str]:
    """The VmFlags of this process's VMA holding addr, from /proc/self/smaps (two letters
    each: `de` VM_DONTEXPAND, `dc` VM_DONTCOPY, `pf` VM_PFNMAP, `io` VM_IO ...;
    fs/proc/task_mmu.c show_smap_vma_flags())."""
    return (smaps_field(addr, "VmFlags", smaps) or "").split()


def run(main: Callable[[list[str]], int]) -> None:
    """Entry for `python3 probe_x.py ...` by hand."""
    sys.exit(main(sys.argv[1:]))


class Mapping:
    """mmap(2) through libc. Python's mmap module refuses regular files whose st_size is 0,
    which is what every tracefs file reports; the kernel decides, so ask the kernel."""

    def __init__(self, fd: int, length: int, prot: int = mmap.PROT_READ,
                 flags: int = mmap.MAP_SHARED, offset: int = 0, at: int | None = None) -> None:
        """`at`: map exactly there (MAP_FIXED_NOREPLACE), e.g. where no page table exists yet."""
        if at is not None:
            flags |= MAP_FIXED_NOREPLACE
        addr = libc.mmap(at, length, prot, flags, fd, offset)
        if not mapped(addr):
            raise libc_error()
        self.addr, self.length = addr, length

    def read(self, offset: int, size: int) -> bytes:
        return ctypes.string_at(self.addr + offset, size)

    def u32(self, offset: int) -> int:
        return int.from_bytes(self.read(offset, 4), "little")

    def u64(self, offset: int) -> int:
        return int.from_bytes(self.read(offset, 8), "little")

    def close(self) -> None:
        if self.addr is not None:
            libc.munmap(self.addr, self.length)
            self.addr = None

    def __enter__(self) -> Mapping:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
