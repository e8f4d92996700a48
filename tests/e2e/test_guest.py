"""A real guest of the default kernel: probes, users, timeouts, host key, overlay, modules."""
from __future__ import annotations

import dataclasses
import time

import pytest

from harness.errors import GuestHang, ProbeCrashed, ProbeOutputError, ProbeTimeout, SSHError
from harness.guest.guest import Guest, boot
from harness.guest.ssh import GuestSSH

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


GUEST_FACTS = ("cat /proc/sys/kernel/random/boot_id; date -u +%s.%N; "
               "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'; echo; "
               "ls /root/restored-marker 2>/dev/null || echo absent")


def test_a_guest_is_saved_once_and_restored_as_its_own_machine(
        lab, tmp_path, caplog: pytest.LogCaptureFixture, no_stray_qemu: None) -> None:
    """Boot (saves the snapshot), restore twice one after the other, then restore from a
    corrupted snapshot: each restore is the saved guest (same boot_id) with its own SSH port,
    the host's clock, its own random bytes and its own disk; the corrupted one boots."""
    import dataclasses
    import logging

    from harness.guest import guest as guest_mod, snapshot

    console = tmp_path / "console.log"
    plan = dataclasses.replace(lab.plan(None, console), snapshots=tmp_path / "snapshots")
    with guest_mod.boot(plan) as booted:
        assert not booted.record.restored and booted.record.snapshot
        boot_id = booted.run("cat /proc/sys/kernel/random/boot_id").stdout.strip()
        assert booted.probe("probe_capabilities").data  # the saved guest goes on working
    snap = snapshot.find(plan.snapshots, guest_mod.snapshot_key(plan))
    assert snap is not None

    seen = []
    for _ in range(2):
        with guest_mod.boot(plan) as g:
            assert g.record.restored and g.record.snapshot == snap.name
            assert g.record.ssh_ready_s < 15
            facts = g.run(GUEST_FACTS).stdout.split()
            host_now = time.time()
            seen.append((g.record.ssh_port, facts))
            assert facts[0] == boot_id  # the saved kernel, not a new boot
            assert abs(float(facts[1]) - host_now) < 5, "the clock was not stepped"
            assert facts[3] == "absent"  # nothing of the previous restore's disk
            g.run("touch /root/restored-marker")
            assert g.probe("probe_capabilities").data
            # The console watcher reads the restored guest's console as it did the boot's.
            g.run("echo '<2>ringlab: restored console check' > /dev/kmsg")
            deadline = time.monotonic() + 10
            while "restored console check" not in g.vm.console_text() and \
                    time.monotonic() < deadline:
                time.sleep(0.1)
            assert "restored console check" in g.vm.console_text()
            assert g.health() is None
    (port1, facts1), (port2, facts2) = seen
    assert port1 != port2
    assert facts1[2] != facts2[2], "two restores drew the same /dev/urandom bytes"
    text = console.read_text()
    assert text.count(f"from snapshot {snap.name}") == 2 and "restored in" in text

    with snap.state.open("r+b") as f:  # a corrupted stream: the cache check sees it first
        f.write(b"\0" * 4096)
    with caplog.at_level(logging.WARNING):
        with guest_mod.boot(plan) as g:
            # Never handed to QEMU: its digest is not the one recorded at the save (issue 31
            # §3), so the snapshot is dropped and the guest booted and saved again.
            assert not g.record.restored and g.record.snapshot
            assert g.run("cat /proc/sys/kernel/random/boot_id").stdout.strip() != boot_id
    assert "changed: remade" in caplog.text and "state" in caplog.text, caplog.text
    fresh = snapshot.find(plan.snapshots, guest_mod.snapshot_key(plan))
    assert fresh is not None and fresh.state.read_bytes()[:4] == b"QEVM"


def test_a_cold_booted_nokaslr_guest_comes_back_from_a_warm_reboot(
        lab, tmp_path, no_stray_qemu: None) -> None:
    """The persistent-buffer tests' case on a cold cache: a QEMU that booted a nokaslr kernel
    itself (no snapshot) shows nothing after its first reset under TCG; warm_reboot() resets
    again until the kernel's banner shows, and the guest comes back."""
    plan = dataclasses.replace(lab.plan(None, tmp_path / "console.log", None, "nokaslr", (),
                                        None), snapshots=None)
    with boot(plan) as g:
        assert not g.record.restored
        g.warm_reboot()
        assert "nokaslr" in g.run("cat /proc/cmdline").stdout and g.health() is None


def test_a_guest_asked_for_a_warm_reboot_is_restored_and_comes_back_at_the_first_reset(
        lab, tmp_path, monkeypatch, no_stray_qemu: None) -> None:
    """Lab.boot(restored=True) on a profile without a snapshot: cold booted, saved, stopped,
    restored; its first reset boots (issue 44: the persistent tests' cold guest needed a
    second reset, and once a rerun). A fresh snapshot folder makes the profile new."""
    monkeypatch.setattr(lab, "snapshots_dir", lambda: tmp_path / "snapshots")
    log = tmp_path / "console.log"
    with lab.boot(None, log, cmdline="nokaslr", restored=True) as g:
        assert g.record.restored
        g.warm_reboot()
        assert "nokaslr" in g.run("cat /proc/cmdline").stdout and g.health() is None
    text = log.read_text(errors="replace")
    assert "back from the warm reboot" in text and "after the reset; reset 2" not in text, \
        text[-3000:]


def test_a_warm_reboot_keeps_the_qemu_and_a_later_guest_reboot_still_ends_it(
        lab, tmp_path, no_stray_qemu: None) -> None:
    """warm_reboot(): a new boot (new boot_id, fresh kernel log) in the same QEMU, SSH and the
    probes back; then a reboot the guest makes ends QEMU as -no-reboot does (a panic must)."""
    with lab.boot(None, tmp_path / "console.log") as g:
        pid, port = g.vm.pid, g.record.ssh_port
        before = g.run("cat /proc/sys/kernel/random/boot_id").stdout.strip()
        g.kmsg()
        seen = len(g.kernel_log)
        took = g.warm_reboot()
        assert g.vm.pid == pid and g.record.ssh_port == port and g.health() is None
        assert g.run("cat /proc/sys/kernel/random/boot_id").stdout.strip() != before
        assert float(g.run("cut -d' ' -f1 /proc/uptime").stdout) < took + 5
        assert g.probe("probe_capabilities").data["kernel"]["release"] == g.kernel.release
        assert any("Linux version" in line for line in g.kernel_log[seen:]), \
            "the new boot's log from its start is kept for the splat judge"
        assert "warm reboot of" in (tmp_path / "console.log").read_text()
        g.run("setsid sh -c 'sleep 1; echo b > /proc/sysrq-trigger' </dev/null >/dev/null 2>&1 &")
        assert g.vm.wait_for(g.vm.exited, time.monotonic() + 60), \
            "after a warm reboot a guest reboot must end QEMU again"
