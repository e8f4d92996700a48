"""`./lab gc`: free the cache of what recent runs did not use, or beyond a size."""
from __future__ import annotations

import argparse

from harness import cache
from harness.runs import run_folder
from harness.errors import LabError
from harness.guest import workdir

# Read by harness/cli.py, and as text by harness/host.py (./lab's host check): literals only.
OWN_LOGGING: bool = False
HOST_TOOLS: tuple[str, ...] = ()


def register(sub: argparse._SubParsersAction) -> None:
    gc = sub.add_parser("gc", help="free the cache: entries not used by the last N runs, or "
                        "beyond a size; and the guest folders killed labs left",
                        description=main.__doc__)
    gc.add_argument("--keep", type=int, default=5, metavar="N", help="keep what the last N "
                    "runs used (default 5)")
    gc.add_argument("--max-size", metavar="SIZE", help="then remove the least recently used "
                    "entries until the rest fits (20G, 512M)")
    gc.add_argument("--dry-run", action="store_true", help="say what would be freed, remove "
                    "nothing")
    gc.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Free the cache: remove build folders, module build roots, unpacked trees, bisect
    worktrees, mutate trees and prepared kernels that none of the last --keep runs used, then
    the least recently used ones beyond --max-size. An entry a running lab holds is skipped.
    Then the guest folders in the temp dir whose lab and QEMU are both gone (a lab killed with
    SIGKILL leaves its guests' folders); a live guest's folder is never touched."""
    if args.keep < 0:
        raise LabError(f"--keep: expected 0 or more runs, got {args.keep}")
    max_size = cache.parse_size(args.max_size) if args.max_size else None
    root = cache.cache_root(run_folder.config(args).cache_dir)
    result = cache.collect(root, args.keep, max_size, dry_run=args.dry_run)
    for line in result.lines():
        print(line)
    orphans = workdir.find_orphans()
    removed = set(workdir.remove(orphans)) if not args.dry_run else set()
    for o in orphans:
        done = "would remove" if args.dry_run else \
            "removed" if o.path in removed else "could not remove"
        print(f"{done} guest folder {o.path}: {o.why}")
    return 0
