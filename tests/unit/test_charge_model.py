"""The perf_mmap() charging model the pinning tests use, on cases worked out from
kernel/events/core.c and one measured on a 2-CPU 6.18 host."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernel"))
from charge_model import ChargeModel  # noqa: E402


def model(**kw) -> ChargeModel:
    base = {"ncpus": 1, "page_kb": 4, "mlock_kb": 516, "rlimit_kb": 8192, "paranoid": 2}
    return ChargeModel(**{**base, **kw})


def run(m: ChargeModel, ops: list[str]) -> list[tuple[str, int]]:
    return [(m.step(op), m.pinned * m.page_kb) for op in ops]


def test_past_the_mlock_limit_pages_go_to_vmpin() -> None:
    # Measured: mlock 64 KB on 2 CPUs = 32 pages; 9 + 17 fit, 33 more pins 27 pages.
    m = model(ncpus=2)
    assert run(m, ["mlock=64", "as=user", "map=9", "map=17", "map=33", "unmap=2"]) == [
        ("ok", 0), ("ok", 0), ("ok", 0), ("ok", 0), ("ok", 108), ("ok", 0)]


def test_rlimit_refuses_only_without_cap_ipc_lock() -> None:
    ops = ["rlimit=64", "mlock=0", "as=user", "map=5", "map=9", "map=3", "map=2"]
    assert [r for r, _ in run(model(), ops)] == ["ok"] * 5 + ["EPERM", "ok"]
    ops[2] = "as=user+ipc_lock"
    assert "EPERM" not in [r for r, _ in run(model(), ops)]
    ops[2] = "as=user"
    assert "EPERM" not in [r for r, _ in run(model(paranoid=-1), ops)]


def test_what_the_user_already_has_counts_first() -> None:
    m = model()
    run(m, ["mlock=516", "as=user", "map=129"])      # the whole allowance, nothing pinned
    assert m.pinned == 0
    assert m.step("map=9") == "ok" and m.pinned == 9
    m.step("mlock=16")                                 # lowered: the old charge stays
    assert m.step("unmap=0") == "ok" and m.locked["lab"] == 0 and m.pinned == 9


def test_root_and_the_user_are_charged_separately() -> None:
    m = model(mlock_kb=36)                             # 9 pages
    run(m, ["as=root", "map=9", "as=user", "map=9"])
    assert m.pinned == 0 and m.locked == {"root": 9, "lab": 9}


def test_refusals_and_aux() -> None:
    m = model()
    assert [m.step(op) for op in ["map=4", "map=0", "map=9", "aux=2:8", "aux=2:3",
                                  "aux=0:8"]] == ["EINVAL", "EINVAL", "ok", "EOPNOTSUPP",
                                                  "EINVAL", "not mapped"]
    assert m.pinned == 0 and m.locked["root"] == 9


def test_an_aux_area_is_charged_like_a_data_buffer() -> None:
    # mlock 16 KB = 4 pages on 1 CPU, RLIMIT_MEMLOCK 32 KB = 8 pages.
    m = model(mlock_kb=16, rlimit_kb=32)
    assert run(m, ["as=user", "pmu-map=5", "pmu-aux=0:4", "pmu-map=2", "pmu-aux=1:2",
                   "pmu-aux=1:3", "unmap=0", "pmu-aux=1:2", "unmap=1"]) == [
        ("ok", 0), ("ok", 4), ("ok", 20), ("ok", 28), ("EPERM", 28), ("EINVAL", 28),
        ("ok", 8), ("ok", 8), ("ok", 0)]
    assert m.locked["lab"] == 0


def _pinning_module():  # tests/kernel/test_pinning.py, loaded from its file (no package)
    import importlib.util
    import sys
    kernel_tests = Path(__file__).resolve().parents[1] / "kernel"
    sys.path.insert(0, str(kernel_tests))
    spec = importlib.util.spec_from_file_location("ringlab_kernel_test_pinning",
                                                  kernel_tests / "test_pinning.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_pinning_limits_in_pages_are_the_old_kb_at_4k_and_scale_with_the_page() -> None:
    in_kb = _pinning_module().in_kb
    ops = ["mlock=129p", "rlimit=12p", "mlock=0", "map=65", "as=user"]
    assert in_kb(ops, 4096) == ["mlock=516", "rlimit=48", "mlock=0", "map=65", "as=user"]
    assert in_kb(ops, 16384)[:2] == ["mlock=2064", "rlimit=192"]
    assert in_kb(ops, 65536)[:2] == ["mlock=8256", "rlimit=768"]


def test_a_second_mapping_charges_nothing() -> None:
    m = model(mlock_kb=64)
    assert [m.step(op) for op in ("map=9", "remap=0", "remap=0")] == ["ok"] * 3
    assert m.locked["root"] == 9 and m.pinned == 0
    m.step("unmap=0")
    assert m.locked["root"] == 0 and m.pinned == 0
    assert m.step("remap=0") == "not mapped"


def test_a_second_aux_mapping_charges_nothing() -> None:
    m = model(mlock_kb=64)
    assert [m.step(op) for op in ("pmu-map=3", "pmu-aux-again=0", "pmu-aux=0:4",
                                  "pmu-aux-again=0")] == ["ok", "not mapped", "ok", "ok"]
    assert m.locked["root"] == 7
    m.step("unmap=0")
    assert m.locked["root"] == 0
