"""Known kernel issues: ABI violations the lab has found, each bound to its symptom.

kernels/known-issues.yaml names, per issue, the test and the *check within it* that shows the
issue (a check id the test records with the `check` fixture, optionally narrowed by a predicate
over the check's data, e.g. `lost_events == 0 and overrun > 0`), and/or the title of a splat
the issue causes. The test always runs in full; only a failure that matches the symptom is
excused (xfail), so a second bug in the same test still fails it (harness/results/verdicts.py).
There is no version range: the kernel is asked, not its release number. `seen_on` and
`not_seen_on` list where a run saw the issue and where it found it NOT SEEN, for the report only.
"""
from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness import paths
from harness.config import YamlReader
from harness.errors import ConfigError

KNOWN_ISSUES = paths.KNOWN_ISSUES
KEYS = {"id", "test", "checks", "when", "splats", "seen_on", "not_seen_on", "reason", "link",
        "explore", "subject", "fixes", "code", "fix"}
# For `./lab report`: `subject` the mail's subject ("perf/core: ..."), `fixes` the commit that
# introduced it as a Fixes: tag wants it (12 hex digits, then ("its subject")), `code` the
# functions responsible ("kernel/events/core.c:perf_mmap_rb"), `fix` a series folder.
FIXES = re.compile(r'^[0-9a-f]{12} \("[^"]+"\)$')
CODE = re.compile(r"^[\w./-]+\.[ch]:\w+$")
# `explore:` binds a failure of `./lab explore` to the issue: its path, the check that failed
# (fnmatch; "splat" with the issue's `splats`), and what the shrunk sequence did (a trait the
# model names, any of them), e.g. {paths: [pinning], checks: [allowance], traits: [mapped-again]}
EXPLORE_KEYS = {"paths", "checks", "traits"}
EXPLORE_REPLAY = "tests/kernel/test_explore_replay.py::test_kept_failure"
# What a `when` predicate may be made of: comparisons, and/or/not, arithmetic, names, literals.
_PREDICATE_NODES = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not,
                    ast.USub, ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
                    ast.In, ast.NotIn, ast.Is, ast.IsNot, ast.BinOp, ast.Add, ast.Sub,
                    ast.Mult, ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.List)


@dataclass(frozen=True)
class CheckFailure:
    """One check a test recorded as failed: its id, the message, and what it observed."""
    id: str
    message: str
    data: dict[str, Any]


@dataclass(frozen=True)
class KnownIssue:
    id: str
    tests: tuple[str, ...]        # test node ids, fnmatch patterns allowed
    checks: tuple[str, ...]       # check ids (fnmatch) whose failure is the symptom
    when: str | None              # and a predicate over that check's data
    splats: tuple[str, ...]       # regexes over the title of a splat the issue causes
    seen_on: tuple[str, ...]      # releases it was seen on: a hint for the report
    reason: str
    link: str
    not_seen_on: tuple[str, ...] = ()  # releases a run found it NOT SEEN on (report only)
    explore_paths: tuple[str, ...] = ()
    explore_checks: tuple[str, ...] = ()
    explore_traits: tuple[str, ...] = ()
    subject: str = ""             # for ./lab report
    fixes: str = ""
    code: tuple[str, ...] = ()
    fix: str = ""                 # a series folder, relative to the project

    def covers(self, nodeid: str) -> bool:
        """Its tests, and the suite's replays of the explore failures kept as this issue's
        (tests/kernel/explore/<issue id>--*.json)."""
        if self.explore_checks and fnmatch.fnmatchcase(nodeid, f"{EXPLORE_REPLAY}[[]{self.id}--*]"):
            return True
        return any(fnmatch.fnmatchcase(nodeid, t) for t in self.tests)

    def explains_check(self, failure: CheckFailure) -> bool:
        if failure.id.startswith("explore:"):   # a kept explore failure replayed
            return self.explains_explore(failure.data.get("path", ""), failure.id[8:],
                                         failure.data.get("traits", []))
        if not any(fnmatch.fnmatchcase(failure.id, c) for c in self.checks):
            return False
        return self.when is None or predicate_holds(self.when, failure.data)

    def explains_splat(self, title: str) -> bool:
        return any(re.search(p, title) for p in self.splats)

    def explains_explore(self, path: str, check: str, traits: list[str] | tuple[str, ...],
                         splat: str | None = None, got: object = None) -> bool:
        """A failure `./lab explore` found is this issue: its path and check are the entry's
        `explore:` ones, its shortest sequence did one of the traits, and a splat is one of
        the entry's `splats`."""
        if not self.explore_checks or path not in self.explore_paths:
            return False
        if not any(fnmatch.fnmatchcase(check, c) for c in self.explore_checks):
            return False
        if self.explore_traits and not set(traits) & set(self.explore_traits):
            return False
        return splat is None or self.explains_splat(splat)

    @property
    def summary(self) -> str:
        seen = f"; seen on {', '.join(self.seen_on)}" if self.seen_on else ""
        if self.not_seen_on:
            seen += f"; not seen on {', '.join(self.not_seen_on)}"
        return f"known kernel issue {self.id}: {self.reason} ({self.link}{seen})"


# `--known-issues none` (pytest, bisect --known-issues-fail): no issue excused, a known bug's
# symptom fails its test.
NONE = "none"
_NAMED = re.compile(r"known kernel issue ([\w.+-]+):")    # "A+B": two at once (explore)


