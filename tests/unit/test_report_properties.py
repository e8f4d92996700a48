"""Splats, taint and probe output as pytest user_properties (JUnit <properties>), and the
plugin's hook wrappers in pytest's new style."""
from __future__ import annotations

import inspect
import json
from types import SimpleNamespace

import pytest

from harness import pytest_plugin
from harness.pytest_plugin import GUEST_KEY, PROBE_MARK_KEY, PROPERTY_CHARS, _properties


def _item(probe_log: list) -> SimpleNamespace:
    stash = pytest.Stash()
    stash[GUEST_KEY] = SimpleNamespace(probe_log=probe_log)  # type: ignore[assignment]
    stash[PROBE_MARK_KEY] = 1  # the first probe ran before this test
    return SimpleNamespace(stash=stash, user_properties=[])


def test_splats_taint_and_probes_become_short_properties() -> None:
    result = SimpleNamespace(duration_s=0.1234, data={"big": "x" * 5000})
    item = _item([("probe_old", (), "root", result),
                  ("probe_trace_mmap", ("--case", "map"), "lab", result)])
    report = SimpleNamespace(
        ringlab_splats=[{"title": "WARNING at kernel/trace/trace.c:8274 f+0x51/0x70",
                         "rip": "f+0x51/0x70", "text": "long" * 1000,
                         "decoded": ["f (kernel/trace/trace.c:8274)"]}],
        ringlab_taint=[0, 512])
    props = dict(_properties(item, report))  # type: ignore[arg-type]
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
    assert _properties(_item([]), SimpleNamespace()) == []  # type: ignore[arg-type]


def test_every_hook_wrapper_of_the_plugin_is_new_style() -> None:
    hooks = [f for name, f in inspect.getmembers(pytest_plugin.LabSession, inspect.isfunction)
             if name.startswith("pytest_") and inspect.isgeneratorfunction(f)]
    assert hooks, "the plugin has hook wrappers"
    for f in hooks:
        impl = getattr(f, "pytest_impl", {})
        assert impl.get("wrapper") and not impl.get("hookwrapper"), f.__name__
