"""A `path` kernel (an image and modules you already have), and the CLI's other commands."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from harness import config
from harness.resources import Lab

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_stray_qemu")]


@pytest.fixture(scope="module")
def unpacked_kernel(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """The default Debian kernel unpacked as a user's own build would be: an image and a
    lib/modules tree (taken from the .deb the lab has cached)."""
    k = lab.kernel(None)
    meta = json.loads((k.vmlinuz.parent / "kernel.json").read_text())
    deb = lab.layout.deb(meta["package"]["filename"])
    out = tmp_path_factory.mktemp("unpacked")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(out)], check=True)
    image = next((out / "boot").glob("vmlinuz-*"))
    return image, out / "usr" / "lib" / "modules", k.release


def test_path_kernel_boots_with_its_modules(tmp_path: Path, make_lab_yaml,
                                            unpacked_kernel: tuple[Path, Path, str]) -> None:
    image, modules, release = unpacked_kernel
    cfg_path = make_lab_yaml()
    data = yaml.safe_load(cfg_path.read_text())
    data["kernels"]["mine"] = {"path": {"image": str(image), "modules": str(modules)},
                               "cmdline": "ringlab.selftest=1"}
    cfg_path.write_text(yaml.safe_dump(data))
    lab = Lab(config.load(cfg_path))
    with lab.boot("mine", tmp_path / "console.log") as g:
        assert g.kernel.release == release  # read from the bzImage header
        assert g.run("uname -r").stdout.strip() == release
        assert "ringlab.selftest=1" in g.run("cat /proc/cmdline").stdout
        assert g.run("modprobe tun && grep -cw ^tun /proc/modules").stdout.strip() == "1"


def _lab(*args: str, make_lab_yaml) -> subprocess.CompletedProcess:
    env = dict(os.environ, RINGLAB_CONFIG=str(make_lab_yaml()))
    return subprocess.run(["./lab", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)


def test_lab_ssh_runs_a_command_in_a_throw_away_guest(make_lab_yaml, lab: Lab) -> None:
    p = _lab("ssh", "--", "uname", "-r", make_lab_yaml=make_lab_yaml)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == lab.kernel(None).release


def test_lab_doctor(make_lab_yaml) -> None:
    p = _lab("doctor", make_lab_yaml=make_lab_yaml)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "mirror: " in p.stdout and "MISSING" not in p.stdout
    assert "kvm: " in p.stdout
