"""`./lab nightly`: the lab.yaml section, the cells it expands to, a cell's lab.yaml, the
merged KCIDB document, and a cell reported once."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from harness import cache, config
from harness.commands import nightly
from harness.runs import child_run
from harness.errors import ConfigError
from harness.results import kcidb

REPO = Path(__file__).resolve().parents[2]
KERNELS = """kernels:
  deb: {debian: {suite: trixie, flavour: cloud-amd64}}
  deb2: {debian: {suite: trixie, flavour: amd64}}
  src:
    build:
      tree: tree
      config: {base: defconfig, fragments: [a.config]}
"""


def write(tmp_path: Path, nightly_text: str) -> Path:
    (tmp_path / "tree").mkdir(exist_ok=True)
    for f in ("a.config", "b.config"):
        (tmp_path / f).write_text("CONFIG_PERF_EVENTS=y\n")
    p = tmp_path / "lab.yaml"
    p.write_text(KERNELS + nightly_text)
    return p


def load(tmp_path: Path, nightly_text: str) -> config.LabConfig:
    return config.load(write(tmp_path, nightly_text))


def error_of(tmp_path: Path, nightly_text: str) -> str:
    with pytest.raises(ConfigError) as e:
        load(tmp_path, nightly_text)
    return str(e.value)


def test_shipped_lab_yaml_has_a_small_nightly() -> None:
    cfg = config.load(REPO / "lab.yaml")
    assert cfg.nightly is not None
    names = [c.name for c in nightly.cells(cfg)]
    assert names and all(isinstance(cfg.kernel(n).source, config.DebianKernel) for n in names)


def test_section_defaults(tmp_path: Path) -> None:
    cfg = load(tmp_path, "nightly: {kernels: [deb]}\n")
    assert cfg.nightly == config.NightlySpec(kernels=(config.NightlyKernel("deb"),))
    assert cfg.nightly.refresh is True and cfg.nightly.history is None
    assert cfg.nightly.no_worker_timeout_s == 600


def test_no_section_is_no_nightly(tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, ""))
    assert cfg.nightly is None
    with pytest.raises(ConfigError, match="no `nightly:` section"):
        nightly.cells(cfg)


@pytest.mark.parametrize("text,key,value", [
    ("nightly: {kernels: [nope]}", "nightly.kernels[0]", "'nope'"),
    ("nightly: {kernels: []}", "nightly.kernels", "[]"),
    ("nightly: {kernels: deb}", "nightly.kernels", "'deb'"),
    ("nightly: {kernels: [{kernel: nope}]}", "nightly.kernels[0].kernel", "'nope'"),
    ("nightly: {kernels: [{kernel: deb, branch: main}]}", "nightly.kernels[0].branch", "'main'"),
    ("nightly: {kernels: [{kernel: src, branch: '-x'}]}", "nightly.kernels[0].branch", "'-x'"),
    ("nightly: {kernels: [{kernel: src, branch: 'a..b'}]}", "nightly.kernels[0].branch",
     "'a..b'"),
    ("nightly: {kernels: [deb, deb]}", "nightly.kernels", "['deb', 'deb']"),
    ("nightly: {kernels: [src], variants: {v: a.config}}", "nightly.variants.v", "'a.config'"),
    ("nightly: {kernels: [deb], variants: {v: [a.config]}}", "nightly.variants", "['v']"),
    ("nightly: {kernels: [src], variants: []}", "nightly.variants", "[]"),
    ("nightly: {kernels: [deb], profiles: {p: {cpus: 0}}}", "nightly.profiles.p.cpus", "0"),
    ("nightly: {kernels: [deb], profiles: {'bad name': {}}}", "nightly.profiles.bad name",
     "'bad name'"),
    ("nightly: {kernels: [deb], selections: {s: 3}}", "nightly.selections.s", "3"),
    ("nightly: {kernels: [deb], refresh: 'yes'}", "nightly.refresh", "'yes'"),
    ("nightly: {kernels: [deb], no_worker_timeout_s: 0}", "nightly.no_worker_timeout_s", "0"),
])
def test_a_mistake_is_one_error_naming_file_key_and_value(tmp_path: Path, text: str, key: str,
                                                          value: str) -> None:
    msg = error_of(tmp_path, text + "\n")
    assert msg.startswith(f"{tmp_path / 'lab.yaml'}: {key}: expected "), msg
    assert msg.endswith(f", got {value}"), msg
    assert "\n" not in msg


@pytest.mark.parametrize("text,says", [
    ("nightly: {kernels: [deb], cells: 3}", "nightly.cells: unknown key"),
    ("nightly: {kernels: [{kernel: src, brnch: x}]}", "nightly.kernels[0].brnch: unknown key"),
    ("nightly: {kernels: [deb], profiles: {p: {cpu: 2}}}", "nightly.profiles.p.cpu: unknown key"),
    ("nightly: {kernels: [src], variants: {v: [missing.config]}}",
     "nightly.variants.v[0]: " ),
    ("nightly: {refresh: true}", "nightly.kernels: expected this key to be set"),
])
def test_unknown_keys_and_missing_files_are_named(tmp_path: Path, text: str, says: str) -> None:
    msg = error_of(tmp_path, text + "\n")
    assert msg.startswith(f"{tmp_path / 'lab.yaml'}: {says}"), msg
    assert "\n" not in msg


def test_cells_are_the_product_and_named_by_what_varies(tmp_path: Path) -> None:
    cfg = load(tmp_path, """nightly:
  kernels: [deb, {kernel: src, branch: feature/x}]
  variants: {ringbuf: [a.config], ringbuf+debug: [a.config, b.config]}
  profiles: {1cpu: {cpus: 1}, 2cpu: {cpus: 2, memory_mb: 2048}}
  selections: {perf: test_perf_ring, all: ''}
