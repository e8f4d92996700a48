"""Profiles booted ahead (harness/guest/warm.py): each profile without a snapshot is booted once,
in the background, and a process that wants it meanwhile waits instead of booting it again."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.guest import warm


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> SimpleNamespace:
    """guest.boot saves a 'snapshot' (a file named after the plan) after a short boot."""
    state = SimpleNamespace(boots=[], root=tmp_path)

    class Booted:
        def __init__(self, plan: SimpleNamespace) -> None:
            time.sleep(0.05)
            state.boots.append(plan.name)
            (tmp_path / plan.name).touch()

        def __enter__(self) -> Booted:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    monkeypatch.setattr(warm.guests, "boot", Booted)
    monkeypatch.setattr(warm.guests, "snapshot_key",
                        lambda plan: SimpleNamespace(digest=lambda: plan.name))
    monkeypatch.setattr(warm.snapshot, "find",
                        lambda root, key: (root / key.digest()) if (root / key.digest()).exists()
                        else None)
    return state


def _plan(name: str, root: Path) -> SimpleNamespace:
    return SimpleNamespace(name=name, snapshots=root, cpus=1, memory_mb=1024, cmdline="")


def test_profiles_without_a_snapshot_boot_once_each_in_the_background(fake: SimpleNamespace
                                                                       ) -> None:
    (fake.root / "saved").touch()
    w = warm.Warmer()
    started = w.start([_plan(n, fake.root) for n in ("a", "b", "saved", "a")])  # type: ignore[misc]
    assert [p.name for p in started] == ["a", "b"]
    deadline = time.monotonic() + 5
    while len(fake.boots) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    w.wait_all()
    assert fake.boots == ["a", "b"]  # one after the other, in the order asked


def test_a_profile_not_begun_is_taken_back_for_its_test(fake: SimpleNamespace) -> None:
    w = warm.Warmer()
    w.start([_plan(n, fake.root) for n in ("a", "b", "c")])  # type: ignore[misc]
    w.wait(_plan("c", fake.root))  # type: ignore[arg-type]
    w.wait_all()
    assert "c" not in fake.boots


def test_a_second_process_waits_for_the_cold_boot_and_restores(fake: SimpleNamespace) -> None:
    plan = _plan("p", fake.root)
    order: list[str] = []

    def first() -> None:
        with warm.cold_boot_lock(plan) as cold:  # type: ignore[arg-type]
            order.append(f"first cold={cold}")
            time.sleep(0.2)
            (fake.root / "p").touch()

    t = threading.Thread(target=first)
    t.start()
    time.sleep(0.05)
    with warm.cold_boot_lock(plan) as cold:  # type: ignore[arg-type]
        order.append(f"second cold={cold}")
    t.join()
    assert order == ["first cold=True", "second cold=False"]
