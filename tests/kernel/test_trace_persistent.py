"""Persistent (boot-mapped) tracefs ring buffers: made by the kernel command line, kept in RAM
across a warm reboot, and mapped into user space where the kernel allows it.

The guest boots with its own command line (PERSISTENT below) and is reset in the same QEMU,
its RAM kept (Guest.warm_reboot()). Observations come from probes/probe_trace_mmap.py check
`persistent`. Sources: Documentation/admin-guide/kernel-parameters.txt (reserve_mem=,
trace_instance=), kernel/trace/trace.c enable_instances() and tracing_buffers_mmap(),
kernel/trace/ring_buffer.c (rb_meta_valid(), the persistent meta).
"""
from __future__ import annotations

import secrets

import pytest

from harness.guest.guest import Guest
from harness.kernels.kernel import release_version

BOOT, FIXED, COPY = "ringlab_boot", "ringlab_fixed", "ringlab_copy"
# - BOOT on reserve_mem= memory (the label `ringlab`): the same RAM on the next boot, given
#   the same kernel, command line and machine; nokaslr, or the kernel may land on it.
# - FIXED on a physical range memmap= takes out of the e820 RAM (768 MiB of the 1 GiB guest:
#   below the initramfs QEMU loads at the top of RAM).
# - COPY=BOOT: a backup copy of BOOT's buffer, made at boot in vmalloc memory (7.x).
PERSISTENT = (f"nokaslr reserve_mem=4M:4096:ringlab trace_instance={BOOT}^traceoff@ringlab "
              f"memmap=4M$0x30000000 trace_instance={FIXED}^traceoff@0x30000000:4M "
              f"trace_instance={COPY}={BOOT}")
PHASE_ARGS = (BOOT, FIXED, COPY)
# tracing_buffers_mmap(): 6.12 refuses every boot-mapped buffer with ENODEV (6.12.16 "tracing:
# Do not allow mmap() of persistent ring buffer"; 6.12.107 trace.c:8299, TRACE_ARRAY_FL_BOOT).
# 7.2 refuses only buffers at a fixed address (memmap=, TRACE_ARRAY_FL_MEMMAP) and backup
# copies (TRACE_ARRAY_FL_VMALLOC) (7.2.13 trace.c:7457): a reserve_mem= buffer maps. The
# release between them that allowed it is not pinned here (no tree of the lab has it), so a
# kernel from 6.13 to 6.19 may do either, and its answer is reported as a fact.
REFUSES_BEFORE, MAPS_SINCE = (6, 13, 0), (7, 0, 0)

# warm_reboot: the guest comes from its snapshot's restore, whose first reset boots (a cold
# QEMU's does not under TCG, and needed a second one: issue 44 saw a rerun of it). Two CPUs,
# so that the per-CPU metas past the first are laid out and validated too (rb_range_meta()).
persistent_guest = pytest.mark.guest(cmdline=PERSISTENT, memory_mb=1024, warm_reboot=True, cpus=2)
OBSERVED = pytest.StashKey[dict[int, dict]]()


@pytest.fixture
def persistent(guest: Guest, request: pytest.FixtureRequest) -> dict:
    """The `write` phase's observations, the warm reboot, then the `read` phase's: done once
    per guest (the profile is these tests' own) and shared by the tests that judge them."""
    done = request.config.stash.setdefault(OBSERVED, {})
    if id(guest) not in done:
        mark = f"ringlab-persist-{secrets.token_hex(4)}"
        wrote = guest.probe("probe_trace_mmap", ["persistent", "write", mark, *PHASE_ARGS]).data
        if not wrote["instances"]["boot"]:
            done[id(guest)] = {"wrote": wrote}
        else:
            took = guest.warm_reboot()
            read = guest.probe("probe_trace_mmap", ["persistent", "read", mark, *PHASE_ARGS]).data
            done[id(guest)] = {"wrote": wrote, "read": read, "reboot_s": took,
                               "release": guest.kernel.release}
    got = done[id(guest)]
    if "read" not in got:
        pytest.skip(f"the kernel made no instance {BOOT} from trace_instance={BOOT}@ringlab "
                    f"(reserve_mem= or boot instances on reserved memory unsupported)")
    return got


