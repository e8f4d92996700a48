"""Kernel configs and config fragments: parse them, merge fragments over a base (as
scripts/kconfig/merge_config.sh does: a later line for a symbol wins, with a warning when it
changes the value), and say which requested
options did not survive `make olddefconfig` (unmet dependencies) or name no symbol at all.

Pure functions over text, so they are unit tested; kbuild.py runs make around them.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import BuildError

_SET = re.compile(r"^CONFIG_(?P<sym>[A-Za-z0-9_]+)=(?P<value>.*)$")
_UNSET = re.compile(r"^# CONFIG_(?P<sym>[A-Za-z0-9_]+) is not set$")
_DEFINES = re.compile(r"^\s*(?:menu)?config\s+(?P<sym>[A-Za-z0-9_]+)\s*$", re.M)


@dataclass(frozen=True)
class Option:
    """One line of a fragment: CONFIG_<symbol>=<value> ('n' for '# ... is not set')."""
    symbol: str
    value: str
    source: str  # "file:line", for messages

    @property
    def line(self) -> str:
        return f"# CONFIG_{self.symbol} is not set" if self.value == "n" else \
            f"CONFIG_{self.symbol}={self.value}"


@dataclass(frozen=True)
class Dropped:
    """A requested option that olddefconfig changed (an unmet dependency, usually)."""
    option: Option
    got: str  # the value in the final .config ('n' if absent)

    def __str__(self) -> str:
        return f"{self.option.line} ({self.option.source}): got {self.got}"


def parse(text: str, source: str) -> list[Option]:
    """The options of a fragment or .config; any other non-comment line is an error."""
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if (m := _SET.match(line)) or (m := _UNSET.match(line)):
            value = m.groupdict().get("value")
            out.append(Option(m.group("sym"), "n" if value is None else value, f"{source}:{n}"))
        elif line and not line.startswith("#"):
            raise BuildError(f"{source}:{n}: not a config line: {raw.strip()!r}",
                             hint="expected CONFIG_NAME=value or '# CONFIG_NAME is not set'")
    return out


def read_fragment(path: Path) -> list[Option]:
    try:
        return parse(path.read_text(), str(path))
    except OSError as e:
        raise BuildError(f"{path}: cannot read the config fragment: {e.strerror}") from None


def values(text: str) -> dict[str, str]:
    """Symbol -> value of a .config ('n' for the 'is not set' lines)."""
    return {o.symbol: o.value for o in parse(text, ".config")}


def merge(base: str, options: list[Option]) -> str:
    """`base` with each option's line replacing any earlier line for its symbol."""
    wanted = {o.symbol: o for o in options}
    kept = [line for line in base.splitlines()
            if not ((m := _SET.match(line.strip()) or _UNSET.match(line.strip()))
                    and m.group("sym") in wanted)]
    return "\n".join(kept + [o.line for o in wanted.values()]) + "\n"


@dataclass(frozen=True)
class Redefinition:
    """A fragment line setting a symbol that the base config or an earlier fragment set to
    another value: merge_config.sh warns of it, since one of the two files is then wrong."""
    option: Option
    previous: Option

    def __str__(self) -> str:
        return (f"CONFIG_{self.option.symbol} redefined by {self.option.source} (was "
                f"{self.previous.value} at {self.previous.source}, now {self.option.value})")


def redefinitions(base: list[Option], options: list[Option]) -> list[Redefinition]:
    """The fragment options (in merge order) that change a value set before them."""
    current = {o.symbol: o for o in base}
    out = []
    for o in options:
        prev = current.get(o.symbol)
        if prev is not None and prev.value != o.value:
            out.append(Redefinition(o, prev))
        current[o.symbol] = o
    return out


def dropped(options: list[Option], final: dict[str, str]) -> list[Dropped]:
    """The requested options whose value the final .config does not have."""
    out = []
    for o in {o.symbol: o for o in options}.values():
        got = final.get(o.symbol, "n")
        if got != o.value:
            out.append(Dropped(o, got))
    return out


@dataclass(frozen=True)
class KconfigFiles:
    """What a tree's Kconfig files say, from one walk of the tree."""
    symbols: frozenset[str]  # every symbol they define
    digest: str              # of their names and contents: olddefconfig's input besides .config


def scan(tree: Path) -> KconfigFiles:
    """The tree's Kconfig files: the symbols they define (for telling an unknown symbol, a
    typo, from one whose dependencies are not met) and a digest of them (a changed Kconfig
    means the config step must run again)."""
    found: set[str] = set()
    h = hashlib.sha256()
    for dirpath, dirnames, files in os.walk(tree):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for f in sorted(files):
            if f.startswith("Kconfig"):
                try:
                    text = (Path(dirpath) / f).read_text(errors="replace")
                except OSError:
                    continue
                h.update(f"{Path(dirpath, f).relative_to(tree)}\0{text}\0".encode())
                found.update(m.group("sym") for m in _DEFINES.finditer(text))
    return KconfigFiles(frozenset(found), h.hexdigest()[:16])


def symbols(tree: Path) -> set[str]:
    """Every symbol a Kconfig file of the tree defines."""
    return set(scan(tree).symbols)


def unknown(options: list[Option], known: set[str]) -> list[Option]:
    return [o for o in options if o.symbol not in known]
