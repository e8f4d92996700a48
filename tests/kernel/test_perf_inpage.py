"""In-page perf output: perf_output_begin_forward_in_page() (seed 001, "perf: add
perf_output_begin_forward_in_page", ported to 6.12 in kernels/series/inpage), written by the
lab's test producer kernels/modules/ringlab_inpage and read back by probes/probe_perf_inpage.py.

One test per promise of the seed's changelog and the ported __perf_output_begin(): no record
crosses a page of the data area; a page's unused tail is zero-filled and the record starts on
the next page; the records hold what the producer wrote; a request larger than a page is
refused; and a reader can skip the zero fill (a size-0 header), which the ordinary record
parser (perf_buffer.parse_records, include/uapi/linux/perf_event.h rules) cannot.

The producer calls the function directly, so it does not build for a kernel without the
series: those kernels skip every test here with the compiler's (or modpost's) words.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING
from pathlib import Path

import pytest

from harness.errors import ModuleError, ModuleUnavailable
from harness.guest.guest import Guest
from harness.resources import Lab

if TYPE_CHECKING:
    from conftest import ModuleBuilds, ProbeCheck

FUNCTION = "perf_output_begin_forward_in_page"


def _missing_function_line(e: ModuleError) -> str | None:
    """The build error line that names FUNCTION, if the build failed for want of it: the
    compiler's implicit declaration (no series) is in the message; modpost's "undefined!"
    (series without the export patch) is only in the build log the hint points at."""
    if FUNCTION in e.message:
        return e.message.split(": ", 1)[-1] if "does not build" in e.message else e.message
    m = re.match(r"log: (\S+)", e.hint or "")
    if m and Path(m.group(1)).is_file():
        for line in Path(m.group(1)).read_text(errors="replace").splitlines():
            if FUNCTION in line and re.search(r"error|undefined", line, re.I):
                return line.strip()
    return None


@pytest.fixture
def inpage_pmu(guest: Guest, lab: Lab, test_modules: ModuleBuilds,
               request: pytest.FixtureRequest) -> int:
    """The test producer ringlab_inpage built for the guest's kernel and loaded; its perf type.
    Skips when the kernel lacks perf_output_begin_forward_in_page (the module cannot build)
    or the lab cannot build modules for it; any other build failure is the lab's error."""
    try:
        ko = test_modules.build(lab, "ringlab_inpage", guest.kernel.name, request.node.nodeid)
    except ModuleUnavailable as e:
        pytest.skip(f"no test producer for this kernel: {e.message}")
    except ModuleError as e:
        line = _missing_function_line(e)
        if line is None:
            test_modules.lab_error("ringlab_inpage", guest.kernel.name, request.node.nodeid, e)
        if "undefined" in line:  # declared but not exported: 0001 without 0002
            pytest.skip(f"kernel does not export {FUNCTION} (kernels/series/inpage 0002 not "
                        f"applied): the test module does not build: {line}")
        pytest.skip(f"kernel has no {FUNCTION} (seed 001 not applied): the test module does "
                    f"not build: {line}")
    guest.insmod(ko)
    return int(guest.run("cat /sys/bus/event_source/devices/ringlab_inpage/type").stdout)


@pytest.fixture
def inpage(probe_check: ProbeCheck) -> Callable[..., dict]:
    """inpage(CHECK, *ARGS, timeout=180): the observations of a check of
    probes/probe_perf_inpage.py (conftest.py ProbeCheck), shared by the tests that judge them;
    a torn record that any of its reads met fails the test at once."""
    def observe(check: str, *args: str, timeout: float = 180) -> dict:
        return untorn(check, probe_check("probe_perf_inpage", check, *args, timeout=timeout))
    return observe


def untorn(check: str, data: dict) -> dict:
    for name, d in [(check, data), *((f"{check}/{k}", v) for k, v in data.items()
                                      if isinstance(v, dict) and "data_head" in v)]:
        assert not d.get("torn"), \
            f"{name}: the in-page reader met a torn record: {d['torn']} (a skipped page tail " \
            f"that is not zero-filled reads as a garbage header)"
    return data


def cycle(guest: Guest, inpage) -> dict:
    c = inpage("cycle", "60", "64")
    # The probe lays the cycle out in its own page size (mmap.PAGESIZE): it must be the kernel's.
    page = int(guest.run("getconf PAGESIZE").stdout)
    assert c["page_size"] == page, \
        f"the probe laid records out in {c['page_size']}-byte pages; the guest's are {page}"
    assert c["done"], f"the producer did not finish its {c['requests']} requests: {c['counters']}"
    return c


