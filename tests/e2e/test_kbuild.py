"""Kernels the lab builds (slow tier, `-m kbuild`): a real build of Debian's linux-source-6.12
with minimal.config that boots and runs a probe, and a real bisect over a git history made
here that must name the commit that broke a ring-buffer mapping rule."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness import cache
from harness.bisect import revisions
from harness.kernels import trees
from harness.mutate.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
# The shipped src-6.12-min's source, version pin included: the mutant catalog is made against it.
SOURCE = yaml.safe_load((REPO / "lab.yaml").read_text())["kernels"]["src-6.12-min"]["build"][
    "debian_source"]
MINIMAL = {"debian_source": SOURCE,
           "config": {"base": "tinyconfig",
                      "fragments": [str(REPO / "kernels/fragments/minimal.config")]}}
RULE_TEST = "test_mmap_length_must_be_one_plus_power_of_two_pages"

pytestmark = [pytest.mark.e2e, pytest.mark.kbuild, pytest.mark.usefixtures("no_stray_qemu")]


def lab(*args: str, env: dict, timeout: float = 3600) -> subprocess.CompletedProcess:
    return subprocess.run(["./lab", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_a_debian_source_tree_builds_with_minimal_config_boots_and_runs_a_probe(
        tmp_path: Path, make_lab_yaml) -> None:
    cfg = make_lab_yaml(kernels={"src-min": {"build": MINIMAL}})
    env = dict(os.environ, RINGLAB_CONFIG=str(cfg))
    p = lab("build", "--kernel", "src-min", env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "src-min: 6.12." in p.stdout
    # Nothing changed: the second build is the cache's (no make at all).
    start = time.monotonic()
    p = lab("build", "--kernel", "src-min", env=env)
    assert p.returncode == 0 and "cached (nothing changed)" in p.stdout, p.stderr[-2000:]
    assert time.monotonic() - start < 60
    p = lab("run", "--kernel", "src-min", "-k", "test_release_is_the_booted_kernel or "
            "test_perf_ring_buffer_maps_control_and_data_page", env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "2 passed" in p.stdout


def test_a_make_o_folder_given_on_the_command_line_boots_as_built(make_lab_yaml) -> None:
    """`--kernel DIR` of a make O= folder (the one the first test built): its image, its
    modules (make modules_install), and the folder itself to build test modules against."""
    cfg = make_lab_yaml(kernels={"src-min": {"build": MINIMAL}})
    env = dict(os.environ, RINGLAB_CONFIG=str(cfg))
    p = lab("build", "--kernel", "src-min", env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    vmlinuz = Path(p.stdout.split(": ")[2].split()[0])
    out = Path(json.loads((vmlinuz.parent / "kernel.json").read_text())["build"]["out"])
    assert (out / "vmlinux").is_file() and (out / ".config").is_file()
    p = lab("run", "--kernel", str(out), "-k", "test_release_is_the_booted_kernel", env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "1 passed" in p.stdout
    p = lab("module", "ringlab_splat", "--kernel", str(out), env=env)
    assert p.returncode == 0 and p.stdout.strip().endswith("ringlab_splat.ko"), p.stderr[-2000:]


def _tree() -> Path:
    """The unpacked tree of SOURCE (the tier's first build fetched it)."""
    found = sorted(cache.Layout(cache.cache_root()).trees().glob(
        f"{SOURCE['package']}_{SOURCE.get('version', '*')}/linux-source-*"))
    assert found, f"the tier's first test unpacks Debian's {SOURCE['package']}"
    return found[-1]


def _rewrite(path: Path, old: str, new: str) -> None:
    """Edit a file of a hard-linked copy without writing through to the linked original."""
    text = path.read_text()
    assert old in text, f"{path} no longer contains {old!r}"
    path.unlink()
    path.write_text(text.replace(old, new, 1))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=ringlab test", "-c",
                           "user.email=test@ringlab.invalid", *args], check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture
