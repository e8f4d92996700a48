"""The pure parts of probes/ on the host: the explorer's operations and models, the splat
banners. They are written once, stdlib-only, for the guest; the host imports the same files
instead of copying what they say (probes/ goes last on sys.path, so it shadows nothing)."""
from __future__ import annotations

import importlib
import sys
from types import ModuleType

from harness import paths


def probe_module(name: str) -> ModuleType:
    """probes/NAME.py, imported by its plain name (as the probes import each other)."""
    if str(paths.PROBES) not in sys.path:
        sys.path.append(str(paths.PROBES))
    return importlib.import_module(name)


def explore_paths() -> tuple[str, ...]:
    """The explorer's paths, as probes/probe_explore.py finds them (each explore_*.py names
    the paths it serves): a new path needs no list on the host to be kept in step."""
    return tuple(probe_module("probe_explore").PATHS)