def named_in(reason: str) -> str | None:
    """The known issue an xfailed test's reason names (KnownIssue.summary's "known kernel
    issue ID: ..."), or None."""
    m = _NAMED.search(reason)
    return m.group(1) if m else None


def predicate_holds(expression: str, data: dict[str, Any]) -> bool:
    """The `when` predicate over a check's data; a name the data lacks makes the clause of
    `and`/`or` it is in false (the symptom is not the one described), never an error in the
    middle of a run. So an issue with several checks can hold one clause for each check's
    data: `entries > 0 or (late > 0 and early == 0)`."""
    try:
        return _holds(ast.parse(expression, mode="eval").body, dict(data))
    except (TypeError, ValueError, ArithmeticError):
        return False


def _holds(node: ast.expr, data: dict[str, Any]) -> bool:
    if isinstance(node, ast.BoolOp):
        clauses = (_holds(v, data) for v in node.values)
        return any(clauses) if isinstance(node.op, ast.Or) else all(clauses)
    try:
        return bool(eval(compile(ast.Expression(node), "<when>", "eval"),
                         {"__builtins__": {}}, data))
    except NameError:
        return False


def load(path: Path = KNOWN_ISSUES) -> list[KnownIssue]:
    """The list, validated; ConfigError naming the file and key on a mistake."""
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    r = YamlReader(path)
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


def _issue(r: YamlReader, item: Any, key: str) -> KnownIssue:
    d = r.mapping(item, key, KEYS, {"id", "test", "reason", "link"})
    tests = _strings(r, d["test"] if isinstance(d["test"], list) else [d["test"]], f"{key}.test",
                     "a test node id (or a list of them)")
    checks = _strings(r, d.get("checks", []), f"{key}.checks", "a list of check ids", empty=True)
    splat_res = _strings(r, d.get("splats", []), f"{key}.splats",
                         "a list of regular expressions over splat titles", empty=True)
    for j, p in enumerate(splat_res):
        try:
            re.compile(p)
        except re.error as e:
            raise r.fail(f"{key}.splats[{j}]", f"a regular expression ({e})", p) from None
    if not checks and not splat_res:
        raise r.fail(key, "a symptom: `checks` (with an optional `when`) and/or `splats`",
                     got=False)
    when = d.get("when")
    if when is not None:
        if not checks:
            raise r.fail(f"{key}.when", "`checks` beside it (the predicate is over a check's "
                         "data)", when)
        _check_predicate(r, when, f"{key}.when")
    seen_on = _strings(r, d.get("seen_on", []), f"{key}.seen_on",
                       "a list of kernel releases", empty=True)
    not_seen_on = _strings(r, d.get("not_seen_on", []), f"{key}.not_seen_on",
                           "a list of kernel releases", empty=True)
    ex: dict[str, Any] = {}
    if "explore" in d:
        ex = r.mapping(d["explore"], f"{key}.explore", EXPLORE_KEYS, {"paths", "checks"})
    ex_paths = _strings(r, ex.get("paths", []), f"{key}.explore.paths", "a list of explore "
                        "paths (perf-ring, perf-aux, pinning, trace-mmap)", empty=True)
    ex_checks = _strings(r, ex.get("checks", []), f"{key}.explore.checks", "a list of check "
                         "ids", empty=True)
    ex_traits = _strings(r, ex.get("traits", []), f"{key}.explore.traits", "a list of traits",
                         empty=True)
    fixes = r.string(d["fixes"], f"{key}.fixes", FIXES, 'a commit as Fixes: names it: '
                     '0c8a4e4139ad ("perf/core: Further simplify perf_mmap()")') \
        if "fixes" in d else ""
    code = _strings(r, d.get("code", []), f"{key}.code", "a list of FILE.c:FUNCTION",
                    empty=True)
    for j, c in enumerate(code):
        if not CODE.match(c):
            raise r.fail(f"{key}.code[{j}]", "FILE.c:FUNCTION, e.g. kernel/events/core.c:"
                         "perf_mmap_rb", c)
    return KnownIssue(r.string(d["id"], f"{key}.id"), tests, checks, when, splat_res, seen_on,
                      r.string(d["reason"], f"{key}.reason"), r.string(d["link"], f"{key}.link"),
                      not_seen_on, ex_paths, ex_checks, ex_traits,
                      r.string(d["subject"], f"{key}.subject") if "subject" in d else "", fixes,
                      code, r.string(d["fix"], f"{key}.fix") if "fix" in d else "")


def _check_predicate(r: YamlReader, text: Any, key: str) -> None:
    what = "a predicate over the check's data, e.g. 'lost_events == 0 and overrun > 0'"
    if not isinstance(text, str):
        raise r.fail(key, what, text)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise r.fail(key, what, text) from None
    bad = next((n for n in ast.walk(tree) if not isinstance(n, _PREDICATE_NODES)), None)
    if bad is not None:
        raise r.fail(key, f"{what} (no {type(bad).__name__.lower()} allowed)", text)


def _strings(r: YamlReader, value: Any, key: str, what: str, empty: bool = False
             ) -> tuple[str, ...]:
    if not isinstance(value, list) or (not value and not empty) or \
            not all(isinstance(v, str) and v for v in value):
        raise r.fail(key, what, value)
    return tuple(value)


def for_test(issues: list[KnownIssue], nodeid: str) -> list[KnownIssue]:
    """The issues whose symptom may show in this test."""
    return [i for i in issues if i.covers(nodeid)]
