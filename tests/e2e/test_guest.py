"""A real guest of the default kernel: probes, users, timeouts, host key, overlay, modules."""
from __future__ import annotations

import time

import pytest

from harness.errors import GuestHang, ProbeCrashed, ProbeOutputError, ProbeTimeout, SSHError
from harness.boot.guest import Guest
from harness.boot.ssh import GuestSSH

pytestmark = pytest.mark.e2e


def test_capabilities_probe_round_trip(guest: Guest) -> None:
    r = guest.probe("probe_capabilities")
    assert r.data["kernel"]["release"] == guest.kernel.release
    assert set(r.data["paths"]) == {"perf_ring", "perf_aux", "trace_mmap", "detached_events"}
    assert all(p["how"] for p in r.data["paths"].values())


def test_probe_runs_as_unprivileged_user(guest: Guest) -> None:
    r = guest.probe("probe_capabilities", user="lab")
    assert r.data["euid"] == 1000
    assert guest.run("id -u", user="lab").stdout.strip() == "1000"


def test_hanging_probe_is_killed_and_guest_stays_usable(guest: Guest) -> None:
    start = time.monotonic()
    with pytest.raises(ProbeTimeout, match="probe_selftest_hang"):
        guest.probe("probe_selftest_hang", timeout=2)
    assert time.monotonic() - start < 15
    assert "probe_selftest_hang" not in guest.run("ps -eo args").stdout
    assert guest.probe("probe_capabilities").data["page_size"] > 0


def test_non_json_output_is_its_own_error(guest: Guest) -> None:
    with pytest.raises(ProbeOutputError, match="not one JSON document.*this is not json"):
        guest.probe("probe_selftest_garbage")


def test_crashing_probe_returns_its_traceback(guest: Guest) -> None:
    with pytest.raises(ProbeCrashed) as e:
        guest.probe("probe_selftest_crash", ["boom"])
    assert "RuntimeError: selftest crash boom" in e.value.stderr
    assert "Traceback" in str(e.value)


def test_command_timeout_is_bounded(guest: Guest) -> None:
    start = time.monotonic()
    with pytest.raises(GuestHang, match="did not finish in 2 s"):
        guest.run("sleep 30", timeout=2)
    assert time.monotonic() - start < 6
    assert guest.run("echo still here").stdout == "still here\n"


def test_exit_status_and_streams(guest: Guest) -> None:
    r = guest.run("echo out; echo err >&2; exit 3")
    assert (r.exit_status, r.stdout, r.stderr) == (3, "out\n", "err\n")


def test_wrong_host_key_is_refused(guest: Guest) -> None:
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOmkvYF0Bfx8o8pXN5Y7JpWQm4m9H2aWVpV7sBaWzKPV"
    ssh = GuestSSH(guest.record.ssh_port, guest.plan.key, other)
    with pytest.raises(SSHError, match="not the pinned"):
        ssh.connect(time.monotonic() + 20)


def test_guest_writes_to_an_overlay_not_the_cache(guest: Guest) -> None:
    image = guest.plan.rootfs.image
    before = (image.stat().st_mtime_ns, image.stat().st_size)
    guest.run("dd if=/dev/urandom of=/var/tmp/scratch bs=1M count=4 && sync")
    assert (image.stat().st_mtime_ns, image.stat().st_size) == before


def test_kernel_modules_load(guest: Guest) -> None:
    if guest.kernel.modules_image is None:
        pytest.skip("this kernel came without modules")
    r = guest.run("modprobe tun && grep -w ^tun /proc/modules")
    assert r.exit_status == 0, r.stderr


def test_kernel_log_between_calls(guest: Guest) -> None:
    guest.kmsg()
    guest.run("echo ringlab-selftest-marker > /dev/kmsg")
    assert any("ringlab-selftest-marker" in line for line in guest.kmsg())
    assert not any("ringlab-selftest-marker" in line for line in guest.kmsg())
