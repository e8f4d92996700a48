"""probes/probe_trace_mmap.py's own bookkeeping on the host: the refusal checks look at an
instance only with none of its trace pipe files held open (each open one makes a tracer
switch EBUSY), and say so instead of reporting the kernel."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import probe_trace_mmap  # from probes/ (pytest's pythonpath): guest-side, stdlib only


class FakeInstance:
    def __init__(self, path: Path) -> None:
        self.path = str(path)


def test_refusals_left_refuses_to_look_while_a_pipe_file_is_held(tmp_path: Path) -> None:
    inst_dir = tmp_path / "instances" / "x"
    (inst_dir / "per_cpu" / "cpu0").mkdir(parents=True)
    pipe = inst_dir / "per_cpu" / "cpu0" / "trace_pipe_raw"
    pipe.touch()
    inst = FakeInstance(inst_dir)
    other = FakeInstance(tmp_path / "instances" / "y")
    assert probe_trace_mmap._pipe_fds_of(inst) == []
    fd = os.open(pipe, os.O_RDONLY)
    try:
        assert probe_trace_mmap._pipe_fds_of(inst) == [str(pipe)]
        assert probe_trace_mmap._pipe_fds_of(other) == []
        with pytest.raises(RuntimeError, match="trace pipe files of the instance open: "
                           + str(pipe)):
            probe_trace_mmap._refusals_left(inst)  # type: ignore[arg-type]
    finally:
        os.close(fd)


def test_a_trace_pipe_is_consumed_until_it_has_nothing_and_its_lines_counted(
        tmp_path: Path) -> None:
    """_consume_pipe() (the persistent check's reads before the reboot) stops at EAGAIN, the
    answer of an empty trace_pipe opened O_NONBLOCK, here a FIFO whose writer stays open."""
    fifo = tmp_path / "trace_pipe"
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)   # so that the writer may open
    writer = os.open(fifo, os.O_WRONLY)
    try:
        os.write(writer, b"a-r0000 x\na-r0001 x\na-r0002 x\n")
        assert probe_trace_mmap._consume_pipe(str(fifo)) == 3
        assert probe_trace_mmap._consume_pipe(str(fifo)) == 0     # nothing left: EAGAIN
    finally:
        os.close(writer)
        os.close(keep)
