"""probes/tracefs.py on the host: which root is tracefs (its debugfs fallback), a mount table's
noexec, and instances made and removed, on folders standing in for tracefs."""
from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

import probelib  # from probes/ (pytest's pythonpath): guest-side, stdlib only
import tracefs


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """tracing and debug/tracing folders as tracefs's two places, neither mounted yet."""
    tracing, debug = tmp_path / "tracing", tmp_path / "debug" / "tracing"
    tracing.mkdir()
    debug.mkdir(parents=True)
    monkeypatch.setattr(tracefs, "ROOTS", (str(tracing), str(debug)))
    return tracing, debug


def mount(root: Path) -> Path:
    """What tracefs has that an empty mount point has not."""
    (root / "trace_marker").touch()
    (root / "instances").mkdir()
    return root


def test_the_real_places() -> None:
    assert tracefs.ROOTS == ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")


def test_tracefs_at_its_own_mount_point_comes_first(roots: tuple[Path, Path]) -> None:
    tracing, debug = roots
    mount(debug)
    mount(tracing)
    assert tracefs.root() == tracefs.find_root() == str(tracing)


def test_tracefs_only_under_debugfs_is_found_there(roots: tuple[Path, Path]) -> None:
    tracing, debug = roots  # /sys/kernel/tracing an empty folder: tracefs not mounted on it
    mount(debug)
    assert tracefs.root() == str(debug)
    assert tracefs.path("per_cpu/cpu0/trace_pipe_raw") == f"{debug}/per_cpu/cpu0/trace_pipe_raw"


def test_no_tracefs_skips_naming_both_places(roots: tuple[Path, Path]) -> None:
    assert tracefs.find_root() is None
    with pytest.raises(probelib.Skip) as e:
        tracefs.root()
    assert str(e.value) == f"no tracefs mounted at {roots[0]} or {roots[1]}"
    # what is missing is named where it usually is
    assert tracefs.path("perf") == f"{roots[0]}/perf"


def test_read_takes_the_first_place_that_has_the_file(roots: tuple[Path, Path]) -> None:
    tracing, debug = roots
    (debug / "events" / "syscalls" / "x").mkdir(parents=True)
    (debug / "events" / "syscalls" / "x" / "id").write_text("321\n")
    assert tracefs.read("events/syscalls/x/id") == "321\n"
    (tracing / "events" / "syscalls" / "x").mkdir(parents=True)
    (tracing / "events" / "syscalls" / "x" / "id").write_text("123\n")
    assert tracefs.read("events/syscalls/x/id") == "123\n"
    assert tracefs.read("events/none/id") is None


MOUNTS = """\
sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
tracefs /sys/kernel/tracing tracefs rw,nosuid,nodev,noexec,relatime 0 0
debugfs /sys/kernel/debug debugfs rw,nosuid,nodev,relatime 0 0
tracefs /sys/kernel/debug/tracing tracefs rw,relatime 0 0
"""


def test_noexec_reads_the_mount_table(tmp_path: Path) -> None:
    table = tmp_path / "mounts"
    table.write_text(MOUNTS)
    assert tracefs.noexec("/sys/kernel/tracing", str(table))
    assert not tracefs.noexec("/sys/kernel/debug/tracing", str(table))
    assert not tracefs.noexec("/nowhere", str(table))


def test_write_file_says_ok_or_the_errno(tmp_path: Path) -> None:
    f = tmp_path / "buffer_size_kb"
    f.write_text("1408\n")
    assert tracefs.write_file(str(f), "64") == "ok"
    assert tracefs.read_file(str(f)) == "64"  # truncated, as `echo 64 >` does
    assert tracefs.write_file(str(tmp_path / "none" / "x"), "1") == "ENOENT"


def test_an_instance_is_made_and_removed(roots: tuple[Path, Path]) -> None:
    root = mount(roots[0])
    inst = tracefs.Instance(str(root), "ringlab-1")
    assert inst.path == f"{root}/instances/ringlab-1"
    inst.create()
    size = root / "instances" / "ringlab-1" / "buffer_size_kb"
    size.write_text("7\n")  # tracefs's part: the new instance's files
    assert inst.set("buffer_size_kb", 32) == "ok" and inst.get("buffer_size_kb") == "32"
    assert inst.set("no_such_file", 1) == "ENOENT"  # write_file() creates nothing
    size.unlink()  # rmdir of a tracefs instance takes its files along
    assert inst.remove() == "ok" and not Path(inst.path).exists()
    assert inst.remove() == "ENOENT"


