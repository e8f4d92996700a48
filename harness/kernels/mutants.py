"""The mutant catalog of `./lab mutate` (kernels/mutants/): each mutant is a rule plus a patch
per kernel tree it has been made for.

Why a patch per tree: a mutant breaks one ABI rule in the code of the ring-buffer paths, and
that code moves between kernel lines (7.x split perf_mmap() into perf_mmap_rb(),
perf_mmap_aux(), ...). A diff made against 6.12 stops applying to 7.2; if the catalog kept one
diff per mutant, moving the suite to a newer tree would either drop mutants (the catalog
silently shrinks, and the kill rate looks better than it is) or make every run fail. So:

- `NNN-name.patch` is the mutant: its header (`Rule:`, `Tests:`, `Fixes-revert:`, `Trees:`)
  and the diff against the catalog's base tree (Debian's linux-source-6.12 6.12.107);
- `NNN-name.<VERSION.PATCHLEVEL>.patch` (e.g. `001-perf-mmap-accepts-3-data-pages.7.2.patch`)
  is the same mutant made against another tree (7.2: Debian's linux-source-7.2 7.2.13): only
  a diff, perhaps after a line or two of comment. The rule and the tests stay in one place,
  so a variant cannot claim another rule than its mutant.

On a tree, each mutant uses the variant that applies there (`git apply --check`: line offsets,
no fuzz), the one made for the tree's version first. A mutant with no variant for the tree is
an error naming it and the tree, never a silent drop: rebase it, or leave it out with
--mutants.

A rule whose code exists only from some tree on (trace remotes: 7.x) has `Since: 7.2`: its
NNN-name.patch diff is made against that tree, and on an older tree it is left out by name,
with that reason, in the run's output (`since_split`), not tried.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness import paths
from harness.errors import LabError
from harness.kernels.series import Patch

REPO = paths.REPO
CATALOG = REPO / "kernels" / "mutants"
# The files of the ring-buffer paths the catalog's mutants patch. A mutant of a user's own
# may patch any one C file of the tree.
KERNEL_FILES = ("kernel/events/core.c", "kernel/events/ring_buffer.c",
                "kernel/trace/ring_buffer.c", "kernel/trace/trace.c",
                "kernel/trace/trace_snapshot.c", "kernel/trace/simple_ring_buffer.c",
                "kernel/trace/trace_remote.c")


@dataclass(frozen=True)
class Watchers:
    """What can see a change to a file of a folder: the explorer's paths and the kselftest
    targets (what `./lab mutate` runs on a mutant of it, as a Tests: header narrows ours)."""
    explore_paths: tuple[str, ...]
    selftest_targets: tuple[str, ...]


# One table for both: perf_events exercises kernel/events/, ring-buffer and ftrace (remotes
# included) kernel/trace/. A file of neither folder (a user's mutant of mm/mmap.c) gets all.
WATCHERS_OF_FOLDER: dict[str, Watchers] = {
    "kernel/events/": Watchers(("pinning", "perf-ring", "perf-aux"), ("perf_events",)),
    "kernel/trace/": Watchers(("trace-mmap", "trace-remote"), ("ring-buffer", "ftrace")),
}


def watchers_of_folder(file: str) -> Watchers | None:
    """The watchers of `file`'s folder (a path in the tree); None: a folder of neither."""
    return next((w for folder, w in WATCHERS_OF_FOLDER.items() if file.startswith(folder)),
                None)


# The tree the catalog's NNN-name.patch diffs are made against (the label of that variant).
BASE_TREE = "6.12"
_HEADER = re.compile(r"^(Rule|Fixes-revert|Tests|Trees|Since):[ \t]*(.*)$")
_DIFF_START = re.compile(r"^(diff --git |--- )")
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)|^\+\+\+ b/(\S+)")
# NNN-name.7.2.patch: a variant; its stem minus the label is its mutant's id.
_VARIANT = re.compile(r"^(?P<id>.+?)\.(?P<label>\d+\.\d+)\.patch$")
_MAKE_VERSION = re.compile(r"^(VERSION|PATCHLEVEL)\s*=\s*(\d+)\s*$", re.M)
HINT = "rebase the mutant on this tree, or leave it out with --mutants"


class MutantError(LabError):
    """A mutant of the catalog is malformed or does not apply to the tree."""


@dataclass(frozen=True)
class Variant:
    """One mutant's diff made against one tree."""
    label: str     # the tree it was made against: "6.12" (the catalog's base), "7.2"
    path: Path
    file: str      # the kernel file it patches
    text: str


