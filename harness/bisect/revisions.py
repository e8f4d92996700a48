"""The tree a bisect walks and the two revisions it starts from, checked before any build;
and the cache's worktree of that tree the steps build in (the user's checkout never moves,
and the worktree's build folder survives between bisects, so each step's build is
incremental)."""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from harness import cache
from harness.config import BuildKernel, KernelSpec, LabConfig
from harness.errors import BisectError
from harness.kernels import trees


def tree_of(cfg: LabConfig, spec: KernelSpec) -> Path:
    """The git checkout of a `build` kernel, or a BisectError saying why there is none."""
    if not isinstance(spec.source, BuildKernel) or not isinstance(spec.source.tree, Path):
        raise BisectError(f"kernel {spec.name} is not a `build` kernel with a tree folder in "
                          f"{cfg.path}: there is nothing to bisect")
    tree = spec.source.tree
    if not trees.is_git(tree):
        raise BisectError(f"kernels.{spec.name}.build.tree: {tree} is not a git checkout")
    return tree


def _commit(tree: Path, rev: str, option: str) -> str:
    p = subprocess.run(["git", "-C", str(tree), "rev-parse", "--verify", "--quiet",
                        f"{rev}^{{commit}}"], capture_output=True, text=True)
    if p.returncode != 0:
        raise BisectError(f"{option} {rev}: not a commit of {tree}")
    return p.stdout.strip()


def _is_ancestor(tree: Path, a: str, b: str) -> bool:
    return subprocess.run(["git", "-C", str(tree), "merge-base", "--is-ancestor", a, b]
                          ).returncode == 0


def check_revisions(tree: Path, good: str, bad: str) -> tuple[str, str]:
    """The two commits, or a BisectError saying what is wrong with them."""
    g, b = _commit(tree, good, "--good"), _commit(tree, bad, "--bad")
    if g == b:
        raise BisectError(f"--good {good} and --bad {bad} are the same commit ({g[:12]})")
    if _is_ancestor(tree, b, g):
        raise BisectError(f"--good {good} is newer than --bad {bad} ({bad} is an ancestor of "
                          f"{good})", hint="swap them, or bisect a fix with git bisect's "
                          "old/new terms by hand")
    if not _is_ancestor(tree, g, b):
        raise BisectError(f"--good {good} is not an ancestor of --bad {bad}")
    return g, b


def worktree_path(tree: Path, cache_root: Path) -> Path:
    """Where the cache keeps `tree`'s worktree (one per tree, kept for incremental builds)."""
    return cache.Layout(cache_root).bisect(hashlib.sha256(str(tree).encode()).hexdigest()[:16])


def worktree(tree: Path, cache_root: Path, start: str) -> Path:
    """The cache's worktree of `tree` (made on first use), detached at `start`."""
    wt = worktree_path(tree, cache_root)
    if not (wt / ".git").exists():
        wt.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(tree), "worktree", "prune"], capture_output=True)
        trees.git(tree, "worktree", "add", "--detach", str(wt), start)
    else:
        trees.git(wt, "bisect", "reset", "--quiet", check=False)
        trees.git(wt, "checkout", "--quiet", "--force", "--detach", start)
    return wt