def test_a_leftover_instance_of_a_killed_run_is_made_again(roots: tuple[Path, Path]) -> None:
    root = mount(roots[0])
    (root / "instances" / "ringlab-1").mkdir()
    tracefs.Instance(str(root), "ringlab-1").create()
    assert (root / "instances" / "ringlab-1").is_dir()


class Marked(tracefs.Instance):
    made: list[str] = []

    def create(self) -> None:
        super().create()
        self.made.append(self.name)


def test_instance_for_the_duration_under_the_mounted_root(roots: tuple[Path, Path]) -> None:
    root = mount(roots[1])
    with tracefs.instance("ringlab-pin-7", Marked) as inst:
        assert isinstance(inst, Marked) and Marked.made == ["ringlab-pin-7"]
        assert inst.root == str(root) and Path(inst.path).is_dir()
    assert not Path(inst.path).exists()


def test_instance_without_tracefs_skips(roots: tuple[Path, Path]) -> None:
    with pytest.raises(probelib.Skip, match="no tracefs mounted"):
        with tracefs.instance("ringlab-1", tracefs.Instance):
            pass


def test_a_probe_that_raises_lets_go_of_its_instance_so_it_can_be_removed(roots) -> None:
    # A mapped or open buffer makes rmdir of an instance EBUSY: a probe that raised with one
    # held left the instance behind, and the next test found the guest changed.
    tracing, _ = roots
    mount(tracing)
    held: dict[str, int] = {}
    with pytest.raises(ValueError):
        with tracefs.instance("x", tracefs.Instance) as inst:
            buf = Path(inst.path) / "trace_pipe_raw"
            buf.write_bytes(b"\0" * 4096)
            held["fd"] = os.open(buf, os.O_RDONLY)
            addr = probelib.libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, held["fd"], 0)
            assert tracefs.mappings_under(inst.path) == [(addr, addr + 4096)]
            assert tracefs.open_fds_under(inst.path) == {held["fd"]: str(buf)}
            os.unlink(buf)  # an instance's files go with it; here rmdir needs it gone
            raise ValueError("the probe failed")
    assert tracefs.mappings_under(inst.path) == []
    assert tracefs.open_fds_under(inst.path) == {}
    assert not Path(inst.path).exists()


def test_an_instance_left_normally_keeps_what_the_probe_holds(roots) -> None:
    tracing, _ = roots
    mount(tracing)
    with tracefs.instance("x", tracefs.Instance) as inst:
        buf = Path(inst.path) / "trace"
        buf.touch()
        fd = os.open(buf, os.O_RDONLY)
        os.unlink(buf)
    try:
        os.fstat(fd)  # still open: only a raising probe is tidied up after
    finally:
        os.close(fd)


class MarkerInstance(tracefs.Instance):
    """Like probe_trace_mmap's: keeps an fd of its own open, closed in remove()."""

    def create(self) -> None:
        super().create()
        self.marker = os.open(f"{self.path}/trace_marker", os.O_WRONLY | os.O_CREAT)
        os.unlink(f"{self.path}/trace_marker")

    def remove(self) -> str:
        os.close(self.marker)  # EBADF if release() had closed it
        return super().remove()

    def own_fds(self) -> frozenset[int]:
        return frozenset({self.marker})


def test_a_skip_keeps_its_reason_and_the_instance_its_own_fds(roots) -> None:
    # A Skip raised inside the instance (no latency tracer, say) must reach the caller as
    # the Skip, not as the EBADF of the instance closing an fd release() took from it.
    tracing, _ = roots
    mount(tracing)
    with pytest.raises(probelib.Skip, match="no latency tracer"):
        with tracefs.instance("x", MarkerInstance):
            raise probelib.Skip("no latency tracer")
