"""probes/probelib.py on the host: errno names and results, the fork helpers, the smaps walk,
Mapping, and a multi-check probe's main()."""
from __future__ import annotations

import ctypes
import errno
import json
import mmap
import os
import signal
from pathlib import Path

import pytest

import probelib  # from probes/ (pytest's pythonpath): guest-side, stdlib only


def test_errname_prefers_the_abi_spelling_of_aliases() -> None:
    assert probelib.errname(errno.EINVAL) == "EINVAL"
    assert probelib.errname(OSError(errno.EOPNOTSUPP, "x")) == "EOPNOTSUPP"  # not ENOTSUP
    assert probelib.errname(errno.EAGAIN) == "EAGAIN"  # not EWOULDBLOCK
    assert probelib.errname(OSError("no errno")) == "errno None"
    assert probelib.errname(4095) == "errno 4095"


def test_outcome_is_ok_or_the_errno_name() -> None:
    assert probelib.outcome(lambda: None) == "ok"
    assert probelib.outcome(lambda: os.close(-1)) == "EBADF"


def test_errno_result_names_the_errno_a_libc_call_left() -> None:
    assert probelib.errno_result(probelib.libc.munmap(1, mmap.PAGESIZE) == 0) == "EINVAL"
    ctypes.set_errno(errno.ENOMEM)
    assert probelib.errno_result(True) == "ok"
    assert probelib.errno_result(False) == "ENOMEM"


def test_libc_error_is_the_oserror_of_errno() -> None:
    ctypes.set_errno(errno.EPERM)
    e = probelib.libc_error()
    assert (e.errno, e.strerror) == (errno.EPERM, os.strerror(errno.EPERM))


def test_mapped_tells_map_failed_and_null_from_an_address() -> None:
    assert not probelib.mapped(probelib.MAP_FAILED) and not probelib.mapped(None)
    assert probelib.mapped(0x7f0000000000)
    assert probelib.MAP_FAILED == (1 << (8 * ctypes.sizeof(ctypes.c_void_p))) - 1
    assert probelib.PAGE == mmap.PAGESIZE


def test_libc_mmap_is_typed_for_pointers() -> None:
    """Without restype c_void_p an address above 2^31 would come back truncated."""
    addr = probelib.libc.mmap(None, probelib.PAGE, mmap.PROT_READ | mmap.PROT_WRITE,
                              mmap.MAP_PRIVATE | probelib.MAP_ANONYMOUS, -1, 0)
    assert probelib.mapped(addr)
    ctypes.c_uint8.from_address(addr).value = 7
    assert ctypes.string_at(addr, 1) == b"\x07"
    assert probelib.libc.munmap(addr, probelib.PAGE) == 0