def bisect_leaves_no_worktree(tmp_path: Path) -> Iterator[Path]:
    """The test's git repo; afterwards the cache's worktree of it (a full checkout, 1.6 GB with
    its build) and the kernels built there are removed: the repo is gone with tmp_path, so
    nothing could reuse them, and every run used to leave one behind."""
    repo = tmp_path / "linux"
    yield repo
    root = cache.cache_root()
    wt = revisions.worktree_path(repo, root)
    built_there = 0
    for made in cache.Layout(root).kernels().glob("build-*/kernel.json"):
        build = json.loads(made.read_text()).get("build") or {}
        if build.get("tree") == str(wt):
            shutil.rmtree(Path(build["out"]).parent, ignore_errors=True)
            shutil.rmtree(made.parent, ignore_errors=True)
            built_there += 1
    shutil.rmtree(wt, ignore_errors=True)
    assert built_there, f"no kernel of the cache was built in {wt}: where do the steps build?"


def test_bisect_names_the_commit_that_breaks_a_mapping_rule(
        tmp_path: Path, make_lab_yaml, bisect_leaves_no_worktree: Path) -> None:
    # The Debian tree as the first commit of a new git history (a hard-link copy: fast).
    cfg = make_lab_yaml(kernels={"src-min": {"build": MINIMAL}})
    env = dict(os.environ, RINGLAB_CONFIG=str(cfg))
    p = lab("build", "--kernel", "src-min", env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    tree = _tree()
    repo = bisect_leaves_no_worktree
    repo.mkdir()
    trees.link_farm(tree, repo)  # hard links where the filesystem allows
    _git(repo, "init", "-q")
    _git(repo, "add", "-A", "--force")  # Debian's .gitignore ignores the whole top level
    _git(repo, "commit", "-qm", "good: linux-source-6.12 as packaged")
    good = _git(repo, "rev-parse", "HEAD")
    _rewrite(repo / "kernel/events/core.c", "if (nr_pages != 0 && !is_power_of_2(nr_pages))",
             "if (nr_pages != 0 && !is_power_of_2(nr_pages) && nr_pages != 3)")
    _git(repo, "commit", "-qam", "perf: accept a 1+3 page ring buffer")
    breaking = _git(repo, "rev-parse", "HEAD")
    _rewrite(repo / "README", "Linux kernel", "Linux kernel (ringlab bisect test)")
    _git(repo, "commit", "-qam", "README: an unrelated change")
    bad = _git(repo, "rev-parse", "HEAD")

    cfg = make_lab_yaml(kernels={"mine": {"build": {
        "tree": str(repo), "config": MINIMAL["config"]}}})
    env = dict(os.environ, RINGLAB_CONFIG=str(cfg))
    # Bad input first: revisions the wrong way round.
    p = lab("bisect", "--kernel", "mine", "--good", bad, "--bad", good, "-k", RULE_TEST, env=env)
    assert p.returncode == 2 and "is newer than --bad" in p.stderr, p.stderr[-2000:]

    p = lab("bisect", "--kernel", "mine", "--good", good, "--bad", bad, "-k", RULE_TEST, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert f"first bad commit: {breaking} perf: accept a 1+3 page ring buffer" in p.stdout
    steps = [line for line in p.stdout.splitlines() if line.startswith("  ")]
    assert steps and all("build" in s and "total" in s for s in steps), p.stdout
    assert _git(repo, "rev-parse", "HEAD") == bad, "the user's checkout was moved"
    assert _git(repo, "status", "--porcelain") == ""


def _mutant(path: Path, rule: str, old: str, new: str) -> Path:
    """A mutant outside the catalog: a one-line change of kernel/events/core.c."""
    tree = _tree()
    text = (tree / "kernel/events/core.c").read_text().splitlines(keepends=True)
    i = next(n for n, line in enumerate(text) if line.rstrip("\n") == old)
    hunk = "".join(" " + line for line in text[i - 3:i]) + f"-{old}\n+{new}\n" + \
        "".join(" " + line for line in text[i + 1:i + 4])
    path.write_text(f"Rule: {rule}\n---\ndiff --git a/kernel/events/core.c "
                    "b/kernel/events/core.c\n--- a/kernel/events/core.c\n"
                    f"+++ b/kernel/events/core.c\n@@ -{i - 2},7 +{i - 2},7 @@\n{hunk}")
    return path


def test_mutate_kills_a_mutant_and_names_a_survivor_and_one_that_does_not_build(
        tmp_path: Path, make_lab_yaml) -> None:
    """Three mutants on the minimal kernel, two tests: the catalog's 1+3-pages mutant is
    killed by the rule's test, a harmless change survives, a syntax error is `not built`;
    the unmutated kernel passes both tests and the copy is left as the tree is."""
    cfg = make_lab_yaml(kernels={"src-min": {"build": MINIMAL}})
    env = dict(os.environ, RINGLAB_CONFIG=str(cfg))
    harmless = _mutant(tmp_path / "901-harmless.patch", "none: a comment",
                       "static int perf_mmap(struct file *file, struct vm_area_struct *vma)",
                       "static int perf_mmap(struct file *file, struct vm_area_struct *vma) "
                       "/* ringlab */")
    broken = _mutant(tmp_path / "902-broken.patch", "none: does not compile",
                     "static int perf_mmap(struct file *file, struct vm_area_struct *vma)",
                     "static int perf_mmap(struct file *file, struct vm_area_struct *vma) x")
    start = time.monotonic()
    p = lab("mutate", "--kernel", "src-min", "--mutants", f"001,{harmless},{broken}", "-k",
            f"{RULE_TEST} or test_release_is_the_booted_kernel", env=env)
    wall = time.monotonic() - start
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]  # one survived
    report = next((tmp_path / "reports").glob("*-mutate-src-min"))
    doc = json.loads((report / "mutate.json").read_text())
    assert doc["unmutated"]["counts"] == {"passed": 2}, doc["unmutated"]
    rows = {m["id"]: m for m in doc["mutants"]}
    killed = rows["001-perf-mmap-accepts-3-data-pages"]
    assert killed["outcome"] == "killed", killed
    assert killed["killed_by"] == [f"tests/kernel/test_perf_ring.py::{RULE_TEST}"]
    assert killed["why"].startswith(RULE_TEST + ": ")
    assert 0 < killed["build_s"] < 240 and killed["run_s"] > 0
    assert rows["901-harmless"]["outcome"] == "survived", rows["901-harmless"]
    assert rows["902-broken"]["outcome"] == "not built", rows["902-broken"]
    assert "error" in rows["902-broken"]["why"]
    assert doc["totals"]["kill_rate"] == 0.5
    text = (report / "mutate.txt").read_text()
    assert "killed 1 of 2 judged (50%); survived 1; not built 1" in text
    assert text in p.stdout
    # Progress: one line per mutant on screen.
    assert len([ln for ln in p.stderr.splitlines() if ln.startswith("lab: mutant ")]) == 3
    # The copy mutants were applied to is the tree again, links and mtimes.
    tree = _tree()
    # (its own workspace: the cache may hold others', one of them mid-mutant)
    copy = Workspace(tree, cache.cache_root()).src
    for rel in ("kernel/events/core.c",):
        assert (copy / rel).stat().st_ino == (tree / rel).stat().st_ino
    # A bound against a runaway (a cold cache pays one full build in the mutate tree), not a
    # benchmark: per-mutant build and run times are in mutate.json.
    assert wall < 1500, f"./lab mutate took {wall:.0f} s"


def test_every_shipped_mutant_applies_to_the_debian_tree() -> None:
    """The catalog against the tree the tier's builds unpacked (a mutant that no longer
    applies would only show as an error in the middle of a ./lab mutate). A mutant whose code
    is newer than the tree (Since:) is left out by name, as ./lab mutate does."""
    from harness.kernels import mutants
    tree = _tree()
    kept, newer = mutants.since_split(mutants.catalog(), tree)
    assert len(kept) >= 45 and all("(Since:)" in line for line in newer)
    for m in mutants.for_tree_all(kept, tree):
        p = subprocess.run(["git", "apply", "--check", "-"], input=m.text, cwd=tree,
                           capture_output=True, text=True,
                           env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tree.parent)})
        assert p.returncode == 0, f"{m.path}: {p.stderr}"
