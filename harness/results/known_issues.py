"""Known kernel issues: ABI violations the lab has found, turned into expected failures.

kernels/known-issues.yaml lists each issue with the tests it fails, the kernel releases it
applies to, a reason and a link. On a listed kernel those tests run as strict xfail: the
failure shows with its reason, and a pass (the kernel got fixed) fails the run so the list gets
updated. On a kernel outside the listed versions the same failure stays a failure.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.config import _Reader
from harness.errors import ConfigError

KNOWN_ISSUES = Path(__file__).resolve().parents[2] / "kernels" / "known-issues.yaml"
_CLAUSE = re.compile(r"^\s*(?P<op>>=|<=|==|<|>)\s*(?P<v>\d+(?:\.\d+){0,2})\s*$")
_RELEASE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")


def release_version(release: str) -> tuple[int, int, int] | None:
    """(6, 12, 107) for '6.12.107+deb13-cloud-amd64'."""
    m = _RELEASE.match(release)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


def _version(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


@dataclass(frozen=True)
class VersionRange:
    """Comma-separated clauses, all of which must hold: '>=6.12.105, <6.13'."""
    text: str

    def contains(self, version: tuple[int, int, int]) -> bool:
        for clause in self.text.split(","):
            m = _CLAUSE.match(clause)
            assert m, clause  # checked when loaded
            v, op = _version(m.group("v")), m.group("op")
            ok = {">=": version >= v, "<=": version <= v, "==": version == v,
                  "<": version < v, ">": version > v}[op]
            if not ok:
                return False
        return True


@dataclass(frozen=True)
class KnownIssue:
    id: str
    tests: tuple[str, ...]          # test node ids, fnmatch patterns allowed
    versions: tuple[VersionRange, ...]
    reason: str
    link: str

    def applies(self, nodeid: str, release: str) -> bool:
        version = release_version(release)
        if version is None or not any(r.contains(version) for r in self.versions):
            return False
        return any(fnmatch.fnmatchcase(nodeid, t) for t in self.tests)

    @property
    def summary(self) -> str:
        return f"known kernel issue {self.id}: {self.reason} ({self.link})"


def load(path: Path = KNOWN_ISSUES) -> list[KnownIssue]:
    """The list, validated; ConfigError naming the file and key on a mistake."""
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    r = _Reader(path)
    top = r.mapping(doc, "", {"issues"}, {"issues"})
    if not isinstance(top["issues"], list):
        raise r.fail("issues", "a list of issues", top["issues"])
    out, seen = [], set()
    for i, item in enumerate(top["issues"]):
        out.append(_issue(r, item, f"issues[{i}]"))
        if out[-1].id in seen:
            raise r.fail(f"issues[{i}].id", "an id used once", out[-1].id)
        seen.add(out[-1].id)
    return out


def _issue(r: _Reader, item: Any, key: str) -> KnownIssue:
    d = r.mapping(item, key, {"id", "tests", "versions", "reason", "link"},
                  {"id", "tests", "versions", "reason", "link"})
    tests = _strings(r, d["tests"], f"{key}.tests", "a list of test node ids")
    ranges = _strings(r, d["versions"], f"{key}.versions",
                      "a list of version ranges such as '>=6.12.105, <6.13'")
    for j, text in enumerate(ranges):
        if not all(_CLAUSE.match(c) for c in text.split(",")):
            raise r.fail(f"{key}.versions[{j}]", "clauses like '>=6.12.105' joined by commas",
                         text)
    return KnownIssue(r.string(d["id"], f"{key}.id"), tests,
                      tuple(VersionRange(t) for t in ranges),
                      r.string(d["reason"], f"{key}.reason"), r.string(d["link"], f"{key}.link"))


def _strings(r: _Reader, value: Any, key: str, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or \
            not all(isinstance(v, str) and v for v in value):
        raise r.fail(key, what, value)
    return tuple(value)


def matching(issues: list[KnownIssue], nodeid: str, release: str) -> KnownIssue | None:
    return next((i for i in issues if i.applies(nodeid, release)), None)