def test_mapping_reads_a_file_and_raises_the_kernel_errno(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes((0x11223344).to_bytes(4, "little") + (5).to_bytes(8, "little")
                  + bytes(probelib.PAGE - 12))
    fd = os.open(f, os.O_RDONLY)
    try:
        with probelib.Mapping(fd, probelib.PAGE) as m:
            assert (m.u32(0), m.u64(4), m.read(0, 2)) == (0x11223344, 5, b"\x44\x33")
        assert m.addr is None
        with pytest.raises(OSError) as e:  # a read-only fd, mapped writable and shared
            probelib.Mapping(fd, probelib.PAGE, mmap.PROT_READ | mmap.PROT_WRITE)
        assert probelib.errname(e.value) == "EACCES"
    finally:
        os.close(fd)


# --- fork helpers -------------------------------------------------------------------------

def test_in_child_returns_the_childs_dict() -> None:
    pid = os.getpid()
    out = probelib.in_child(lambda a: {"a": a, "other_process": os.getpid() != pid}, 3)
    assert out == {"a": 3, "other_process": True}


def test_in_child_reports_an_exception_and_a_signal() -> None:
    assert probelib.in_child(lambda: 1 // 0) == {
        "error": "ZeroDivisionError: integer division or modulo by zero"}
    assert probelib.in_child(lambda: os.kill(os.getpid(), signal.SIGTERM)) == {
        "signal": "SIGTERM"}


def test_children_started_together_are_reaped_each_with_its_output() -> None:
    started = [probelib.start_in_child(lambda i: {"i": i}, i) for i in range(3)]
    got = [probelib.reap_child(pid, r) for pid, r in started]
    assert [json.loads(data) for data, _ in got] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert all(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 for _, status in got)


def test_a_killed_child_writes_nothing() -> None:
    pid, r = probelib.start_in_child(lambda: os.kill(os.getpid(), signal.SIGKILL) or {})
    data, status = probelib.reap_child(pid, r)
    assert data == b"" and os.WTERMSIG(status) == signal.SIGKILL


def test_child_outcome_says_how_it_ended_and_what_it_returned() -> None:
    assert probelib.child_outcome(lambda: True) == {"exit": 0, "output": "True"}
    assert probelib.child_outcome(lambda: 1 // 0) == {"exit": 0, "output": ""}
    assert probelib.child_outcome(lambda: os.kill(os.getpid(), signal.SIGTERM)) == {
        "signal": "SIGTERM", "output": ""}


# --- smaps --------------------------------------------------------------------------------

SMAPS = """\
55d0a0000000-55d0a0002000 r--p 00000000 fe:01 1234                       /usr/bin/python3
Size:                  8 kB
Rss:                   8 kB
VmFlags: rd mr mw me sd
7f0000000000-7f0000011000 rw-s 00000000 00:0e 77                         [perf_event]
Size:                 68 kB
KernelPageSize:        4 kB
Rss:                   0 kB
VmFlags: rd wr sh mr mw me ms dc de pf
7f0000011000-7f0000012000 ---p 00000000 00:00 0
Size:                  4 kB
Rss:                   4 kB
"""


@pytest.fixture
def smaps(tmp_path: Path) -> str:
    path = tmp_path / "smaps"
    path.write_text(SMAPS)
    return str(path)


def test_smaps_vma_is_the_vma_holding_the_address(smaps: str) -> None:
    vma = probelib.smaps_vma(0x7f0000010fff, smaps)
    assert vma["Size"] == "68 kB" and vma["Rss"] == "0 kB"
    assert vma["VmFlags"] == "rd wr sh mr mw me ms dc de pf"
    assert probelib.smaps_vma(0x7f0000011000, smaps) == {"Size": "4 kB", "Rss": "4 kB"}
    assert probelib.smaps_vma(0x1000, smaps) == {}


def test_smaps_field_and_vm_flags_of_one_vma(smaps: str) -> None:
    assert probelib.smaps_field(0x55d0a0001000, "Rss", smaps) == "8 kB"
    assert probelib.smaps_field(0x7f0000000000, "KernelPageSize", smaps) == "4 kB"
    assert probelib.smaps_field(0x55d0a0001000, "KernelPageSize", smaps) is None  # not its
    assert probelib.vm_flags(0x7f0000000000, smaps)[-3:] == ["dc", "de", "pf"]
    assert probelib.vm_flags(0x7f0000011000, smaps) == []  # no VmFlags line
    assert probelib.vm_flags(0x1000, smaps) == []


def test_smaps_of_this_process() -> None:
    m = mmap.mmap(-1, 2 * mmap.PAGESIZE)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    try:
        assert probelib.smaps_field(addr, "Size") == f"{2 * mmap.PAGESIZE // 1024} kB"
        assert {"rd", "wr", "sh"} <= set(probelib.vm_flags(addr))
    finally:
        del addr
        m.close()


# --- a multi-check probe's main() -----------------------------------------------------------

def check_echo(args: list[str]) -> dict:
    return {"args": args}


def check_needs_more(args: list[str]) -> dict:
    raise probelib.Skip("kernel has no such thing")


CHECKS = probelib.check_table({"check_echo": check_echo, "check_needs_more": check_needs_more,
                               "other": len})


def test_check_table_names_the_check_functions() -> None:
    assert CHECKS == {"echo": check_echo, "needs-more": check_needs_more}


def test_check_main_prints_one_document_or_the_skip(capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    assert probelib.check_main(["echo", "1", "2"], "t", "d", CHECKS, "n") == 0
    assert json.loads(capsys.readouterr().out) == {"probe": "t", "check": "echo",
                                                   "args": ["1", "2"]}
    probelib.check_main(["needs-more"], "t", "d", CHECKS, "n")
    assert json.loads(capsys.readouterr().out) == {"probe": "t", "check": "needs-more",
                                                   "skip": "kernel has no such thing"}

    def gate(check: str) -> None:
        raise probelib.Skip(f"not as this user ({check})")
    probelib.check_main(["echo"], "t", "d", CHECKS, "n", gate)
    assert json.loads(capsys.readouterr().out)["skip"] == "not as this user (echo)"
