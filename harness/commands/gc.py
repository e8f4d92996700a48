"""`./lab gc`: free the cache of what recent runs did not use, or beyond a size."""
from __future__ import annotations

import argparse

from harness import cache
from harness.commands import run_folder
from harness.errors import LabError


def register(sub: argparse._SubParsersAction) -> None:
    gc = sub.add_parser("gc", help="free the cache: entries not used by the last N runs, or "
                        "beyond a size", description=main.__doc__)
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
    the least recently used ones beyond --max-size. An entry a running lab holds is skipped."""
    if args.keep < 0:
        raise LabError(f"--keep: expected 0 or more runs, got {args.keep}")
    max_size = cache.parse_size(args.max_size) if args.max_size else None
    root = cache.cache_root(run_folder.config(args).cache_dir)
    result = cache.collect(root, args.keep, max_size, dry_run=args.dry_run)
    for line in result.lines():
        print(line)
    return 0
