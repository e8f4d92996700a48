"""Splats, taint and probe output as pytest user_properties (JUnit <properties>), and the
plugins' hook wrappers in pytest's new style."""
from __future__ import annotations

import inspect
import json
from types import SimpleNamespace

import pytest

from harness import pytest_plugin
from harness.pytest_plugin.guests import GUEST_KEY, START_KEY, Start
from harness.pytest_plugin.observation import PROPERTY_CHARS, properties
from harness.pytest_plugin.record import Record


def _item(probe_log: list) -> SimpleNamespace:
    stash = pytest.Stash()
    stash[GUEST_KEY] = SimpleNamespace(probe_log=probe_log)  # type: ignore[assignment]
    stash[START_KEY] = Start(kernel_log=0, probe_log=1, taint=0)  # one probe ran before
    return SimpleNamespace(stash=stash, user_properties=[])


def test_splats_taint_and_probes_become_short_properties() -> None:
    result = SimpleNamespace(duration_s=0.1234, data={"big": "x" * 5000})
    item = _item([("probe_old", (), "root", result),
                  ("probe_trace_mmap", ("--case", "map"), "lab", result)])
    rec = Record(splats=[{"title": "WARNING at kernel/trace/trace.c:8274 f+0x51/0x70",
                          "rip": "f+0x51/0x70", "text": "long" * 1000,
                          "decoded": ["f (kernel/trace/trace.c:8274)"]}],
                 taint=[0, 512])
    props = dict(properties(item, rec))  # type: ignore[arg-type]
    assert json.loads(props["ringlab_splats"]) == [
        {"title": "WARNING at kernel/trace/trace.c:8274 f+0x51/0x70", "rip": "f+0x51/0x70",
         "at": "f (kernel/trace/trace.c:8274)"}]
    assert json.loads(props["ringlab_taint"]) == [0, 512]
    probe = json.loads(props["ringlab_probe"])
    assert probe["probe"] == "probe_trace_mmap" and probe["user"] == "lab"
    assert probe["args"] == ["--case", "map"] and probe["s"] == 0.12
    assert len(probe["output"]) == PROPERTY_CHARS
    assert all(len(v) < 1000 for v in props.values())


def test_a_quiet_test_has_no_properties() -> None:
    assert properties(_item([]), Record()) == []  # type: ignore[arg-type]


def test_every_hook_wrapper_of_the_plugins_is_new_style() -> None:
    classes = [c for m in (pytest_plugin.guests, pytest_plugin.observation,
                           pytest_plugin.verdict, pytest_plugin.health, pytest_plugin.ledger,
                           pytest_plugin.phases, pytest_plugin.html)
               for _, c in inspect.getmembers(m, inspect.isclass) if c.__module__ == m.__name__]
    hooks = [f for c in classes for name, f in inspect.getmembers(c, inspect.isfunction)
             if name.startswith("pytest_") and inspect.isgeneratorfunction(f)]
    assert hooks, "the plugins have hook wrappers"
    for f in hooks:
        impl = getattr(f, "pytest_impl", {})
        assert impl.get("wrapper") and not impl.get("hookwrapper"), f.__name__
