"""The hard-link copy of a kernel tree that mutants are applied to, one at a time.

Why the builds stay incremental: the copy is kept at a stable path in the cache
(`mutate/<tree>/src`) and given to the build as its tree (like `./lab bisect-step --tree`), so
every build uses the same source path and `make O=` folder. A patched file becomes a new file
(git apply writes a new file; the others stay links); reverting puts the original inode back,
with its mtime, and deletes the object built from the mutated file, so the next build
recompiles exactly that file (a ccache hit).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from harness import cache
from harness.errors import LabError
from harness.kernels import trees
from harness.kernels.mutants import Mutant, MutantError
from harness.kernels.series import Patch

log = logging.getLogger(__name__)


class Workspace:
    """The copy of `tree` mutants are applied to, always reverted. Locked: two `./lab mutate`
    runs on one tree would mix mutants."""

    def __init__(self, tree: Path, cache_root: Path) -> None:
        self.tree = tree
        digest = hashlib.sha256(str(tree).encode()).hexdigest()[:16]
        self.root = cache.Layout(cache_root).mutate(digest)
        self.src = self.root / "src"
        self.backup = self.root / "orig"
        self.marker = self.root / "applied.json"

    @contextlib.contextmanager
    def opened(self) -> Iterator[Workspace]:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LabError(f"another ./lab mutate is using the tree {self.tree} "
                           f"({self.root} is locked)", hint="wait for it to finish") from None
        usage = cache.Usage(self.root.parent.parent)  # ./lab gc leaves it be meanwhile
        usage.use(self.root)
        try:
            self.recover()
            trees.link_farm(self.tree, self.src)  # fresh links: the tree may have changed
            yield self
        finally:
            usage.close()
            os.close(fd)

    def recover(self) -> None:
        """Undo what a run killed with a mutant applied left: its objects in the build folders
        (the sources are made again from the tree)."""
        if not self.marker.exists():
            return
        try:
            state = json.loads(self.marker.read_text())
        except ValueError:
            state = {}
        log.warning("an earlier ./lab mutate stopped with mutant %s applied; cleaning up",
                    state.get("mutant", "?"))
        for out in state.get("outs", []):
            for rel in state.get("paths", []):
                drop_object(Path(out), rel)
        shutil.rmtree(self.backup, ignore_errors=True)
        self.marker.unlink()

    def check(self, mutant: Mutant) -> None:
        """Raise a MutantError naming the mutant and its rejected hunk unless it applies."""
        p = _git_apply(mutant, self.src, "--check")
        if p.returncode == 0:
            return
        m = re.search(r"error: patch failed: (\S+):(\d+)", p.stderr)
        hunk = Patch(mutant.path.name, mutant.text, mutant.path).hunk(
            m.group(1), int(m.group(2))) if m else None
        where = f" at {m.group(1)}:{m.group(2)}" if m else ""
        raise MutantError(f"mutant {mutant.path} does not apply to {self.tree}{where}: "
                          + "; ".join(p.stderr.strip().splitlines()[:2])
                          + (f"\nrejected hunk:\n{hunk}" if hunk else ""),
                          hint="rebase the mutant on this tree, or leave it out with --mutants")

    @contextlib.contextmanager
    def applied(self, mutant: Mutant, outs: list[Path]) -> Iterator[None]:
        """The mutant applied for the duration of the block, reverted however it ends."""
        self.check(mutant)
        shutil.rmtree(self.backup, ignore_errors=True)
        self.backup.mkdir(parents=True)
        rel = mutant.file
        original = self.src / rel
        saved = self.backup / rel
        saved.parent.mkdir(parents=True, exist_ok=True)
        os.link(original, saved)  # the original inode, mtime and all
        cache.write_atomic(self.marker, json.dumps(
            {"mutant": mutant.id, "paths": [rel], "outs": [str(o) for o in outs]}).encode())
        try:
            p = _git_apply(mutant, self.src)
            if p.returncode != 0:
                raise MutantError(f"mutant {mutant.path}: git apply failed: "
                                  f"{p.stderr.strip()[:300]}")
            yield
        finally:
            os.replace(saved, original)
            for out in outs:
                drop_object(out, rel)
            shutil.rmtree(self.backup, ignore_errors=True)
            self.marker.unlink(missing_ok=True)


def drop_object(out: Path, rel: str) -> None:
    """Delete the object make built from `rel` in the build folder `out`: with the source's
    old mtime back, make would otherwise keep the mutant's object."""
    (out / rel).with_suffix(".o").unlink(missing_ok=True)


def _git_apply(mutant: Mutant, tree: Path, *flags: str) -> subprocess.CompletedProcess:
    # GIT_CEILING_DIRECTORIES: never take a repository above the copy for the one to patch.
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tree.parent)}
    return subprocess.run(["git", "apply", "--whitespace=nowarn", *flags, "-"],
                          input=mutant.text, cwd=tree, capture_output=True, text=True, env=env)
