"""A nightly kernel's branch: fetched into the kernel's git tree and checked out in a
worktree of the worker's cache, so the user's checkout never moves."""
from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path

from harness import cache
from harness.errors import BuildError
from harness.kernels import trees


@contextlib.contextmanager
def _tree_lock(tree: Path) -> Iterator[None]:
    """Two workers of one host fetching into one tree would race on FETCH_HEAD."""
    git_dir = Path(trees.git(tree, "rev-parse", "--absolute-git-dir"))
    with cache.exclusive(git_dir / "ringlab-nightly.lock"):
        yield


def fetch_branch(tree: Path, remote: str, branch: str, cache_root: Path,
                 usage: cache.Usage | None = None) -> tuple[Path, str]:
    """`git fetch REMOTE BRANCH` in the kernel's tree, and a worktree of it in this worker's
    cache detached at what was fetched (kbuild has no branch of its own, so the cell builds
    the worktree as `./lab run --tree` does). The worktree is a cache entry (`./lab gc`
    removes it when no recent run used it); `usage` holds it for the cell so a gc meanwhile
    leaves it alone. Returns (worktree, commit)."""
    if not trees.is_git(tree):
        raise BuildError(f"{tree} is not a git checkout: cannot fetch branch {branch}")
    with _tree_lock(tree):
        trees.git(tree, "fetch", "--quiet", remote, branch)
        sha = trees.git(tree, "rev-parse", "FETCH_HEAD^{commit}")
    wt = cache.Layout(cache_root).nightly(hashlib.sha256(
        f"{tree} {remote} {branch}".encode()).hexdigest()[:16])
    if usage is not None:
        usage.use(wt)
    else:
        cache.mark_used(cache_root, wt)
    if not (wt / ".git").exists():
        wt.parent.mkdir(parents=True, exist_ok=True)
        trees.git(tree, "worktree", "prune", check=False)
        trees.git(tree, "worktree", "add", "--detach", str(wt), sha)
    else:
        trees.git(wt, "checkout", "--quiet", "--force", "--detach", sha)
    return wt, sha
