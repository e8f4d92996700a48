"""A nightly kernel's branch: fetched into a worktree of the worker's cache, a cache entry
`./lab gc` knows and leaves alone while a cell holds it."""
from __future__ import annotations

import subprocess
from pathlib import Path

from harness import cache
from harness.nightly.branch import fetch_branch


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_a_branch_is_fetched_into_a_worktree(tmp_path: Path) -> None:
    upstream, tree = tmp_path / "upstream", tmp_path / "tree"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    (upstream / "f").write_text("1")
    git(upstream, "add", "f")
    git(upstream, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    subprocess.run(["git", "clone", "-q", str(upstream), str(tree)], check=True)
    (upstream / "f").write_text("2")
    git(upstream, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two")
    wt, sha = fetch_branch(tree, "origin", "main", tmp_path / "cache")
    assert sha == git(upstream, "rev-parse", "HEAD")
    assert (wt / "f").read_text() == "2"
    assert (tree / "f").read_text() == "1"   # the user's checkout did not move
    wt2, _ = fetch_branch(tree, "origin", "main", tmp_path / "cache")
    assert wt2 == wt
    # A cache entry ./lab gc knows; once removed, the next fetch makes it again.
    assert [(e.kind, e.path) for e in cache.entries(tmp_path / "cache")] == [("nightly", wt)]
    removed = cache.collect(tmp_path / "cache", keep=0, max_size=None).removed
    assert [e.path for e in removed] == [wt] and not wt.exists()
    wt3, _ = fetch_branch(tree, "origin", "main", tmp_path / "cache")
    assert wt3 == wt and (wt / "f").read_text() == "2"


def test_gc_leaves_a_worktree_a_cell_holds(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / "nightly" / "abc").mkdir(parents=True)
    usage = cache.Usage(root)
    usage.use(root / "nightly" / "abc")
    try:
        got = cache.collect(root, keep=0, max_size=None)
        assert not got.removed and [e.path.name for e, _ in got.skipped] == ["abc"]
    finally:
        usage.close()
    assert [e.path.name for e in cache.collect(root, keep=0, max_size=None).removed] == ["abc"]
