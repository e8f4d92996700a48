"""`./lab build`: the command line parses to the verb's main, which declares the build tools
./lab's host check installs; a kernel that is not a `build` kernel is the user's error naming
the build kernels there are; a build kernel goes to the Lab's builder as the spec resolved once,
and main prints what the build report says (cached, or built with its steps, log and the
fragment options olddefconfig dropped). The builder is a fake: nothing is compiled."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import cli, config, host
from harness.commands import build
from harness.errors import LabError
from harness.kernels.kbuild import BuildReport


def _lab_yaml(tmp_path: Path, builds: bool = True) -> Path:
    tree = tmp_path / "linux"
    tree.mkdir(exist_ok=True)
    path = tmp_path / "lab.yaml"
    mine = (f"  mine:\n    build:\n      tree: {tree}\n"
            f"  other:\n    build:\n      tree: {tree}\n") if builds else ""
    path.write_text("default_kernel: deb\nkernels:\n" + mine +
                    "  deb:\n    debian: {suite: trixie, flavour: cloud-amd64}\n")
    return path


def test_build_parses_and_dispatches_to_main() -> None:
    args = cli.build_parser(("build",)).parse_args(["build", "--kernel", "mine"])
    assert args.func is build.main and args.kernel == "mine" and args.modules is None


def test_the_verb_declares_the_build_tools_and_logs_to_the_screen() -> None:
    needs = host.verb_needs("build")
    assert needs.own_logging is False and needs.host_tools == ("build",)
    assert (build.OWN_LOGGING, build.HOST_TOOLS) == (False, ("build",))


class FakeLab:
    """A Lab whose builder records what it is asked to build and answers `report`."""
    def __init__(self, report: BuildReport) -> None:
        self.report = report
        self.built: list[tuple[config.KernelSpec, config.BuildKernel]] = []
        self.configs: list[config.LabConfig] = []

    def __call__(self, cfg: config.LabConfig) -> FakeLab:
        self.configs.append(cfg)
        return self

    def builder(self) -> FakeLab:
        return self

    def prepare(self, spec: config.KernelSpec, source: config.BuildKernel
                ) -> tuple[SimpleNamespace, BuildReport]:
        self.built.append((spec, source))
        return SimpleNamespace(release="7.2.0-rc1", vmlinuz=Path("/c/vmlinuz")), self.report


@pytest.mark.parametrize("builds, listed", [(True, "mine, other"), (False, "none")])
def test_a_kernel_not_built_by_the_lab_is_an_error_listing_the_build_kernels(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, builds: bool, listed: str) -> None:
    lab = FakeLab(BuildReport("deb"))
    monkeypatch.setattr(build, "Lab", lab)
    args = cli.build_parser(("build",)).parse_args(
        ["--lab-config", str(_lab_yaml(tmp_path, builds)), "build", "--kernel", "deb"])
    with pytest.raises(LabError, match=f"kernel deb is not a `build` kernel of .*; the build "
                       f"kernels are: {listed}$"):
        build.main(args)
    assert lab.built == []


def test_a_build_kernel_is_built_and_what_was_done_printed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    lab = FakeLab(BuildReport("mine", seconds=61.4, compiled=1234, log=Path("/c/build.log"),
                              dropped=["CONFIG_KASAN=y"]))
    monkeypatch.setattr(build, "Lab", lab)
    lab_yaml = _lab_yaml(tmp_path)
    args = cli.build_parser(("build",)).parse_args(
        ["--lab-config", str(lab_yaml), "build", "--kernel", "mine"])
    assert build.main(args) == 0
    spec = config.load(lab_yaml).kernels["mine"]
    assert lab.built == [(spec, spec.source)]
    assert lab.configs[0].kernel("mine") == spec
    assert capsys.readouterr().out.splitlines() == [
        "mine: 7.2.0-rc1: /c/vmlinuz",
        "  built in 61 s, 1234 make steps, log /c/build.log",
        "  fragment option not in the final .config: CONFIG_KASAN=y"]


def test_a_cached_build_says_so_and_nothing_of_make(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(build, "Lab", FakeLab(BuildReport("mine", cached=True, compiled=9)))
    args = cli.build_parser(("build",)).parse_args(
        ["--lab-config", str(_lab_yaml(tmp_path)), "build", "--kernel", "mine"])
    assert build.main(args) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["  cached (nothing changed)"]


def test_a_source_tree_on_the_command_line_is_a_build_kernel(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "src"
    tree.mkdir()
    (tree / "Kconfig").write_text("")
    (tree / "Makefile").write_text("")
    lab = FakeLab(BuildReport("src", cached=True))
    monkeypatch.setattr(build, "Lab", lab)
    args = cli.build_parser(("build",)).parse_args(
        ["--lab-config", str(_lab_yaml(tmp_path)), "build", "--kernel", str(tree)])
    assert build.main(args) == 0
    ((spec, source),) = lab.built
    assert spec.name == str(tree.resolve()) and isinstance(source, config.BuildKernel)
    assert source.tree == tree.resolve()
    assert lab.configs[0].kernel(spec.name) is spec  # resolved once, in the Lab's config
