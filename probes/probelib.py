"""Shared plumbing for probes: one JSON document on stdout, errno names, the command line.

Every probe module has `main(argv) -> int` that prints exactly one JSON document; this module
makes that the same for all of them, whether run by hand in a guest or by runner.py.
"""
from __future__ import annotations

import argparse
import errno
import json
import sys
from collections.abc import Callable


def errname(e: OSError | int) -> str:
    """'EINVAL' for an OSError or an errno value."""
    n = e.errno if isinstance(e, OSError) else e
    return _PREFERRED.get(n) or errno.errorcode.get(n, f"errno {n}")


# Aliases with one value: name them as the kernel ABI documents do.
_PREFERRED = {errno.EOPNOTSUPP: "EOPNOTSUPP", errno.EAGAIN: "EAGAIN"}


def emit(doc: dict) -> None:
    """Print the probe's one JSON document."""
    json.dump(doc, sys.stdout, indent=None, sort_keys=True)
    sys.stdout.write("\n")
    sys.stdout.flush()


def parser(name: str, description: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=f"python3 {name}.py", description=description)


def run(main: Callable[[list[str]], int]) -> None:
    """Entry for `python3 probe_x.py ...` by hand."""
    sys.exit(main(sys.argv[1:]))