def test_no_record_crosses_a_page(guest: Guest, inpage, inpage_pmu: int) -> None:
    c = cycle(guest, inpage)
    s = inpage("stream", "2", "8")
    p = inpage("oversize", "5")["page"]
    for name, d in (("cycle", c), ("stream", s), ("whole-page records", p)):
        assert d["records"] > 0, f"{name}: no record was written: {d['counters']}"
        # Seed changelog: "indicates whether the requested chunk of memory must be on a
        # single page"; handle->size is what the writer may store without crossing.
        assert not d["crossings"], \
            f"{name}: records crossing a page boundary of the data area at {d['crossings']}"
        assert d["counters"]["split"] == 0, \
            f"{name}: {d['counters']['split']} reservations had less room left in their page " \
            f"(handle->size) than their size"
        assert d["wrapped"] == 0, f"{name}: {d['wrapped']} records wrap the end of the data area"
    assert c["gaps"] > 0, f"the cycle must have hit page ends: {c}"
    assert s["passes_over_data_area"] >= 2, \
        f"the stream must wrap its {s['data_size']}-byte data area: data_head {s['data_head']}"


def test_skipped_page_tail_is_zero_filled(guest: Guest, inpage, inpage_pmu: int) -> None:
    c = cycle(guest, inpage)
    # Seed changelog: "If the request cannot be satisfied within the current page, the unused
    # portion of the current page is filled with 0s." The ported code does it only then.
    assert not c["gap_problems"], f"zero fill: {c['gap_problems']}"
    assert c["gap_positions"] == c["expected_gap_positions"], \
        f"the page tails skipped are not those the ported code must skip for the cycle's " \
        f"sizes: got {c['gap_positions']}, expected {c['expected_gap_positions']}"
    s = inpage("stream", "2", "8")
    assert s["gaps"] > 0 and not s["gap_problems"], \
        f"zero fill while the data area wraps: {s['gaps']} gaps, {s['gap_problems']}"


def test_record_content_is_intact(guest: Guest, inpage, inpage_pmu: int) -> None:
    c = cycle(guest, inpage)
    assert not c["content_problems"], f"records differ from what the producer wrote: " \
                                      f"{c['content_problems']}"
    assert c["records"] == c["counters"]["written"] == len(c["expected_sizes"]), \
        f"{c['records']} records read, {c['counters']['written']} written, " \
        f"{len(c['expected_sizes'])} requests up to a page: {c['counters']}"
    assert c["sizes"] == c["expected_sizes"], \
        f"record sizes differ from the requests': {c['sizes']} vs {c['expected_sizes']}"
    assert c["positions"] == c["expected_positions"] and \
        c["data_head"] == c["expected_data_head"], \
        f"layout differs from the ported code's: data_head {c['data_head']} (expected " \
        f"{c['expected_data_head']}), first positions {c['positions'][:12]}"
    s = inpage("stream", "2", "8")
    assert s["records"] > 0 and not s["content_problems"], \
        f"records differ from what the producer wrote (the data area wrapping " \
        f"{s['passes_over_data_area']} times): {s['content_problems']}"


def test_a_request_larger_than_a_page_is_refused(guest: Guest, inpage, inpage_pmu: int) -> None:
    o = inpage("oversize", "5")
    over, page = o["over"], o["page"]
    # Seed: "the requested size cannot exceed the page size"; __perf_output_begin() goes to
    # `out` (-ENOSPC) before reserving anything and without counting a lost record.
    assert over["counters"]["refused"] == o["requests"] and \
        over["counters"]["oversize_accepted"] == 0, \
        f"{o['requests']} requests of {o['page_size'] + 8} bytes: {over['counters']}"
    assert over["data_head"] == 0 and over["records"] == 0, \
        f"a refused request reserved room: data_head {over['data_head']}"
    assert over["last_error"] < 0, f"refusal returned {over['last_error']}"
    # A request of exactly a page is not oversize: written, one record a page.
    assert page["counters"]["written"] == o["requests"] and page["counters"]["refused"] == 0, \
        f"requests of exactly {o['page_size']} bytes: {page['counters']}"
    assert all(pos % o["page_size"] == 0 for pos in page["positions"]), page["positions"]
    c = cycle(guest, inpage)
    assert c["counters"]["refused"] == c["oversize_requests"] > 0, \
        f"the cycle's {c['oversize_requests']} oversize requests: {c['counters']}"
    assert c["lost"] == 0 and c["counters"]["failed"] == 0, \
        f"refusals must not be counted as lost records: lost {c['lost']}, {c['counters']}"


def test_parser_skips_the_zero_fill(guest: Guest, inpage, inpage_pmu: int) -> None:
    c = cycle(guest, inpage)
    # perf_buffer.parse_records_in_page(): a size-0 header off a page boundary is the zero
    # fill, skip to the boundary. It read every record the producer wrote up to data_head.
    assert c["records"] == c["counters"]["written"] and c["gaps"] > 0, \
        f"the in-page parser read {c['records']} records and {c['gaps']} gaps of " \
        f"{c['counters']['written']} written"
    # The ordinary parser (perf_event.h: size is the record's length) stops at the first gap:
    # the zero fill is a size-0 header, which an in-page reader must know to skip.
    first = c["first_gap"]
    assert c["abi_parser"].startswith(f"TornRecord: record at {first} has type 0 size 0"), \
        f"the ordinary parser on an in-page ring: {c['abi_parser']} (first gap at {first})"
