"""`./lab module NAME`: the command line parses to the verb's main; main asks the Lab for the
module built for the kernel resolved once (its spec in the Lab's config under the name asked
for, a command-line kernel included) and prints the .ko path. The Lab is a fake: nothing is
built."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli, config, host
from harness.commands import module


def _lab_yaml(tmp_path: Path) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text("default_kernel: deb\nkernels:\n"
                    "  deb:\n    debian: {suite: trixie, flavour: cloud-amd64}\n"
                    "  sid:\n    debian: {suite: sid, flavour: cloud-amd64}\n")
    return path


class FakeLab:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str | None]] = []
        self.configs: list[config.LabConfig] = []

    def __call__(self, cfg: config.LabConfig) -> FakeLab:
        self.configs.append(cfg)
        return self

    def module(self, name: str, kernel_name: str | None = None) -> Path:
        self.asked.append((name, kernel_name))
        return Path(f"/cache/{name}-{kernel_name}.ko")


def test_module_parses_and_dispatches_to_main() -> None:
    args = cli.build_parser(("module",)).parse_args(["module", "ringlab_splat", "--kernel", "k"])
    assert args.func is module.main and (args.name, args.kernel) == ("ringlab_splat", "k")


def test_the_verb_declares_no_build_tools_and_logs_to_the_screen() -> None:
    needs = host.verb_needs("module")
    assert needs.own_logging is False and needs.host_tools == ()
    assert (module.OWN_LOGGING, module.HOST_TOOLS) == (False, ())


@pytest.mark.parametrize("kernel, name", [([], "deb"), (["--kernel", "sid"], "sid"),
                                          (["--kernel", "debian:forky/cloud-amd64"],
                                           "debian:forky/cloud-amd64")])
def test_main_asks_the_lab_for_the_resolved_kernels_module(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        kernel: list[str], name: str) -> None:
    lab = FakeLab()
    monkeypatch.setattr(module, "Lab", lab)
    args = cli.build_parser(("module",)).parse_args(
        ["--lab-config", str(_lab_yaml(tmp_path)), "module", "perf_aux_test", *kernel])
    assert module.main(args) == 0
    assert lab.asked == [("perf_aux_test", name)]
    assert lab.configs[0].kernel(name).name == name  # found as resolved, not resolved again
    assert capsys.readouterr().out == f"/cache/perf_aux_test-{name}.ko\n"