""")
    got = nightly.cells(cfg)
    names = [c.name for c in got]
    # a Debian kernel has no variants: profiles x selections; the build kernel x variants too
    assert len(got) == 2 * 2 + 2 * 2 * 2
    assert names[:4] == ["deb.1cpu.perf", "deb.1cpu.all", "deb.2cpu.perf", "deb.2cpu.all"]
    assert "src@feature-x.ringbuf+debug.2cpu.perf" in names
    c = got[names.index("src@feature-x.ringbuf+debug.2cpu.all")]
    assert c.kernel.branch == "feature/x" and c.kernel.remote == "origin"
    assert c.variant is not None and c.variant.fragments == (tmp_path / "a.config",
                                                            tmp_path / "b.config")
    assert (c.profile.cpus, c.profile.memory_mb) == (2, 2048) and c.selection.expr is None


def test_one_profile_and_selection_name_the_cell_by_its_kernel(tmp_path: Path) -> None:
    cfg = load(tmp_path, "nightly: {kernels: [deb, deb2]}\n")
    assert [c.name for c in nightly.cells(cfg)] == ["deb", "deb2"]


def test_cell_yaml_is_the_submitters_with_the_cells_values(tmp_path: Path) -> None:
    path = write(tmp_path, "nightly: {kernels: [src], variants: {v: [b.config]}, "
                           "profiles: {big: {cpus: 2}}}\nmachine: {memory_mb: 512}\n")
    cfg = config.load(path)
    [cell] = nightly.cells(cfg)
    raw = yaml.safe_load(path.read_text())
    data = nightly.cell_yaml(raw, tmp_path, cell, tmp_path / "r", (tmp_path / "b.config",))
    assert "nightly" not in data
    build = data["kernels"]["src"]["build"]
    assert build["tree"] == str(tmp_path / "tree")
    assert build["config"] == {"base": "defconfig", "fragments": [str(tmp_path / "b.config")]}
    assert data["machine"] == {"memory_mb": 512, "cpus": 2}
    assert data["reports"] == {"dir": str(tmp_path / "r")}
    assert raw["kernels"]["src"]["build"]["tree"] == "tree"  # the submitter's copy untouched
    # Written elsewhere (the worker's scratch), it loads as the same kernels.
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "lab.yaml").write_text(yaml.safe_dump(data))
    again = config.load(tmp_path / "w" / "lab.yaml")
    assert again.kernel("src").source == config.BuildKernel(
        tmp_path / "tree", (), "defconfig", (tmp_path / "b.config",))
    assert again.machine.cpus == 2 and again.nightly is None


def test_paths_under_the_checkout_travel_relative_to_it(tmp_path: Path) -> None:
    assert nightly.relative_to_repo(REPO / "kernels" / "x.config") == "repo:kernels/x.config"
    assert nightly.from_repo("repo:kernels/x.config", tmp_path) == tmp_path / "kernels/x.config"
    assert nightly.relative_to_repo(tmp_path) == str(tmp_path)
    assert nightly.from_repo(str(tmp_path)) == tmp_path


def test_local_workers_fit_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load(tmp_path, "nightly: {kernels: [deb], profiles: {a: {}, b: {cpus: 2}}}\n")
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert nightly.local_workers(cfg, 10) == 4      # the 2-vCPU profile decides
    assert nightly.local_workers(cfg, 3) == 3       # never more than the cells
    assert nightly.local_workers(cfg, 10, asked=6) == 6
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    assert nightly.local_workers(cfg, 10) == 1


def _doc(release: str, outcome: str, started: float) -> dict:
    return kcidb.from_summary({"release": release, "kernel": "k", "results": [
        {"test": "tests/kernel/test_a.py::test_x", "outcome": outcome}]}, started)


def test_merged_kcidb_keeps_every_cell_once_and_is_valid() -> None:
    now = time.time()
    merged = kcidb.merge({"a": _doc("6.12", "passed", now), "b": _doc("6.12", "failed", now + 1),
                          "c": kcidb.failed_build("src.debug", "build failed: x.c:1", now)})
    kcidb.SCHEMA.validate(merged)
    assert len(merged["checkouts"]) == 2          # the shared release's checkout once
    assert sorted(b["misc"]["nightly_cell"] for b in merged["builds"]) == ["a", "b", "c"]
    assert sorted(b["status"] for b in merged["builds"]) == ["FAIL", "PASS", "PASS"]
    assert sorted(t["status"] for t in merged["tests"]) == ["FAIL", "PASS"]
    assert len({t["id"] for t in merged["tests"]}) == 2


def test_a_cell_is_stored_once(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "summary.json").write_text("{}")
    first = nightly.CellResult("deb", nightly.PASSED, archive=nightly._pack(src))
    again = nightly.CellResult("deb", nightly.FAILED, why="second", archive=b"")
    out = tmp_path / "out"
    out.mkdir()
    assert nightly.store(first, out) == out / "deb"
    nightly.store(again, out)
    assert json.loads((out / "deb" / "cell.json").read_text())["status"] == nightly.PASSED
    assert (out / "deb" / "summary.json").exists()
    assert sorted(p.name for p in out.iterdir()) == ["deb"]  # no temporary folder left


def test_judge_tells_boot_failures_from_test_failures(tmp_path: Path) -> None:
    assert nightly.judge(child_run.read(tmp_path, 0)) == (nightly.PASSED, "")
    (tmp_path / "run.log").write_text("lab: error: the mirror is down\n")
    assert nightly.judge(child_run.read(tmp_path, 2)) == (nightly.ERROR, "the mirror is down")
    results = [{"test": "tests/kernel/test_a.py::test_x", "outcome": "failed"}]
    (tmp_path / "summary.json").write_text(json.dumps({"results": results}))
    (tmp_path / "junit.xml").write_text(
        '<testsuites><testsuite><testcase classname="tests.kernel.test_a" name="test_x">'
        '<failure message="no guest: the kernel panicked"/></testcase></testsuite></testsuites>')
    assert nightly.judge(child_run.read(tmp_path, 1))[0] == nightly.BOOT_FAILED
    results.append({"test": "tests/kernel/test_a.py::test_y", "outcome": "failed"})
    (tmp_path / "summary.json").write_text(json.dumps({"results": results}))
    status, why = nightly.judge(child_run.read(tmp_path, 1))
    assert status == nightly.FAILED and "2 test(s) failed, 1 without a guest" == why


def test_a_worker_at_another_commit_fails_the_cell_saying_so(tmp_path: Path) -> None:
    cfg = load(tmp_path, "nightly: {kernels: [deb]}\n")
    [cell] = nightly.cells(cfg)
    task = nightly.CellTask(cell, "0" * 40, yaml.safe_load(cfg.path.read_text()), str(tmp_path),
                            refresh=False, build=False)
    result = nightly.run_cell(task)
    assert result.status == nightly.ERROR
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert f"is at {head[:12]}, the nightly was submitted from 000000000000" in result.why
    assert result.archive  # the cell's folder (cell.json) still comes back


def test_a_branch_is_fetched_into_a_worktree(tmp_path: Path) -> None:
    def git(cwd: Path, *args: str) -> str:
        return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True,
                              text=True).stdout.strip()
    upstream, tree = tmp_path / "upstream", tmp_path / "tree"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    (upstream / "f").write_text("1")
    git(upstream, "add", "f")
    git(upstream, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    subprocess.run(["git", "clone", "-q", str(upstream), str(tree)], check=True)
    (upstream / "f").write_text("2")
    git(upstream, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two")
    wt, sha = nightly.fetch_branch(tree, "origin", "main", tmp_path / "cache")
    assert sha == git(upstream, "rev-parse", "HEAD")
    assert (wt / "f").read_text() == "2"
    assert (tree / "f").read_text() == "1"   # the user's checkout did not move
    wt2, _ = nightly.fetch_branch(tree, "origin", "main", tmp_path / "cache")
    assert wt2 == wt
    # A cache entry ./lab gc knows; once removed, the next fetch makes it again.
    assert [(e.kind, e.path) for e in cache.entries(tmp_path / "cache")] == [("nightly", wt)]
    removed = cache.collect(tmp_path / "cache", keep=0, max_size=None).removed
    assert [e.path for e in removed] == [wt] and not wt.exists()
    wt3, _ = nightly.fetch_branch(tree, "origin", "main", tmp_path / "cache")
    assert wt3 == wt and (wt / "f").read_text() == "2"


def test_gc_leaves_a_worktree_a_cell_holds(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / "nightly" / "abc").mkdir(parents=True)
    usage = cache.Usage(root)
    usage.use(root / "nightly" / "abc")
    try:
        got = cache.collect(root, keep=0, max_size=None)
        assert not got.removed and [e.path.name for e, _ in got.skipped] == ["abc"]
    finally:
        usage.close()
    assert [e.path.name for e in cache.collect(root, keep=0, max_size=None).removed] == ["abc"]


def test_scratch_of_a_dead_worker_is_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = tmp_path / f"ringlab-cell-{dead.pid}-deb-x"
    alive = tmp_path / "ringlab-cell-1-deb-y"      # pid 1 lives
    gone.mkdir()
    alive.mkdir()
    mine = nightly._scratch("deb")
    assert mine.parent == tmp_path and mine.exists()
    assert not gone.exists() and alive.exists()


def test_the_no_worker_watch_counts_from_the_first_empty_look() -> None:
    watch = nightly.WorkerWatch(limit_s=10)
    assert not watch.expired(2, now=100)
    assert not watch.expired(0, now=105)   # empty from 105
    assert not watch.expired(0, now=114)
    assert not watch.expired(1, now=116)   # a worker came back: the count starts again
    assert not watch.expired(0, now=120)
    assert watch.expired(0, now=130)


def test_an_explore_in_every_cell_is_read_and_checked(tmp_path: Path) -> None:
    cfg = load(tmp_path, "nightly:\n  kernels: [deb]\n  explore: {budget: 2m, paths: "
               "[pinning]}\n")
    assert cfg.nightly is not None
    assert cfg.nightly.explore == config.NightlyExplore(120, ("pinning",))
    assert "nightly.explore.budget" in error_of(
        tmp_path, "nightly:\n  kernels: [deb]\n  explore: {budget: 0s}\n")
    assert "nightly.explore.paths" in error_of(
        tmp_path, "nightly:\n  kernels: [deb]\n  explore: {budget: 1m, paths: [x]}\n")


def test_selftests_in_every_cell_is_a_boolean(tmp_path: Path) -> None:
    cfg = load(tmp_path, "nightly:\n  kernels: [deb]\n  selftests: true\n")
    assert cfg.nightly is not None and cfg.nightly.selftests
    off = load(tmp_path, "nightly:\n  kernels: [deb]\n")
    assert off.nightly is not None and not off.nightly.selftests
    assert "nightly.selftests" in error_of(tmp_path, "nightly:\n  kernels: [deb]\n  selftests: 3\n")


@pytest.mark.parametrize("code, status", [(0, nightly.PASSED), (1, nightly.FAILED),
                                          (2, nightly.ERROR)])
def test_a_cells_explore_is_judged_by_its_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               code: int, status: str) -> None:
    calls = []

    def call(argv: list[str], **kw: object) -> int:
        calls.append(argv)
        return code
    monkeypatch.setattr(nightly.subprocess, "call", call)
    got, why = nightly.explore_cell(tmp_path / "lab.yaml", "trixie-cloud",
                                    config.NightlyExplore(60, ("pinning",)), 20261126, tmp_path)
    assert got == status
    assert calls[0][-7:] == ["--kernel", "trixie-cloud", "--budget", "60s", "--seed",
                             "20261126", "pinning"]
    assert ("a new failure" in why) == (code == 1)
