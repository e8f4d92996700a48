"""The explorer's compass: arc counters read from a .gcda as the kernel writes it."""
from __future__ import annotations

import struct
from pathlib import Path

import gcov_edges


def gcda(functions: dict[int, list[int]], version: bytes = b"B22*") -> bytes:
    """A .gcda in GCC 12's layout (lengths in bytes, a checksum word after the stamp)."""
    out = struct.pack("<II", gcov_edges.MAGIC, int.from_bytes(version, "big")) + \
        struct.pack("<II", 1, 2)
    for ident, counts in functions.items():
        out += struct.pack("<II", gcov_edges.TAG_FUNCTION, 12) + struct.pack("<III", ident, 0, 0)
        out += struct.pack("<II", gcov_edges.TAG_ARCS, 8 * len(counts))
        out += b"".join(struct.pack("<II", c & 0xFFFFFFFF, c >> 32) for c in counts)
    return out


def test_edges_are_the_counters_that_are_not_zero() -> None:
    assert gcov_edges.edges_of(gcda({7: [0, 3, 0, 1 << 40], 9: [0]})) == {(7, 1), (7, 3)}


def test_gcc_before_12_counts_lengths_in_words() -> None:
    data = struct.pack("<III", gcov_edges.MAGIC, int.from_bytes(b"A93*", "big"), 1) + \
        struct.pack("<II", gcov_edges.TAG_FUNCTION, 3) + struct.pack("<III", 5, 0, 0) + \
        struct.pack("<II", gcov_edges.TAG_ARCS, 4) + struct.pack("<IIII", 0, 0, 2, 0)
    assert gcov_edges.edges_of(data) == {(5, 1)}


def test_read_walks_the_debugfs_tree(tmp_path: Path) -> None:
    (tmp_path / "b/out/kernel/events").mkdir(parents=True)
    (tmp_path / "b/out/kernel/events/core.gcda").write_bytes(gcda({1: [1, 0]}))
    (tmp_path / "b/out/kernel/events/core.gcno").write_bytes(b"notes")
    got = gcov_edges.read(str(tmp_path))
    assert got == {"b/out/kernel/events/core.gcda": {(1, 0)}}
    assert gcov_edges.flat(got) == {("b/out/kernel/events/core.gcda", 1, 0)}
    assert gcov_edges.read(str(tmp_path / "absent")) == {}