@dataclass(frozen=True)
class Mutant:
    """One mutant of the catalog and what it claims to break. `path`, `file` and `text` are
    those of the variant in use: the base one as read, the tree's once `for_tree` chose."""
    id: str                  # the file name without .patch: "001-perf-mmap-accepts-3-pages"
    path: Path
    file: str                # the kernel file it patches
    rule: str                # the ABI rule it breaks, citing the uapi header or function
    fixes_revert: str | None  # the upstream fix it reverts, if it is one
    tests: str | None        # a -k expression narrowing the tests run for it
    text: str
    trees: str | None = None  # the Trees: note: where the rule (or its code path) does not exist
    variants: tuple[Variant, ...] = ()  # every diff of the mutant, the base one first
    variant: str = BASE_TREE  # the label of the variant path/file/text are
    since: str | None = None  # Since: the first tree with the rule's code (its base diff's)

    def chosen(self, v: Variant) -> Mutant:
        """This mutant with `v` as the diff to apply."""
        return dataclasses.replace(self, path=v.path, file=v.file, text=v.text,
                                   variant=v.label)


def _diff_file(path: Path, text: str) -> str:
    """The one C file of the tree that a mutant's diff patches. One .c file: a mutant is
    reverted by putting that file back and dropping its one object (workspace.drop_object);
    a header's change would leave every object that includes it mutated."""
    files = sorted({next(g for g in m.groups()[1:] if g) for m in
                    (_DIFF_FILE.match(line) for line in text.splitlines()) if m})
    if not files:
        raise MutantError(f"mutant {path}: holds no diff")
    if len(files) != 1 or not files[0].endswith(".c"):
        raise MutantError(f"mutant {path}: patches {', '.join(files)}; a mutant patches one "
                          "C file (.c) of the tree: its object is what is rebuilt and dropped")
    return files[0]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as e:
        raise MutantError(f"mutant {path}: cannot read it: {e.strerror}") from None


def _headers(path: Path, text: str) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in text.splitlines():
        if _DIFF_START.match(line):
            break
        if (m := _HEADER.match(line)):
            if m.group(1) in headers:
                raise MutantError(f"mutant {path}: the header {m.group(1)}: is given twice")
            headers[m.group(1)] = m.group(2).strip()
    return headers


def parse(path: Path) -> Mutant:
    """A mutant from its patch file (the base variant only); a MutantError names the file
    and what is wrong."""
    text = _read(path)
    headers = _headers(path, text)
    if not headers.get("Rule"):
        raise MutantError(f"mutant {path}: no `Rule:` line before the diff (which ABI rule "
                          "it breaks)")
    file = _diff_file(path, text)
    since = headers.get("Since") or None
    if since is not None and not re.fullmatch(r"\d+\.\d+", since):
        raise MutantError(f"mutant {path}: Since: {since!r}; expected a tree version such as 7.2")
    label = since or BASE_TREE
    return Mutant(path.stem, path, file, headers["Rule"], headers.get("Fixes-revert") or None,
                  headers.get("Tests") or None, text, headers.get("Trees") or None,
                  (Variant(label, path, file, text),), label, since)


def parse_variant(path: Path, label: str) -> Variant:
    """One `NNN-name.<label>.patch`: a diff, without the mutant's header (which lives in
    NNN-name.patch only, so the two cannot disagree on the rule)."""
    text = _read(path)
    if (given := sorted(_headers(path, text))):
        raise MutantError(f"mutant variant {path}: has a {given[0]}: header; the rule, tests "
                          f"and notes of a mutant are in its NNN-name.patch only")
    return Variant(label, path, _diff_file(path, text), text)


def with_variants(mutant: Mutant) -> Mutant:
    """`mutant` with its NNN-name.<label>.patch siblings, ordered by label."""
    found = []
    for p in mutant.path.parent.glob(f"{glob_escape(mutant.id)}.*.patch"):
        m = _VARIANT.match(p.name)
        if m and m.group("id") == mutant.id:
            found.append(parse_variant(p, m.group("label")))
    found.sort(key=lambda v: _version_key(v.label))
    return dataclasses.replace(mutant, variants=mutant.variants[:1] + tuple(found))


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def _version_key(label: str) -> tuple[int, ...]:
    return tuple(int(x) for x in label.split("."))


def catalog(folder: Path = CATALOG) -> list[Mutant]:
    """Every mutant of `folder` with its variants, by id; ids (and their NNN numbers) are
    unique, and every variant belongs to a mutant."""
    bases = [p for p in sorted(folder.glob("*.patch")) if not _VARIANT.match(p.name)]
    mutants = [with_variants(parse(p)) for p in bases]
    if not mutants:
        raise MutantError(f"{folder}: no mutants (*.patch)")
    seen: dict[str, Path] = {}
    for m in mutants:
        number = m.id.split("-", 1)[0]
        if number in seen:
            raise MutantError(f"mutant {m.path}: number {number} is also {seen[number]}")
        seen[number] = m.path
    ids = {m.id for m in mutants}
    for p in sorted(folder.glob("*.patch")):
        v = _VARIANT.match(p.name)
        if v and v.group("id") not in ids:
            raise MutantError(f"mutant variant {p}: there is no {v.group('id')}.patch (the "
                              "mutant whose rule it breaks)")
    return mutants


