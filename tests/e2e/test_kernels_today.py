"""Debian's 7.x kernels (split packages) booted with their test modules, any kernel named on
the command line, and a kernel that cannot be had as one clear error (no test run at all)."""
from __future__ import annotations

import glob
import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.resources import Lab

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_stray_qemu")]


def lab_cmd(*args: str, timeout: float = 900, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "lab"), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("name", ["bpo-cloud", "sid-cloud"])
def test_a_7x_debian_kernel_boots_with_its_test_modules(lab: Lab, tmp_path: Path,
                                                        name: str) -> None:
    k = lab.kernel(name)
    meta = json.loads((k.vmlinuz.parent / "kernel.json").read_text())
    # Split packages: the image came from linux-binary-*, the modules from linux-modules-*.
    assert any(p.startswith("linux-binary-") for p in meta["packages"]), meta["packages"]
    assert any(p.startswith("linux-modules-") for p in meta["packages"]), meta["packages"]
    assert k.release.startswith("7."), k.release
    assert k.config is not None and k.modules_image is not None
    aux = lab.module("ringlab_aux", name)
    splat = lab.module("ringlab_splat", name)
    with lab.boot(name, tmp_path / "console.log") as g:
        assert g.run("uname -r").stdout.strip() == k.release
        g.insmod(aux)
        g.insmod(splat)
        pmu = g.run("cat /sys/bus/event_source/devices/ringlab_aux/type")
        assert pmu.exit_status == 0 and pmu.stdout.strip().isdigit(), pmu
        assert g.run("test -d /sys/module/ringlab_splat").exit_status == 0


def test_kernels_named_on_the_command_line(lab: Lab, tmp_path: Path) -> None:
    """An unpacked Debian 7.x kernel as an image (modules found beside it, in its
    lib/modules/<release>), and the same kernel as debian:SUITE/FLAVOUR."""
    k = lab.kernel("bpo-cloud")
    meta = json.loads((k.vmlinuz.parent / "kernel.json").read_text())
    for pkg in meta["packages"]:
        name, _, version = pkg.partition("=")
        debs = glob.glob(str(lab.layout.folder("debs") / f"{name}_*.deb"))
        deb = next(d for d in debs if version.replace(":", "%3a") in d or version in d)
        subprocess.run(["dpkg-deb", "-x", deb, str(tmp_path / "k")], check=True)
    image = tmp_path / "k/usr/lib/modules" / k.release / "vmlinuz"
    r = lab_cmd("ssh", "--kernel", str(image), "--", "uname -r; ls /lib/modules")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [k.release, k.release, "lost+found"], r.stdout
    r = lab_cmd("ssh", "--kernel", "debian:trixie-backports/cloud-amd64", "--", "uname -r")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == k.release


@pytest.mark.parametrize("kernel, says", [
    ("debian:trixie/no-such-flavour", "no package linux-image-no-such-flavour in trixie"),
    ("debian:trixie-backports/cloud-amd64=0.0.1", "at version 0.0.1"),
    ("/nonexistent/bzImage", "no such file or folder"),
])
def test_a_kernel_that_cannot_be_had_is_one_error(kernel: str, says: str, tmp_path: Path
                                                 ) -> None:
    # A TMPDIR of its own: a guest folder another lab on this host makes meanwhile is not ours.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = lab_cmd("run", "--kernel", kernel, timeout=300, env={"TMPDIR": str(tmp)})
    assert r.returncode == 2, (r.stdout, r.stderr)
    errors = [line for line in r.stderr.splitlines() if line.startswith("lab: error:")]
    assert len(errors) == 1 and says in errors[0], r.stderr
    assert "Traceback" not in r.stderr and "ERROR" not in r.stdout
    assert "collected" not in r.stdout  # pytest never started
    assert not list(tmp.glob("ringlab-guest-*")), list(tmp.iterdir())


def test_in_a_multi_kernel_run_the_other_kernels_still_run(tmp_path: Path,
                                                           make_lab_yaml) -> None:
    cfg = make_lab_yaml()
    r = lab_cmd("--lab-config", str(cfg), "run", "--kernel",
                "trixie-cloud,debian:trixie/no-such-flavour", "-k", "test_capabilities")
    assert r.returncode == 2, (r.stdout[-2000:], r.stderr[-2000:])
    summary = next((tmp_path / "reports").glob("*/summary.json"))
    table = json.loads(summary.read_text())
    bad = table["kernels"]["debian:trixie/no-such-flavour"]
    assert bad["error"].startswith("not run: ") and "no-such-flavour" in bad["error"]
    assert table["kernels"]["trixie-cloud"]["counts"].get("passed", 0) > 0
