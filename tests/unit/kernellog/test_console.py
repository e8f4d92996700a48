"""Console parsing, on console logs kept from real ringlab guests (tests/unit/data)."""
from __future__ import annotations

from pathlib import Path

from harness.kernellog import console

DATA = Path(__file__).resolve().parents[1] / "data"


def read(name: str) -> str:
    return (DATA / name).read_text(errors="replace")


def test_real_boot_reaches_ready_without_panic() -> None:
    text = read("console-boot-6.12.log")
    assert console.find_panic(text) is None
    assert console.last_stage(text) == "ready"
    stages = [console.stage_of(line) for line in text.splitlines()]
    seen = [s for s in stages if s]
    # Stages appear in boot order.
    assert seen.index("kernel") < seen.index("initramfs") < seen.index("ready")


def test_real_panic_when_init_exits() -> None:
    text = read("console-panic-rdinit-6.12.log")
    p = console.find_panic(text)
    assert p is not None
    assert p.title.startswith("Attempted to kill init!")
    assert p.tcg_artefact is None
    assert console.last_stage(text) == "initramfs"  # "Run /bin/busybox as init process"


def test_tail_keeps_the_last_lines() -> None:
    text = read("console-panic-rdinit-6.12.log")
    tail = console.tail(text, 5).splitlines()
    assert len(tail) == 5
    assert "Kernel Offset" in tail[-1] or "end Kernel panic" in tail[-1]


def test_clean_strips_timestamp_and_controls() -> None:
    assert console.clean("[    2.666994] \x1b[0mringlab: ready\r\n") == "ringlab: ready"


def test_int3_oops_is_marked_as_tcg_artefact() -> None:
    # The shape of the MTTCG text-patching artefact (an int3 trap in kernel text, then panic).
    context = "[    7.1] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\n[    7.2] RIP: 0010:x"
    p = console.panic_in("[    7.3] Kernel panic - not syncing: Fatal exception in interrupt",
                         context)
    assert p is not None and p.tcg_artefact == "Oops: int3: 0000 [#1] PREEMPT SMP NOPTI"
    assert "Oops: int3" in p.title


def test_real_spurious_debug_exception_is_a_tcg_artefact() -> None:
    text = read("console-tcg-db-warning-6.12.log")
    artefacts = [a for a in map(console.tcg_artefact_in, text.splitlines()) if a]
    assert artefacts and "exc_debug_kernel" in artefacts[0]
    p = console.find_panic(text)
    assert p is not None and p.title.startswith("Attempted to kill init!")
    # Its panic comes ~300 lines after the warning: the VM tracks artefacts over the whole
    # boot (vm.py), not only in the panic's context window.
    assert p.tcg_artefact is None
    assert console.tcg_artefact_in("[ 1.0] WARNING: CPU: 0 PID: 1 at mm/x.c:1 foo+0x1") is None


def test_ready_marker_matches_guest_init() -> None:
    # The marker the harness waits for is the one rootfs/ringlab-init prints.
    init = (Path(__file__).resolve().parents[3] / "rootfs" / "ringlab-init").read_text()
    assert 'say "ready"' in init and console.READY == "ringlab: ready"