def select(mutants: list[Mutant], spec: str | None) -> list[Mutant]:
    """--mutants: comma-separated id globs ("00[1-5]*", "012"), kernel files
    ("kernel/trace/trace.c", "trace.c"), or patch files outside the catalog."""
    if not spec:
        return mutants
    chosen: dict[str, Mutant] = {}
    for word in (w.strip() for w in spec.split(",") if w.strip()):
        if word.endswith(".patch") and Path(word).is_file():
            m = with_variants(parse(Path(word).resolve()))
            chosen[m.id] = m
            continue
        found = [m for m in mutants if fnmatch.fnmatch(m.id, word)
                 or m.id.split("-", 1)[0] == word
                 or any(v.file == word or Path(v.file).name == word for v in m.variants)
                 or fnmatch.fnmatch(m.id, f"{word}-*")]
        if not found:
            raise MutantError(f"--mutants {word}: matches no mutant of {CATALOG} (ids like "
                              f"{mutants[0].id}, or a file one patches: "
                              f"{', '.join(KERNEL_FILES)})")
        chosen.update((m.id, m) for m in found)
    return sorted(chosen.values(), key=lambda m: m.id)


# --- choosing a variant for a tree --------------------------------------------------------

def tree_version(tree: Path) -> str | None:
    """"7.2" from the tree's top Makefile (VERSION, PATCHLEVEL); None if it has none."""
    try:
        found = dict(_MAKE_VERSION.findall((tree / "Makefile").read_text(errors="replace")
                                           [:4000]))
    except OSError:
        return None
    if "VERSION" in found and "PATCHLEVEL" in found:
        return f"{found['VERSION']}.{found['PATCHLEVEL']}"
    return None


def git_apply(text: str, tree: Path, *flags: str) -> subprocess.CompletedProcess:
    """`git apply` of a diff in `tree` (a plain folder): line offsets, no fuzz."""
    # GIT_CEILING_DIRECTORIES: never take a repository above the copy for the one to patch.
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tree.parent)}
    return subprocess.run(["git", "apply", "--whitespace=nowarn", *flags, "-"],
                          input=text, cwd=tree, capture_output=True, text=True, env=env)


def rejection(v: Variant, stderr: str) -> str:
    """Where and why `v` did not apply, with the rejected hunk when git names it."""
    m = re.search(r"error: patch failed: (\S+):(\d+)", stderr)
    hunk = Patch(v.path.name, v.text, v.path).hunk(m.group(1), int(m.group(2))) if m else None
    where = f" at {m.group(1)}:{m.group(2)}" if m else ""
    return (f"{v.path.name}{where}: " + "; ".join(stderr.strip().splitlines()[:2])
            + (f"\nrejected hunk:\n{hunk}" if hunk else ""))


def _ordered(mutant: Mutant, version: str | None) -> list[Variant]:
    """The variants to try on a tree of `version`: the one made for it first, then the rest
    in catalog order (base, then by label)."""
    return sorted(mutant.variants, key=lambda v: v.label != version)


def for_tree(mutant: Mutant, tree: Path, shown_as: Path | None = None) -> Mutant:
    """`mutant` with the variant that applies to `tree` (`shown_as` names the tree in the
    error: the user's tree rather than the lab's copy of it). A MutantError names the mutant,
    the tree, each variant's rejection and the Trees: note if none applies."""
    version = tree_version(tree)
    tried = []
    for v in _ordered(mutant, version):
        p = git_apply(v.text, tree, "--check")
        if p.returncode == 0:
            return mutant.chosen(v)
        tried.append(rejection(v, p.stderr))
    made = ", ".join(v.label for v in mutant.variants)
    note = f"\nTrees: {mutant.trees}" if mutant.trees else ""
    raise MutantError(f"mutant {mutant.id} has no patch for the tree {shown_as or tree}"
                      f"{f' ({version})' if version else ''}: made for {made}; "
                      + "\n".join(tried) + note, hint=HINT)


def since_split(mutants: list[Mutant], tree: Path) -> tuple[list[Mutant], list[str]]:
    """The mutants whose rule exists on `tree`, and a line for each left out because its
    code is newer than the tree (its Since:)."""
    version = tree_version(tree)
    if version is None:
        return mutants, []
    kept, left = [], []
    for m in mutants:
        if m.since and _version_key(version) < _version_key(m.since):
            left.append(f"{m.id}: left out on this {version} tree: its code is new in "
                        f"{m.since} (Since:)")
        else:
            kept.append(m)
    return kept, left


def for_tree_all(mutants: list[Mutant], tree: Path, shown_as: Path | None = None
                 ) -> list[Mutant]:
    """Every mutant with its variant for `tree`; one MutantError naming every mutant that has
    none (so one run shows them all, before hours of builds are spent)."""
    out, errors = [], []
    for m in mutants:
        try:
            out.append(for_tree(m, tree, shown_as))
        except MutantError as e:
            errors.append(e.message)
    if errors:
        ids = [e.split(" ", 2)[1] for e in errors]
        raise MutantError(f"{len(errors)} mutant(s) have no patch for the tree "
                          f"{shown_as or tree}: {', '.join(ids)}\n" + "\n".join(errors),
                          hint=HINT)
    return out