@persistent_guest
def test_a_persistent_buffer_keeps_its_events_across_a_warm_reboot(persistent: dict) -> None:
    wrote, read = persistent["wrote"], persistent["read"]
    assert wrote["tracing_on_at_boot"] == "0", \
        f"trace_instance=...^traceoff must leave tracing off: tracing_on {wrote['tracing_on_at_boot']}"
    assert wrote["has_mark"], "the marker written before the reboot is not in the buffer"
    assert read["has_mark"], \
        (f"after a warm reboot (RAM kept, {persistent['reboot_s']:.1f} s) the previous boot's "
         f"marker is gone from {BOOT}: last_boot_info {read['last_boot_info']!r}")


@persistent_guest
def test_the_reserve_mem_buffer_maps_where_the_kernel_allows_it(persistent: dict,
                                                                kernel_fact) -> None:
    read = persistent["read"]
    kernel_fact("reserve_mem= trace buffer mmap", read["map"]["boot"])
    version = release_version(persistent["release"]) or MAPS_SINCE
    if version < REFUSES_BEFORE:
        assert read["map"]["boot"] == "ENODEV", \
            f"6.12's tracing_buffers_mmap() refuses boot-mapped buffers: {read['map']['boot']}"
        return
    if version < MAPS_SINCE and read["map"]["boot"] == "ENODEV":
        return  # a kernel of the releases that may still refuse (above)
    assert read["map"]["boot"] == "ok", \
        f"a reserve_mem= buffer must map on 7.x: {read['map']['boot']}"
    assert read["reads_through_mapping"], \
        f"an event written to {BOOT} did not come through its mapping ({read['geometry']})"


@persistent_guest
def test_fixed_address_and_backup_buffers_refuse_mapping(persistent: dict) -> None:
    read = persistent["read"]
    if not read["instances"]["fixed"]:
        pytest.skip(f"the kernel made no instance {FIXED} on memmap= memory")
    assert read["map"]["fixed"] == "ENODEV", \
        f"a buffer at a fixed address (memmap=) must refuse mmap with ENODEV: {read['map']}"
    if read["instances"]["copy"]:
        assert read["map"]["copy"] == "ENODEV", \
            f"a backup copy (vmalloc) must refuse mmap with ENODEV: {read['map']}"


@persistent_guest
def test_a_backup_copy_holds_the_previous_boots_events(persistent: dict) -> None:
    read = persistent["read"]
    if not read["instances"]["copy"]:
        pytest.skip(f"the kernel made no backup instance from trace_instance={COPY}={BOOT} "
                    "(backup copies of boot instances: 7.x)")
    assert read["copy_has_mark"], f"{COPY}, a copy of {BOOT} made at boot, lacks its marker"


# ca296d32ece3 "tracing: ring_buffer: Rewind persistent ring buffer on reboot" (v6.17):
# sub-buffers read before a reboot keep their data, and the next boot's validation walks back
# from the head over them (rb_meta_validate_events()), so `trace` shows them again ("data read
# via trace_pipe comes back on the next boot unless cleared with `echo > trace`"). A kernel
# cannot be asked whether it rewinds: the release says.
REWOUND_SINCE = (6, 17, 0)


@persistent_guest
def test_events_read_before_a_warm_reboot_come_back_after_it(persistent: dict, check) -> None:
    """140 events (about 4 sub-buffers) written to the boot instance and consumed through
    CPU 0's trace_pipe before the warm reboot (after `trace` was truncated: the boot's own
    data from then on, so that the empty read does not reset the buffer as the last boot's):
    after it, `trace` shows the consumed ones again, the oldest first and in order (the rewind
    of ca296d32ece3: the sub-buffers swapped out and back into the ring behind the head are
    rewound over)."""
    wrote, read = persistent["wrote"], persistent["read"]
    version = release_version(persistent["release"]) or REWOUND_SINCE
    if version < REWOUND_SINCE:
        pytest.skip(f"{persistent['release']} predates the rewind of sub-buffers read before a "
                    "reboot (ca296d32ece3, v6.17)")
    assert wrote["consumed"] == wrote["read_events"], \
        f"trace_pipe gave {wrote['consumed']} of the {wrote['read_events']} events before the reboot"
    shown = read["read_back"]
    assert shown == sorted(shown), f"the read events came back out of order: {shown}"
    check("rewound", 0 in shown,
          f"after a warm reboot `trace` shows {len(shown)} of the {wrote['consumed']} events "
          f"consumed before it{', from ' + str(shown[0]) if shown else ''}; the oldest (0) "
          "must come back (rb_meta_validate_events() rewinds over the sub-buffers read; "
          f"boot log: {read['last_boot_info']!r})", shown=len(shown),
          first_shown=shown[0] if shown else -1, consumed=wrote["consumed"])
