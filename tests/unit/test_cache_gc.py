"""./lab gc on a fake cache tree (harness/cache.py): what the last N runs used is kept, the
least recently used goes beyond --max-size, --dry-run frees nothing, a held entry is skipped."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import cache, cli
from harness.errors import ConfigError

MiB = 2**20


def _entry(root: Path, kind: str, name: str, mib: int) -> Path:
    path = root / kind / name
    path.mkdir(parents=True)
    (path / "blob").write_bytes(b"x" * (mib * MiB))
    return path


def _use(root: Path, path: Path, run: str, when: float) -> None:
    """`path` used by run `run` that started at `when` (stamp and runs.log dated so)."""
    usage = cache.Usage(root, run)
    usage.use(path)
    usage.close()
    os.utime(root / "usage" / path.parent.name / f"{path.name}.used", (when + 5, when + 5))
    lines = (root / "runs.log").read_text().splitlines()
    (root / "runs.log").write_text("\n".join(lines[:-1] + [f"{run} {when:.0f}"]) + "\n")


@pytest.fixture
def fake(tmp_path: Path) -> dict[str, Path]:
    """Four entries of four kinds, used by runs 1 to 4 (an hour apart), oldest first."""
    root = tmp_path / "cache"
    paths = {"tree": _entry(root, "trees", "linux-source-6.12_1", 4),
             "build": _entry(root, "builds", "aaaa", 3),
             "kernel": _entry(root, "kernels", "build-bbbb", 2),
             "bisect": _entry(root, "bisect", "cccc", 1)}
    for i, path in enumerate(paths.values()):
        _use(root, path, f"run{i + 1}", 1_800_000_000 + 3600 * i)
    (root / "builds" / ".aaaa.scratch").mkdir()  # being built: never an entry
    (root / "debs").mkdir()
    (root / "debs" / "k.deb").write_bytes(b"d" * MiB)  # not a kind gc removes
    return {"root": root, **paths}


def test_entries_and_their_last_use(fake) -> None:
    found = {e.path.name: e for e in cache.entries(fake["root"])}
    assert set(found) == {"linux-source-6.12_1", "aaaa", "build-bbbb", "cccc"}
    assert found["aaaa"].kind == "builds" and 3 * MiB <= found["aaaa"].size < 3 * MiB + 65536
    assert found["aaaa"].last_used == 1_800_003_605
    assert [r for r, _ in cache.runs(fake["root"])] == ["run1", "run2", "run3", "run4"]


def test_keep_n_removes_what_no_recent_run_used(fake) -> None:
    result = cache.collect(fake["root"], keep=2, max_size=None)
    assert sorted(e.path.name for e in result.removed) == ["aaaa", "linux-source-6.12_1"]
    assert not fake["tree"].exists() and not fake["build"].exists()
    assert fake["kernel"].exists() and fake["bisect"].exists()
    assert (fake["root"] / "debs" / "k.deb").exists()
    assert "freed 4.0 MiB of unpacked trees" in result.lines()
    assert "freed 3.0 MiB of build folders" in result.lines()
    assert result.lines()[-1].startswith("freed 7.0 MiB in total; 2 entries kept")


def test_fewer_runs_on_record_than_n_keeps_everything(fake) -> None:
    assert cache.collect(fake["root"], keep=5, max_size=None).removed == []


def test_max_size_removes_the_least_recently_used_first(fake) -> None:
    result = cache.collect(fake["root"], keep=None, max_size=4 * MiB)
    assert [e.path.name for e in result.removed] == ["linux-source-6.12_1", "aaaa"]
    assert fake["kernel"].exists() and fake["bisect"].exists()


def test_dry_run_frees_nothing_but_says_what_it_would(fake) -> None:
    result = cache.collect(fake["root"], keep=0, max_size=None, dry_run=True)
    assert len(result.removed) == 4
    assert all(p.exists() for k, p in fake.items() if k != "root")
    assert result.lines()[-1].startswith("would free 10.0 MiB in total")


def test_an_entry_a_running_lab_holds_is_skipped(fake) -> None:
    lab = cache.Usage(fake["root"], "run5")
    lab.use(fake["build"] / "out" / "vmlinux")  # a path inside the entry holds the entry
    try:
        result = cache.collect(fake["root"], keep=0, max_size=None)
    finally:
        lab.close()
    assert fake["build"].exists() and not fake["tree"].exists()
    assert [(e.path.name, why) for e, why in result.skipped] == \
        [("aaaa", "in use by a running lab (its lock is held)")]
    assert "skipped builds/aaaa: in use by a running lab (its lock is held)" in result.lines()
    assert cache.collect(fake["root"], keep=0, max_size=None).removed[0].path == fake["build"]


def test_a_use_is_stamped_with_the_run_of_the_command(tmp_path, monkeypatch) -> None:
    root = tmp_path / "cache"
    entry = _entry(root, "kernels", "k", 0)
    monkeypatch.setenv(cache.RUN_ENV, "20261122-101010-42")
    cache.mark_used(root, entry / "vmlinuz")
    cache.mark_used(root, tmp_path / "elsewhere")  # not in the cache: nothing
    assert (root / "usage/kernels/k.used").read_text() == "20261122-101010-42\n"
    assert [r for r, _ in cache.runs(root)] == ["20261122-101010-42"]
    assert cache.entry_of(root, root / "builds" / ".x.tmp" / "f") is None


@pytest.mark.parametrize("text, size", [("20G", 20 * 2**30), ("512M", 512 * MiB),
                                        ("1.5k", 1536), ("4096", 4096), ("2GiB", 2 * 2**30)])
def test_sizes(text: str, size: int) -> None:
    assert cache.parse_size(text) == size


def test_a_bad_size_names_the_option() -> None:
    with pytest.raises(ConfigError, match="--max-size"):
        cache.parse_size("lots")
    assert cache.human(1536) == "1.5 KiB" and cache.human(10) == "10 B"


def test_lab_gc_prints_what_it_freed(fake, monkeypatch, capsys) -> None:
    monkeypatch.setenv("RINGLAB_CACHE", str(fake["root"]))
    assert cli.main(["gc", "--keep", "1", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would remove trees/linux-source-6.12_1 (4.0 MiB)" in out
    assert "would free 9.0 MiB in total; 1 entries kept (1.0 MiB)" in out
    assert cli.main(["gc", "--max-size", "nonsense"]) == 2
