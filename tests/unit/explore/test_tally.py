"""The numbered events' tally (probes/explore_trace.py, Tally) and its two copies in the
reproducers (repro.py's, c/trace.h's) give the same verdict on the same sub-buffers: what
a read() gave, and what a mapping shows after GET_READER. Each story is one way a reader
can go wrong (mutant 042's stale page is "a new reader sub-buffer shows old events")."""
from __future__ import annotations

import ctypes
import os
import shutil
import struct
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from harness.explore import c_reproducer, reproducer
from harness.probe_modules import probe_module

DATA = Path(__file__).parents[1] / "data"
SUBBUF = 4096
META_PAGE = 4096


def event(n: int) -> bytes:
    """A print event as trace_marker makes it: common fields, ip, "ringlab N\\n"."""
    body = struct.pack("<HBBiQ", 5, 0, 0, 1234, 0) + f"ringlab {n}\n".encode() + b"\0"
    body += b"\0" * (-len(body) % 4)
    return struct.pack("<I", len(body) // 4 | 3 << 5) + body


def subbuf(numbers: list[int], extend: bool = False) -> bytes:
    """A sub-buffer: u64 time stamp, u64 commit, the events (a time extend first)."""
    data = (struct.pack("<II", 30 | 7 << 5, 1) if extend else b"") + \
        b"".join(event(n) for n in numbers)
    return (struct.pack("<QQ", 1000, len(data)) + data).ljust(SUBBUF, b"\0")


def mapping(reader: int, read: int, page_id: int, page: bytes) -> bytes:
    """The meta page (trace_mmap.h: meta_page_size, subbuf_size, reader.id, reader.read) and
    4 sub-buffers, `page` at `page_id`."""
    meta = struct.pack("<4IQ2I", META_PAGE, 80, SUBBUF, 4, 0, reader, read).ljust(META_PAGE,
                                                                                  b"\0")
    return meta + b"".join(page if i == page_id else b"\xff" * SUBBUF for i in range(4))


def consumed(numbers: list[int], k: int) -> int:
    """reader.read after the first k events of a sub-buffer: their bytes."""
    return sum(len(event(n)) for n in numbers[:k])


# A story: (marks written so far, action, argument); the verdict (twice, missing, last).
# "take" is GET_READER through a mapping: (reader.id and the events of the reader sub-buffer
# consumed before the call, reader.id after it, the events of that sub-buffer), the call
# consuming all of it.
Story = list[tuple[int, str, Any]]
STORIES: dict[str, tuple[Story, tuple[int, int, int]]] = {
    "in order through read()": (
        [(5, "read", [1, 2, 3]), (5, "read", [4, 5])], (0, 0, 5)),
    "a gap": ([(5, "read", [1, 2]), (5, "read", [5])], (0, 2, 5)),
    "read() gives one again": ([(4, "read", [1, 2, 3]), (4, "read", [3, 4])], (1, 0, 4)),
    "the same reader sub-buffer grows": (
        [(2, "take", (0, 0, 0, [1, 2])), (4, "take", (0, 2, 0, [1, 2, 3, 4]))], (0, 0, 4)),
    "read() took part of it between, unsaid": (
        [(2, "take", (0, 0, 0, [1, 2])), (3, "read", [3]), (4, "take", (0, 2, 0, [1, 2, 3, 4]))],
        (0, 0, 4)),
    # 6.12-7.3 (round 10): read() swapped reader pages, unsaid; GET_READER's new page has the
    # id the meta page had before: all of it is new, not from the stale reader.read on
    "read() swapped pages and the same id came back as another page": (
        [(1, "take", (0, 0, 0, [1])), (3, "read", [2, 3]), (5, "take", (0, 1, 0, [4, 5]))],
        (0, 0, 5)),
    "a new reader sub-buffer shows old events": (
        [(2, "take", (0, 0, 0, [1, 2])), (4, "take", (0, 2, 1, [1, 2]))], (2, 0, 2)),
    "a new reader sub-buffer after a loss": (
        [(2, "take", (0, 0, 0, [1, 2])), (9, "take", (0, 2, 1, [7, 8, 9]))], (0, 4, 9)),
    "a new mapping numbers the sub-buffers anew": (
        [(1, "take", (2, 0, 2, [1])), (1, "take", (0, 1, 0, [1]))], (0, 0, 1)),
    "forgotten: taken unseen or dropped by a resize": (
        [(3, "read", [1]), (6, "forget", None), (8, "read", [7, 8])], (0, 0, 8)),
    "a time extend before the first event": ([(2, "read-x", [1, 2])], (0, 0, 2)),
}


# Real pages: 400 numbered writes into an 8 KiB buffer on 7.2.13, read() after; the writer
# went round, 114 overwritten (its stats file says so).
REAL = (DATA / "trace_pipe_raw-ringlab-7.2.13.bin").read_bytes()
STORIES["real pages from 7.2.13"] = (
    [(400, "read", REAL[i:i + SUBBUF]) for i in range(0, len(REAL), SUBBUF)], (0, 114, 400))


def page_of(what: str, arg: Any) -> bytes:
    """What a read() story step gives: a real page, or one made of its numbers."""
    return arg if isinstance(arg, bytes) else subbuf(arg, extend=what == "read-x")


def before_and_after(arg: tuple) -> tuple[bytes, int, int]:
    """The mapping before GET_READER, and reader.id and reader.read after it."""
    rid, k, after, numbers = arg
    page = subbuf(numbers)
    return mapping(rid, consumed(numbers, k) if rid == after else 0, after, page), after, \
        consumed(numbers, len(numbers))


def fake_get_reader(buf: Any, after: int, read: int) -> Callable[..., int]:
    """GET_READER as the kernel answers it: the meta page's reader moved."""
    def ioctl(fd: int, request: int, *args: Any) -> int:
        struct.pack_into("<2I", buf, 24, after, read)
        return 0
    return ioctl


def world_tally(story: Story, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, int]:
    et = probe_module("explore_trace")
    t = et.Tally()
    for marks, what, arg in story:
        t.marks = marks
        if what == "forget":
            t.forget({})        # the stats count nothing lost here
        elif what.startswith("read"):
            t.read(page_of(what, arg))
        else:
            data, after, read = before_and_after(arg)
            buf = ctypes.create_string_buffer(data)
            monkeypatch.setattr(et.fcntl, "ioctl", fake_get_reader(buf, after, read))
            t.take(-1, ctypes.addressof(buf))
    return t.twice, t.missing, t.last


def python_tally(story: Story) -> tuple[int, int, int]:
    """repro.py's own tally, run as the script runs it (read() of a pipe for trace_pipe_raw)."""
    ns: dict[str, Any] = {"os": os, "struct": struct, "ctypes": ctypes, "GET_READER": 0x5220,
                          "write": lambda name, value: "ok"}
    exec(reproducer._PY_TALLY, ns)  # noqa: S102 - the generated text under test
    ns["lost_now"] = lambda: 0      # no instance's stats here: nothing counted lost
    t = ns["tally"]
    for marks, what, arg in story:
        t["marks"] = marks
        if what == "forget":
            ns["forget"]()
        elif what.startswith("read"):
            r, w = os.pipe()
            os.write(w, page_of(what, arg))
            os.close(w)
            ns["read_taking"](r)
            os.close(r)
        else:
            data, after, read = before_and_after(arg)
            buf = ctypes.create_string_buffer(data)
            ns["fcntl"] = SimpleNamespace(ioctl=fake_get_reader(buf, after, read))
            ns["take"](-1, ctypes.addressof(buf))
    return t["twice"], t["missing"], t["last"]


C_MAIN = r"""
static char map[4096 * 5];
static unsigned int after_id, after_read;

/* GET_READER as the kernel answers it: the meta page's reader moved. */
int fake_ioctl(int fd, unsigned long request, ...)
{
	struct trace_buffer_meta *mp = (void *)map;

	mp->reader.id = after_id;
	mp->reader.read = after_read;
	return 0;
}

int main(int argc, char **argv)
{
	int k, more;

	for (k = 1; k + 4 < argc; k += 5) {
		int f = open(argv[k + 2], O_RDONLY);

		tally.marks = atoll(argv[k]);
		after_id = atoi(argv[k + 3]);
		after_read = atoi(argv[k + 4]);
		if (!strcmp(argv[k + 1], "forget")) {
			tally_forget();
		} else if (!strcmp(argv[k + 1], "read")) {
			tally_read(f);
		} else {
			if (read(f, map, sizeof(map)) != sizeof(map))
				return 2;
			tally_take(-1, map, &more);
		}
		close(f);
	}
	printf("%lld %lld %lld\n", tally.twice, tally.missing, tally.last);
	return 0;
}
"""


@pytest.fixture(scope="module")
def c_tally(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Story], tuple[int, ...]]:
    if shutil.which("gcc") is None:
        pytest.skip("no gcc on this host")
    folder = tmp_path_factory.mktemp("tally")
    source = folder / "tally.c"
    # every ioctl() of the support code is the fake GET_READER's (its declaration from
    # <sys/ioctl.h> renamed with it)
    source.write_text('#define SPLAT_BANNERS "x"\n#define ioctl fake_ioctl\n' +
                      c_reproducer.support("trace-mmap") + C_MAIN)
    binary = folder / "tally"
    subprocess.run(["gcc", "-Wall", "-Werror", "-Wno-unused-function", "-o", str(binary),
                    str(source)], check=True)

    def run(story: Story) -> tuple[int, ...]:
        args = []
        for i, (marks, what, arg) in enumerate(story):
            data, after, read = folder / f"step{i}", 0, 0
            if what.startswith("read"):
                data.write_bytes(page_of(what, arg))
            elif what == "take":
                before, after, read = before_and_after(arg)
                data.write_bytes(before)
            else:
                data.write_bytes(b"")
            args += [str(marks), what.split("-")[0], str(data), str(after), str(read)]
        out = subprocess.run([str(binary), *args], capture_output=True, text=True, check=True)
        return tuple(int(x) for x in out.stdout.split())
    return run


