"""The revisions a bisect starts from and the cache's worktree it walks
(harness/bisect/revisions.py), on a small git history made here (the end-to-end bisect is in
tests/e2e/test_kbuild.py)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness import config
from harness.bisect import revisions
from harness.errors import BisectError


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, list[str]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    shas = []
    for i in range(3):
        (repo / "f").write_text(f"{i}\n")
        subprocess.run([*git, "add", "f"], check=True)
        subprocess.run([*git, "commit", "-qm", f"c{i}"], check=True)
        shas.append(subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                                   check=True).stdout.strip())
    return repo, shas


def test_bisect_revisions_are_checked(history: tuple[Path, list[str]]) -> None:
    repo, (c0, c1, c2) = history
    assert revisions.check_revisions(repo, c0, c2) == (c0, c2)
    with pytest.raises(BisectError, match="--good .* is newer than --bad"):
        revisions.check_revisions(repo, c2, c0)
    with pytest.raises(BisectError, match="--good nope: not a commit"):
        revisions.check_revisions(repo, "nope", c2)
    with pytest.raises(BisectError, match="are the same commit"):
        revisions.check_revisions(repo, c1, c1)


def test_the_bisect_worktree_leaves_the_users_checkout_alone(
        history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, (c0, c1, c2) = history
    wt = revisions.worktree(repo, tmp_path / "cache", c1)
    assert (wt / "f").read_text() == "1\n" and (repo / "f").read_text() == "2\n"
    again = revisions.worktree(repo, tmp_path / "cache", c0)
    assert again == wt and (wt / "f").read_text() == "0\n"


def _cfg(tmp_path: Path, tree: Path) -> config.LabConfig:
    (tmp_path / "lab.yaml").write_text(f"kernels:\n  mine:\n    build:\n      tree: {tree}\n"
                                       "  deb:\n    debian: {suite: trixie, flavour: cloud-amd64}\n")
    return config.load(tmp_path / "lab.yaml")


def test_only_a_build_kernel_with_a_git_tree_can_be_bisected(
        history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, _ = history
    cfg = _cfg(tmp_path, repo)
    assert revisions.tree_of(cfg, cfg.kernel("mine")) == repo
    with pytest.raises(BisectError, match="kernel deb is not a `build` kernel"):
        revisions.tree_of(cfg, cfg.kernel("deb"))
    plain = tmp_path / "plain"
    plain.mkdir()
    other = _cfg(tmp_path, plain)
    with pytest.raises(BisectError, match="is not a git checkout"):
        revisions.tree_of(other, other.kernel("mine"))
