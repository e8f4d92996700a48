"""What the kernel under test offers, from probes/probe_capabilities.py, checked against the
ABI and against what the lab knows of the kernel (its release and .config)."""
from __future__ import annotations

import pytest

from harness.guest.guest import Guest

SOFTWARE_EVENTS_GIVE_EOPNOTSUPP = "aux mmap: EOPNOTSUPP"


def _caps(guest: Guest, user: str = "root") -> dict:
    return guest.probe("probe_capabilities", user=user).data


def _version(release: str) -> tuple[int, int]:
    major, minor = release.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def test_release_is_the_booted_kernel(guest: Guest) -> None:
    caps = _caps(guest)
    assert caps["kernel"]["release"] == guest.kernel.release, \
        "the guest runs another kernel than the one the lab prepared"
    assert caps["kernel"]["release"] == guest.run("uname -r").stdout.strip()


def test_page_size_is_read_from_the_guest(guest: Guest, kernel_fact) -> None:
    caps = _caps(guest)
    getconf = int(guest.run("getconf PAGESIZE").stdout)
    assert caps["page_size"] == getconf
    assert caps["page_size"] & (caps["page_size"] - 1) == 0, "page size is not a power of two"
    # Every rule counted in pages takes its value from here; the multi-kernel table shows it.
    kernel_fact("page size", str(caps["page_size"]))


def test_perf_ring_buffer_maps_control_and_data_page(guest: Guest) -> None:
    if guest.kernel.config_option("PERF_EVENTS") not in (None, "y"):
        pytest.skip("kernel built without CONFIG_PERF_EVENTS")
    ring = _caps(guest)["paths"]["perf_ring"]
    assert ring["available"], f"perf ring buffer not usable as root: {ring.get('error')}"
    page = _caps(guest)["page_size"]
    cp = ring["control_page"]
    # include/uapi/linux/perf_event.h: data_offset/data_size describe the data area that
    # follows the control page; a 1+1 page mapping has one data page right after it.
    assert (cp["data_offset"], cp["data_size"]) == (page, page)
    assert cp["size"] >= 72, "perf_event_mmap_page.size too small for the fields up to 'size'"


def test_trace_pipe_raw_mmap_speaks_mainline_abi(guest: Guest) -> None:
    trace = _caps(guest)["paths"]["trace_mmap"]
    if not trace["available"]:
        if _version(guest.kernel.release) >= (6, 10) and \
                guest.kernel.config_option("TRACING") == "y":
            pytest.fail(f"a {guest.kernel.release} kernel with CONFIG_TRACING should map "
                        f"trace_pipe_raw (mainline since v6.10): {trace['error']}")
        pytest.skip(trace["error"])
    # include/uapi/linux/trace_mmap.h: GET_READER is _IO('R', 0x20) since v6.10.
    assert trace["abi"] == "mainline _IO('R',0x20)", trace
    meta = trace["meta"]
    page = _caps(guest)["page_size"]
    assert meta["meta_page_size"] % page == 0 and meta["meta_page_size"] >= page
    assert meta["meta_struct_len"] >= 80, "struct trace_buffer_meta is 80 bytes since v6.10"
    assert meta["subbuf_size"] % page == 0 and meta["nr_subbufs"] >= 2


def test_software_pmu_refuses_aux_with_eopnotsupp(guest: Guest) -> None:
    aux = _caps(guest)["paths"]["perf_aux"]
    # ring-buffer ABI section 2 (kernel/events/ring_buffer.c rb_alloc_aux): a PMU without
    # AUX support refuses the AUX mmap with EOPNOTSUPP.
    assert aux["pmus"].get("software") == SOFTWARE_EVENTS_GIVE_EOPNOTSUPP, aux["pmus"]


def test_detached_events_flag(guest: Guest) -> None:
    detached = _caps(guest)["paths"]["detached_events"]
    if not detached["available"]:
        # kernel/events/core.c: flags outside PERF_FLAG_ALL are rejected with EINVAL.
        assert "PERF_FLAG_DETACHED: EINVAL" in detached["detail"], detached
        pytest.skip(detached["error"])
    assert detached["available"]


def test_unprivileged_user_is_refused_kernel_events(guest: Guest) -> None:
    caps = _caps(guest, user="lab")
    assert caps["euid"] != 0
    paranoid = int(guest.run("cat /proc/sys/kernel/perf_event_paranoid").stdout)
    ring = caps["paths"]["perf_ring"]
    if paranoid >= 2:
        # Documentation/admin-guide/perf-security.rst: paranoid >= 2 refuses kernel-side
        # profiling to unprivileged users; perf_allow_kernel() returns EACCES.
        assert ring["error"] == "perf_event_open: EACCES", ring
    else:
        assert ring["available"], ring
