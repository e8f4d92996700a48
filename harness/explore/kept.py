"""The failures the explorer keeps as data (tests/kernel/explore/*.json, which every `./lab run`
replays, and `./lab report` makes reproducers of): one versioned format, written and read here
only. Format 2 (issue 41): steps with named arguments ({"id", "op", "args": {NAME: VALUE}}).
Format 1 (no "format" key): positional arguments, named on reading by the path's operations,
so a failure kept before still replays and still makes its reproducers."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import LabError
from harness.probe_modules import probe_module

FORMAT = 2


@dataclass
class KeptFailure:
    """A kept failure, in the shape the reproducer generators take (FailureLike)."""
    path: str
    check: str
    setup: dict
    steps: list[dict]               # named arguments, whatever format the file had
    why: str
    traits: list[str] = field(default_factory=list)
    found: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    format: int = FORMAT            # of the file it was read from

    def as_doc(self) -> dict:
        return {"format": FORMAT, "path": self.path, "check": self.check, "setup": self.setup,
                "steps": self.steps, "traits": self.traits, "found": self.found,
                "why": self.why}


def load(file: Path) -> KeptFailure:
    """A kept failure of any format; a file that is not one is named in the error."""
    try:
        doc = json.loads(file.read_text())
        version = doc.get("format", 1)
        if version not in (1, FORMAT):
            raise LabError(f"{file}: format {version!r}: this ringlab reads formats 1 and "
                           f"{FORMAT}")
        world = probe_module("probe_explore").world_of(doc["path"])
        steps = probe_module("explore_ops").named(world.OPS, doc["steps"])
        return KeptFailure(doc["path"], doc["check"], doc["setup"], steps,
                           doc.get("why", file.stem), doc.get("traits", []),
                           doc.get("found", {}), format=version)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise LabError(f"{file}: not a failure the explorer kept: {type(e).__name__}: {e}") \
            from e


def dump(f: KeptFailure, file: Path) -> Path:
    """The failure as format-2 JSON, written whole (a temporary file renamed)."""
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(f.as_doc(), indent=1) + "\n")
    tmp.replace(file)
    return file
