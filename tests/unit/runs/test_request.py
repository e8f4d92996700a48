"""harness/runs/request.py: the one typed request a run is given, with its kernel resolved
once. Every kind of kernel and every field survives the JSON a child run and the plugin read,
and the request's kernel is found by name in its run's config without resolving it again."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import config
from harness.config import (BuildKernel, DebianKernel, DebianSource, KernelSpec, MachineSpec,
                            PathKernel)
from harness.errors import ConfigError
from harness.runs import request
from harness.runs.request import RunRequest

KERNELS = (
    KernelSpec("trixie-cloud", DebianKernel("trixie", "cloud-amd64", "amd64", "6.12.117-1"),
               cmdline="quiet"),
    KernelSpec("/img/bzImage?modules=/m", PathKernel(Path("/img/bzImage"), Path("/m"))),
    KernelSpec("/build/out", PathKernel(Path("/build/out/arch/x86/boot/bzImage"),
                                        build_dir=Path("/build/out"))),
    KernelSpec("src", BuildKernel(DebianSource("sid", "linux-source-7.2", "7.2.13-1"),
                                  (Path("/s/one"), Path("/s/two")), "debian:sid-cloud",
                                  (Path("/f/ringbuf.config"),)), arch="arm64"),
    KernelSpec("tree", BuildKernel(Path("/home/me/linux"))),
)


@pytest.mark.parametrize("spec", KERNELS, ids=lambda s: type(s.source).__name__)
def test_every_kind_of_kernel_round_trips(spec: KernelSpec) -> None:
    req = RunRequest(Path("/lab.yaml"), spec, Path("/r/k"))
    assert RunRequest.from_json(req.to_json()) == req


def test_every_field_round_trips() -> None:
    req = RunRequest(Path("/lab.yaml"), KERNELS[3], Path("/r/k"), selection="ring and not aux",
                     jobs="2", refresh=True, history="/h", keep_guest=True, gdb_on_failure=True,
                     selftests=True, selftests_from=Path("/tree"),
                     machine=MachineSpec(cpus=2, memory_mb=2048), pytest_args=("-x", "-q"))
    assert RunRequest.from_json(req.to_json()) == req


def test_a_request_that_cannot_be_read_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="a run request that cannot be read"):
        RunRequest.from_json('{"kernel": "k"}')


def _lab_yaml(tmp_path: Path) -> config.LabConfig:
    tree = tmp_path / "linux"
    tree.mkdir()
    path = tmp_path / "lab.yaml"
    path.write_text(f"default_kernel: mine\nkernels:\n  mine:\n    build:\n      tree: {tree}\n"
                    f"  deb:\n    debian: {{suite: trixie, flavour: cloud-amd64}}\n")
    return config.load(path)


def test_make_applies_a_build_change_once(tmp_path: Path) -> None:
    cfg = _lab_yaml(tmp_path)
    series = tmp_path / "series"
    series.mkdir()
    req = request.make(cfg, "mine", tmp_path / "r", series=(series,), tree=tmp_path / "wt")
    assert isinstance(req.kernel.source, BuildKernel)
    assert req.kernel.source.series == (series,) and req.kernel.source.tree == tmp_path / "wt"
    assert cfg.kernels["mine"].source.series == ()  # lab.yaml's own kernel is untouched


def test_only_a_build_kernel_can_be_varied(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a `build` kernel"):
        request.make(_lab_yaml(tmp_path), "deb", tmp_path / "r", tree=tmp_path)


def test_the_run_config_holds_the_requests_kernel_and_machine(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    cfg = _lab_yaml(tmp_path)
    req = RunRequest(cfg.path, KERNELS[1], tmp_path / "r", machine=MachineSpec(cpus=2))
    run_cfg = request.run_config(req, cfg)
    # Found by its name as it is: never handed to command_line_kernel again.
    monkeypatch.setattr(config, "command_line_kernel",
                        lambda *a: pytest.fail("the kernel was resolved again"))
    assert run_cfg.kernel(KERNELS[1].name) == KERNELS[1]
    assert run_cfg.machine.cpus == 2 and run_cfg.kernels["mine"] == cfg.kernels["mine"]


def test_the_plugin_reads_the_request_the_run_wrote(tmp_path: Path) -> None:
    req = RunRequest(Path("/lab.yaml"), KERNELS[0], tmp_path)
    assert request.read(request.write(req)) == req
    with pytest.raises(ConfigError, match="cannot read the run request"):
        request.read(tmp_path / "nope.json")
