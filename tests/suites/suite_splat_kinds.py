"""A suite for tests/e2e: one test per kind of splat `ringlab_splat` can fire (its `fire`
parameter). Every test's own assertions pass; each must fail all the same, with the splat's
title, because the kernel reported a bug during it. A kind this kernel's config cannot fire
(`parameters/fire` does not list it) is skipped with that reason. Each test gets a fresh guest:
an Oops leaves a dead kernel thread, a hung task a D-state one."""
from __future__ import annotations

import time

import pytest

from harness.guest.guest import Guest
from harness.resources import Lab

FIRE = "/sys/module/ringlab_splat/parameters/fire"
# The title each kind must get, the same on every kernel line (harness/kernellog/splats.py
# title()): tests/e2e/test_splats_every_kernel.py and tests/unit/kernellog/test_splats.py hold them to it.
TITLES = {
    "warn": r"WARNING at \S*ringlab_splat\.c:\d+ ringlab_splat_warn",
    "bug": r"kernel BUG at \S*ringlab_splat\.c:\d+",
    "null": r"BUG: kernel NULL pointer dereference in fire_null",
    "refcount": r"refcount_t: addition on 0; use-after-free in fire_refcount",
    "list": r"list_add corruption\. next->prev should be prev in fire_list",
    "alloc": r"vmalloc error in fire_alloc",
    "ubsan": r"UBSAN: array-index-out-of-bounds at \S*ringlab_splat\.c:\d+",
    "kasan": r"KASAN: slab-out-of-bounds in fire_kasan",
    "lockdep": r"WARNING: possible circular locking dependency detected",
    "hung": r"INFO: task ringlab_hung blocked in fire_hung",
    "race": r"KCSAN: data-race in ringlab_splat_race_read / ringlab_splat_race_tick",
}
# Kinds every kernel the lab runs must fire: no config option of theirs is optional on a
# kernel with modules (the others need UBSAN_BOUNDS, KASAN, PROVE_LOCKING, DEBUG_LIST, KCSAN).
ALWAYS = ("warn", "bug", "null", "refcount", "alloc", "hung")

# Kinds reported from a kernel thread of the module's, after the writer got its answer: the
# test waits for the report so it lands in the test's own log.
SETTLE_S = {"bug": 1.0, "null": 1.0, "list": 1.0, "hung": 9.0}


@pytest.mark.guest(fresh=True)
@pytest.mark.parametrize("kind", TITLES)
def test_fires(kind: str, guest: Guest, lab: Lab) -> None:
    guest.insmod(lab.module("ringlab_splat", guest.kernel.name))
    can = guest.run(f"cat {FIRE}").stdout.split()
    if kind not in can:
        pytest.skip(f"this kernel cannot fire '{kind}' (its config lacks what reports it; "
                    f"{FIRE} lists: {' '.join(can)})")
    if kind == "hung":  # report a task in D state after 2 s instead of 120
        assert guest.run("echo 2 > /proc/sys/kernel/hung_task_timeout_secs").exit_status == 0
    assert guest.run(f"echo {kind} > {FIRE}").exit_status == 0
    time.sleep(SETTLE_S.get(kind, 0.0))
