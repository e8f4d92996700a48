"""The nightly section of lab.yaml, the cells it expands to, and each cell as the RunRequest
of its `./lab run`: the variant a spec, the profile a machine, the selection a -k."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from harness import config, paths
from harness.errors import ConfigError
from harness.nightly import matrix
from harness.runs.request import RunRequest

from .conftest import error_of, load, write


def test_shipped_lab_yaml_has_a_small_nightly() -> None:
    cfg = config.load(paths.REPO / "lab.yaml")
    assert cfg.nightly is not None
    cells = matrix.cells(cfg)
    debian = [c.name for c in cells if isinstance(cfg.kernel(c.name).source, config.DebianKernel)]
    built = [c for c in cells if c.name not in debian]
    assert debian
    # The one build: the race cell (issue 43), exploring with actors and loads.
    assert [c.name for c in built] == ["src-7.2-race"]
    race = built[0].kernel.explore
    assert race is not None and race.actors >= 2 and race.load


def test_section_defaults(tmp_path: Path) -> None:
    cfg = load(tmp_path, "nightly: {kernels: [deb]}\n")
    assert cfg.nightly == config.NightlySpec(kernels=(config.NightlyKernel("deb"),))
    assert cfg.nightly.refresh is True and cfg.nightly.history is None
    assert cfg.nightly.no_worker_timeout_s == 600


def test_no_section_is_no_nightly(tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, ""))
    assert cfg.nightly is None
    with pytest.raises(ConfigError, match="no `nightly:` section"):
        matrix.cells(cfg)


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
     "nightly.variants.v[0]: "),
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
    got = matrix.cells(cfg)
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
    assert [c.name for c in matrix.cells(cfg)] == ["deb", "deb2"]


def test_cells_are_chosen_by_name(tmp_path: Path) -> None:
    cfg = load(tmp_path, "nightly: {kernels: [deb, deb2]}\n")
    assert [c.name for c in matrix.chosen(cfg, ())] == ["deb", "deb2"]
    assert [c.name for c in matrix.chosen(cfg, ("deb2",))] == ["deb2"]
    with pytest.raises(ConfigError, match="--cell nope: .* its cells are: deb, deb2"):
        matrix.chosen(cfg, ("nope",))


def test_a_cell_is_a_run_request_of_its_variant_profile_and_selection(tmp_path: Path) -> None:
    cfg = load(tmp_path, "nightly: {kernels: [deb, src], variants: {v: [b.config]}, "
                         "profiles: {small: {}, big: {cpus: 2}}, "
                         "selections: {perf: test_perf_ring}}\nmachine: {memory_mb: 512}\n")
    by_name = {c.name: c for c in matrix.cells(cfg)}
    assert sorted(by_name) == ["deb.big", "deb.small", "src.v.big", "src.v.small"]
    req = matrix.run_request(cfg, by_name["src.v.big"], tmp_path / "out" / "src.v.big",
                             refresh=False, selftests=True)
    assert req == RunRequest(
        cfg.path, config.KernelSpec("src+v", config.BuildKernel(
            tmp_path / "tree", (), "defconfig", (tmp_path / "b.config",))),
        tmp_path / "out" / "src.v.big", selection="test_perf_ring", selftests=True,
        machine=config.MachineSpec(cpus=2, memory_mb=512))
    # lab.yaml's own kernel is untouched, and a Debian kernel is lab.yaml's as it is.
    assert cfg.kernels["src"].source.fragments == (tmp_path / "a.config",)  # type: ignore[union-attr]
    deb = matrix.run_request(cfg, by_name["deb.small"], tmp_path, refresh=True, selftests=False)
    assert deb.kernel is cfg.kernels["deb"] and deb.refresh
    assert deb.machine == config.MachineSpec(memory_mb=512)  # the submitter's machine travels
    assert deb.history is None  # the nightly keeps the history itself (report.py)


def test_a_cells_request_survives_the_trip_to_a_worker(tmp_path: Path) -> None:
    cfg = load(tmp_path, "nightly: {kernels: [src], variants: {v: [b.config]}, "
                         "profiles: {big: {cpus: 2}}}\n")
    [cell] = matrix.cells(cfg)
    req = matrix.run_request(cfg, cell, tmp_path / "r", refresh=False, selftests=False)
    assert pickle.loads(pickle.dumps(req)) == req
    assert RunRequest.from_json(req.to_json()) == req