@pytest.mark.parametrize("name", sorted(STORIES))
def test_the_three_tallies_agree_with_the_story(name: str, c_tally: Callable,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    story, verdict = STORIES[name]
    assert world_tally(story, monkeypatch) == verdict, "the explorer's"
    assert python_tally(story) == verdict, "repro.py's"
    assert c_tally(story) == verdict, "repro.c's"


def test_the_real_pages_lost_no_more_than_the_kernel_counted() -> None:
    t = probe_module("explore_trace").Tally(marks=400)
    for i in range(0, len(REAL), SUBBUF):
        t.read(REAL[i:i + SUBBUF])
    stats = parse_stats((DATA / "trace-stats-ringlab-7.2.13.txt").read_text())
    assert (t.twice, t.missing, t.unaccounted(stats)) == (0, 114, 0)
    assert t.unaccounted(stats | {"overrun": "100"}) == 14


def parse_stats(text: str) -> dict[str, str]:
    return probe_module("tracefs").parse_stats(text)


def test_unaccounted_is_what_the_stats_file_does_not_count_lost() -> None:
    t = probe_module("explore_trace").Tally(missing=10)
    stats = "entries: 3\noverrun: 4\ncommit overrun: 1\nbytes: 200\n" \
        "oldest event ts:  5.000000\nnow ts:  6.000000\ndropped events: 2\nread events: 9\n"
    assert t.unaccounted(parse_stats(stats)) == 3
    assert t.unaccounted(parse_stats(stats.replace("overrun: 4", "overrun: 40"))) == 0
