"""The edges (arc counters) of the kernel's profiled files that have run, read from gcov's
debugfs files: what the explorer steers by on a coverage kernel (harness/kernels/gcov.py).

By hand in a guest:  python3 gcov_edges.py      (prints the number of edges run, per file)

A .gcda (GCC's format, as the kernel's kernel/gcov/gcc_4_7.c writes it) is a header (magic,
version, stamp, and from GCC 12 a checksum) then records: a tag, a length (in bytes from GCC
12, in 4-byte words before), the data. A FUNCTION record names the function (ident); the arc
counters that follow it are 64-bit, one per instrumented edge of its control-flow graph (a
negative length: all zero, none written). An edge has run when its counter is not zero.
Stdlib only.
"""
from __future__ import annotations

import os
import struct
import sys

ROOT = "/sys/kernel/debug/gcov"
MAGIC = 0x67636461  # "gcda"
TAG_FUNCTION = 0x01000000
TAG_ARCS = 0x01A10000


def _version_major(version: int) -> int:
    """GCC's version word: 'B22*' is 12.2 ('A'..: tens, then units)."""
    b = version.to_bytes(4, "big")
    return (b[0] - ord("A")) * 10 + (b[1] - ord("0"))


def edges_of(data: bytes) -> set[tuple[int, int]]:
    """(function ident, arc index) of every arc counter that is not zero."""
    return {k for k, n in counts_of(data).items() if n}


def counts_of(data: bytes) -> dict[tuple[int, int], int]:
    """Every arc counter of a .gcda, by (function ident, arc index)."""
    if len(data) < 12:
        return {}
    magic, version = struct.unpack_from("<II", data, 0)
    if magic != MAGIC:
        raise ValueError(f"not a gcda file (magic {magic:#x})")
    bytes_unit = _version_major(version) >= 12
    pos = 16 if bytes_unit else 12
    out: dict[tuple[int, int], int] = {}
    ident = -1
    while pos + 8 <= len(data):
        tag, length = struct.unpack_from("<Ii", data, pos)
        pos += 8
        if length < 0:  # GCC 12's user-space gcov: counters all zero, none written
            continue
        size = length if bytes_unit else 4 * length
        if tag == TAG_FUNCTION and size >= 4:
            ident = struct.unpack_from("<I", data, pos)[0]
        elif tag == TAG_ARCS:
            n = size // 8
            counts = struct.unpack_from(f"<{2 * n}I", data, pos)
            out.update(((ident, i), counts[2 * i] | counts[2 * i + 1] << 32) for i in range(n))
        pos += size
    return out


def read(root: str = ROOT) -> dict[str, set[tuple[int, int]]]:
    """Per .gcda under `root` (path relative to it), its edges run. {} without gcov."""
    out: dict[str, set[tuple[int, int]]] = {}
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".gcda"):
                path = os.path.join(d, f)
                with open(path, "rb") as fh:
                    out[os.path.relpath(path, root)] = edges_of(fh.read())
    return out


def flat(per_file: dict[str, set[tuple[int, int]]]) -> set[tuple[str, int, int]]:
    return {(f, ident, i) for f, es in per_file.items() for ident, i in es}


if __name__ == "__main__":
    found = read(sys.argv[1] if len(sys.argv) > 1 else ROOT)
    for name, es in sorted(found.items()):
        print(f"{len(es):7d}  {name}")
    print(f"{sum(map(len, found.values())):7d}  edges run in all")
