"""harness/commands/options.py: the option groups verbs share. `kernel_spec` is the one place
--kernel/--modules become a spec (a lab.yaml name, the default kernel, or an image with its
modules), --modules alone is the user's mistake said as such, and `config_and_kernel` puts the
spec into the config under its own name so nothing resolves it a second time."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from harness import config
from harness.commands import options
from harness.config import BuildKernel, PathKernel
from harness.errors import ConfigError


def _lab_yaml(tmp_path: Path) -> Path:
    tree = tmp_path / "linux"
    tree.mkdir()
    path = tmp_path / "lab.yaml"
    path.write_text(f"default_kernel: mine\nkernels:\n  mine:\n    build:\n      tree: {tree}\n"
                    f"  deb:\n    debian: {{suite: trixie, flavour: cloud-amd64}}\n")
    return path


def _bzimage(tmp_path: Path) -> Path:
    """A file whose header says x86 bzImage (boot protocol 'HdrS' at 0x202)."""
    image = tmp_path / "bzImage"
    image.write_bytes(b"\0" * 0x202 + b"HdrS" + b"\0" * 64)
    return image


def _args(lab_config: Path | None = None, **kw: object) -> argparse.Namespace:
    return argparse.Namespace(lab_config=str(lab_config) if lab_config else None, **kw)


def test_no_kernel_is_the_default_kernel_of_lab_yaml(tmp_path: Path) -> None:
    cfg = config.load(_lab_yaml(tmp_path))
    spec = options.kernel_spec(cfg, _args(kernel=None, modules=None))
    assert spec.name == "mine" and isinstance(spec.source, BuildKernel)


def test_a_lab_yaml_name_is_its_own_spec(tmp_path: Path) -> None:
    cfg = config.load(_lab_yaml(tmp_path))
    assert options.kernel_spec(cfg, _args(kernel="deb", modules=None)) is cfg.kernels["deb"]


def test_modules_without_a_kernel_is_a_config_error(tmp_path: Path) -> None:
    cfg = config.load(_lab_yaml(tmp_path))
    mods = tmp_path / "mods"
    mods.mkdir()
    with pytest.raises(ConfigError, match="--modules goes with --kernel IMAGE"):
        options.kernel_spec(cfg, _args(kernel=None, modules=str(mods)))


def test_an_image_and_its_modules_are_one_spec_named_after_both(tmp_path: Path) -> None:
    cfg = config.load(_lab_yaml(tmp_path))
    image, mods = _bzimage(tmp_path), tmp_path / "mods"
    mods.mkdir()
    spec = options.kernel_spec(cfg, _args(kernel=str(image), modules=str(mods)))
    assert isinstance(spec.source, PathKernel)
    assert spec.source.image == image.resolve() and spec.source.modules == mods.resolve()
    assert spec.name == f"{image.resolve()}{config.MODULES_SUFFIX}{mods.resolve()}"


def test_a_verb_without_a_modules_option_still_resolves_its_kernel(tmp_path: Path) -> None:
    cfg = config.load(_lab_yaml(tmp_path))
    spec = options.kernel_spec(cfg, _args(kernel="deb"))  # no `modules` attribute at all
    assert spec.name == "deb"


def test_an_unknown_kernel_name_is_a_config_error_naming_it(tmp_path: Path) -> None:
    cfg = config.load(_lab_yaml(tmp_path))
    with pytest.raises(ConfigError, match="unknown kernel 'nosuch'"):
        options.kernel_spec(cfg, _args(kernel="nosuch", modules=None))


def test_config_and_kernel_resolve_the_kernel_once(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    image = _bzimage(tmp_path)
    calls: list[str] = []
    real = config.command_line_kernel

    def counted(arg: str, *a: object, **kw: object) -> object:
        calls.append(arg)
        return real(arg, *a, **kw)  # type: ignore[arg-type]
    monkeypatch.setattr(config, "command_line_kernel", counted)
    cfg, spec = options.config_and_kernel(_args(_lab_yaml(tmp_path), kernel=str(image),
                                                modules=None))
    assert calls == [str(image)]
    # The spec is in the config under its name: a look-up by that name finds it as it is.
    assert cfg.kernel(spec.name) is spec
    assert calls == [str(image)]


def test_config_and_kernel_read_the_lab_config_given(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RINGLAB_CONFIG", str(tmp_path / "not-this.yaml"))
    cfg, spec = options.config_and_kernel(_args(_lab_yaml(tmp_path), kernel=None, modules=None))
    assert cfg.path == tmp_path / "lab.yaml" and spec.name == "mine"


def test_the_kernel_options_parse_as_declared() -> None:
    p = argparse.ArgumentParser()
    options.kernel(p)
    options.selection(p)
    options.runs(p, 3)
    options.pytest_args(p)
    a = p.parse_args(["--kernel", "k", "--modules", "/m", "-k", "ring", "x", "y"])
    assert (a.kernel, a.modules, a.k, a.runs, a.pytest_args) == ("k", "/m", "ring", 3, ["x", "y"])


def test_failure_policies_default_to_skip_and_refuse_others(
        capsys: pytest.CaptureFixture[str]) -> None:
    p = argparse.ArgumentParser()
    options.failure_policies(p)
    a = p.parse_args([])
    assert (a.on_build_failure, a.on_boot_failure) == ("skip", "skip")
    assert p.parse_args(["--on-boot-failure", "bad"]).on_boot_failure == "bad"
    with pytest.raises(SystemExit):
        p.parse_args(["--on-build-failure", "ignore"])
    assert "invalid choice: 'ignore'" in capsys.readouterr().err
