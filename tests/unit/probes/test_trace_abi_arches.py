"""The probes on arm64: syscall number, ioctl encodings and page-size-derived cases are the
running arch's and page size's, never x86's or 4096 assumed."""
from __future__ import annotations

import errno
import importlib
import platform
import sys

import pytest

import perf_abi  # from probes/ (pytest's pythonpath): guest-side, stdlib only
import trace_abi


def _ioc(direction: int, type_: str, nr: int, size: int) -> int:
    """include/uapi/asm-generic/ioctl.h, which arm64 and x86 both use."""
    return (direction << 30) | (size << 16) | (ord(type_) << 8) | nr


@pytest.mark.parametrize("machine,number", [("x86_64", 298), ("aarch64", 241)])
def test_perf_event_open_number_is_the_running_arch(monkeypatch: pytest.MonkeyPatch,
                                                    machine: str, number: int) -> None:
    monkeypatch.setattr(platform, "machine", lambda: machine)
    try:
        assert importlib.reload(perf_abi).SYS_PERF_EVENT_OPEN == number
    finally:
        monkeypatch.undo()
        importlib.reload(perf_abi)


def test_an_arch_without_a_number_fails_naming_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    try:
        abi = importlib.reload(perf_abi)
        with pytest.raises(OSError) as e:
            abi.perf_event_open(abi.PerfEventAttr())
        assert e.value.errno == errno.ENOSYS and "riscv64" in str(e.value)
    finally:
        monkeypatch.undo()
        importlib.reload(perf_abi)


def test_ioctls_are_the_asm_generic_encoding_arm64_uses() -> None:
    assert perf_abi.PERF_EVENT_IOC_ENABLE == _ioc(0, "$", 0, 0)
    assert perf_abi.PERF_EVENT_IOC_ID == _ioc(2, "$", 7, 8)             # _IOR, __u64 *
    assert perf_abi.PERF_EVENT_IOC_PAUSE_OUTPUT == _ioc(1, "$", 9, 4)   # _IOW, __u32
    assert trace_abi.TRACE_MMAP_IOCTL_GET_READER == _ioc(0, "R", 0x20, 0)


@pytest.mark.parametrize("page", [4096, 16384, 65536])
def test_default_aux_watermark_cases_follow_the_page_size(page: int) -> None:
    sys.modules.pop("probe_perf_aux", None)
    aux = importlib.import_module("probe_perf_aux")
    cases = {c[0]: c for c in aux.watermark_cases(page)}
    half = 16 * page // 2  # rb_alloc_aux(): aux_watermark 0 is nr_pages << (PAGE_SHIFT - 1)
    _, chunk, n, wm, pages, _ = cases["at_default"]
    assert (wm, pages, chunk * n) == (0, 16, half)
    _, chunk, n, _, _, _ = cases["below_default"]
    assert chunk * n == half - 4096
    # explicit 16 KiB watermarks stay inside the smallest area (16 pages of 4 KiB)
    assert all(c[1] * c[2] <= 16 * 4096 for name, c in cases.items()
               if name.endswith(("16k", "16k_uneven")))


@pytest.mark.parametrize("page,kb", [(4096, 8), (16384, 32), (65536, 128)])
def test_trace_refusals_use_two_page_sub_buffers(page: int, kb: int) -> None:
    """Off-boundary offsets must be page-aligned to reach the driver's rule: the sub-buffer
    is two pages (8 KiB at 4 KiB pages, as before)."""
    sys.modules.pop("probe_trace_mmap", None)
    assert importlib.import_module("probe_trace_mmap").refusal_subbuf_kb(page) == kb
