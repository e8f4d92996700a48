"""Lab.rootfs_ahead(): the guest image made in a thread while the kernel is fetched; the first
boot's rootfs() waits for it and gets the same image, made once; a failure ahead is met again
(and said) by the boot's own call."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import arch as arches
from harness.guest.ssh import ClientKey
from harness.resources import Lab


def lab(monkeypatch: pytest.MonkeyPatch, ensure: Callable[..., str]) -> Lab:
    the_lab = object.__new__(Lab)
    the_lab._rootfs = {}
    the_lab._rootfs_lock = threading.Lock()
    the_lab._key = ClientKey(Path("/nonexistent"), "ecdsa-sha2-nistp256 AAAA ringlab")
    the_lab.config = SimpleNamespace(rootfs=None, mirror=None)  # type: ignore[assignment]
    the_lab.cache_root = Path("/nonexistent")
    monkeypatch.setattr("harness.resources.host.require", lambda tools: None)
    monkeypatch.setattr("harness.resources.rootfs.ensure", ensure)
    return the_lab


def test_the_boot_waits_for_the_image_made_ahead_and_it_is_made_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    making = threading.Event()

    def ensure(*a: object, **k: object) -> str:
        calls.append(threading.current_thread().name)
        making.set()
        time.sleep(0.2)
        return "image"

    the_lab = lab(monkeypatch, ensure)
    ahead = the_lab.rootfs_ahead(arches.DEFAULT)
    assert making.wait(10)  # the thread holds the lock, making it
    assert the_lab.rootfs(arches.DEFAULT) == "image"
    ahead.join()
    assert calls == ["rootfs-ahead"]


def test_a_failure_ahead_is_the_boots_to_say(monkeypatch: pytest.MonkeyPatch) -> None:
    def ensure(*a: object, **k: object) -> str:
        raise RuntimeError(f"mmdebstrap failed in {threading.current_thread().name}")

    the_lab = lab(monkeypatch, ensure)
    the_lab.rootfs_ahead(arches.DEFAULT).join()
    with pytest.raises(RuntimeError, match="failed in MainThread"):
        the_lab.rootfs(arches.DEFAULT)
