"""Guest snapshots (harness/guest/snapshot.py): the key, the restore's argv, what counts as a
complete snapshot, and when a failed restore falls back to a boot."""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.guest import guest, qemu, snapshot


@pytest.fixture(autouse=True)
def guest_folders_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """guest.boot() makes the guest's folder with mkdtemp; the fake guests here are never
    closed, so their folders go to tmp_path, not the host's /tmp (each run left three)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def key(**changes: object) -> snapshot.SnapshotKey:
    base = snapshot.SnapshotKey(qemu="QEMU emulator version 7.2.22", kernel=("/k:1:2", "/i:3:4",
                                "/m:5:6"), rootfs="/r:7:8", host_key="ecdsa AAAA", cpus=1,
                                memory_mb=1024, accel="tcg", tcg_threads="multi",
                                cmdline="console=ttyS0")
    return dataclasses.replace(base, **changes)


def plan(tmp_path: Path, **changes: object) -> guest.BootPlan:
    k = SimpleNamespace(name="k", release="6.12", vmlinuz=tmp_path / "vmlinuz",
                        initramfs=tmp_path / "initramfs.gz", modules_image=tmp_path / "mod.ext4",
                        cmdline="", arch="x86_64")
    for p in (k.vmlinuz, k.initramfs, k.modules_image, tmp_path / "rootfs.ext4"):
        p.write_bytes(b"x")
    fields = dict(kernel=k, rootfs=SimpleNamespace(image=tmp_path / "rootfs.ext4",
                                                   host_key="ecdsa AAAA"),
                  key=None, cpus=1, memory_mb=1024, accel="tcg", tcg_threads="multi",
                  boot_timeout_s=120, console_log=tmp_path / "console.log",
                  snapshots=tmp_path / "snapshots", qemu_version="QEMU 7.2.22")
    fields.update(changes)
    return guest.BootPlan(**fields)  # type: ignore[arg-type]


def test_every_part_of_the_key_changes_the_digest() -> None:
    digests = {key().digest()}
    for change in [dict(qemu="QEMU emulator version 8.2.0"), dict(cpus=2), dict(memory_mb=256),
                   dict(accel="kvm"), dict(tcg_threads="single"), dict(cmdline="x"),
                   dict(kernel=("/k:1:3", "/i:3:4", "/m:5:6")), dict(rootfs="/r:7:9"),
                   dict(host_key="ecdsa BBBB"), dict(format=snapshot.FORMAT + 1)]:
        digests.add(key(**change).digest())
    assert len(digests) == 11
    assert key().digest() == key().digest()


def test_the_plan_key_follows_the_kernel_file_and_the_qemu_version(tmp_path: Path) -> None:
    p = plan(tmp_path)
    before = guest.snapshot_key(p)
    assert before == guest.snapshot_key(p)
    assert "console=ttyS0" in before.cmdline  # the whole command line the guest booted with
    assert guest.snapshot_key(dataclasses.replace(p, qemu_version="QEMU 8")) != before
    assert guest.snapshot_key(dataclasses.replace(p, cmdline="nokaslr")) != before
    os.utime(p.kernel.vmlinuz, ns=(1, 1))  # a rebuilt kernel at the same path
    assert guest.snapshot_key(p) != before


def test_restore_argv_waits_for_an_incoming_stream_on_its_own_overlay_and_port(
        tmp_path: Path) -> None:
    p = plan(tmp_path)
    spec = guest._spec(p, tmp_path / "w", 40123, tmp_path / "w" / "root.qcow2", save=False,
                       incoming=True)
    argv = qemu.command(spec)
    assert argv[argv.index("-incoming") + 1] == "defer"
    assert argv[argv.index("-qmp") + 1] == f"unix:{tmp_path}/w/qmp.sock,server=on,wait=off"
    assert any(a.startswith(f"file={tmp_path}/w/root.qcow2,") for a in argv)
    assert any("hostfwd=tcp:127.0.0.1:40123-:22" in a for a in argv)
    # The machine is the booted one's: only the disk, port, QMP and -incoming differ.
    booted = qemu.command(guest._spec(p, tmp_path / "w", 40123, tmp_path / "w" / "root.qcow2",
                                      save=True))
    assert [a for a in argv if a not in ("-incoming", "defer")] == booted
    # Every guest has its monitor (a warm reboot uses it); only a restore waits for a stream.
    plain = qemu.command(guest._spec(p, tmp_path / "w", 1, tmp_path / "r.qcow2", save=False))
    assert "-qmp" in plain and "-incoming" not in plain


def test_the_incoming_uri_reads_the_state_file_quoted() -> None:
    snap = snapshot.Snapshot(Path("/cache/it's here/abc"))
    assert snapshot.incoming_uri(snap) == "exec:cat '/cache/it'\"'\"'s here/abc/state'"


def write_snapshot(root: Path, k: snapshot.SnapshotKey, state: bytes = b"S" * 100) -> Path:
    d = root / k.digest()
    d.mkdir(parents=True)
    (d / "state").write_bytes(state)
    (d / "base.qcow2").write_bytes(b"B" * 10)
    (d / "meta.json").write_text(json.dumps({"key": dataclasses.asdict(k), "state_bytes": 100,
                                             "base_bytes": 10}))
    return d


def test_only_a_complete_snapshot_of_the_same_key_is_found(tmp_path: Path) -> None:
    k = key()
    assert snapshot.find(tmp_path, k) is None
    d = write_snapshot(tmp_path, k)
    assert snapshot.find(tmp_path, k) == snapshot.Snapshot(d)
    assert snapshot.find(tmp_path, key(cpus=2)) is None
    (d / "state").write_bytes(b"S" * 50)  # cut short
    assert snapshot.find(tmp_path, k) is None
    (d / "state").write_bytes(b"S" * 100)
    (d / "base.qcow2").unlink()
    assert snapshot.find(tmp_path, k) is None


def test_an_unusable_snapshot_says_why(tmp_path: Path) -> None:
    k = key()
    snap = snapshot.Snapshot(tmp_path / k.digest())
    assert snapshot.unusable(snap, k) == "absent"
    d = write_snapshot(tmp_path, k)
    assert snapshot.unusable(snap, k) is None
    (d / "state").write_bytes(b"S" * 33)  # cut to a third
    assert snapshot.unusable(snap, k) == ("its state file state is 33 bytes, its record says "
                                          "100 (cut short or changed)")
    (d / "meta.json").write_text("{")
    assert "unreadable" in (snapshot.unusable(snap, k) or "")


def test_a_temporary_folder_is_never_a_snapshot_and_prune_keeps_the_newest(tmp_path: Path
                                                                           ) -> None:
    (tmp_path / ".tmp-x-1-2").mkdir()
    dirs = [write_snapshot(tmp_path, key(cpus=n)) for n in range(1, 5)]
    for age, d in enumerate(reversed(dirs)):
        os.utime(d / "meta.json", (1000 - age, 1000 - age))
    snapshot.prune(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == \
        sorted(d.name for d in dirs[2:])


def test_fallback_for_any_error_but_not_for_an_interrupt() -> None:
    assert snapshot.fallback_reason(snapshot.SnapshotError("migration failed: x")) == \
        "migration failed: x"
    assert snapshot.fallback_reason(OSError(5, "no such file")) == \
        "OSError: [Errno 5] no such file"
    assert snapshot.fallback_reason(KeyboardInterrupt()) is None
    assert snapshot.fallback_reason(SystemExit(1)) is None


def test_the_key_holds_the_probes_the_runner_daemon_was_started_with(tmp_path: Path) -> None:
    """The daemon is saved with the guest: probes changed since make another snapshot."""
    from harness.guest.probe_client import probes_digest

    (tmp_path / "probe_a.py").write_text("A = 1\n")
    first = probes_digest(tmp_path)
    (tmp_path / "probe_a.py").write_text("A = 2\n")
    assert probes_digest(tmp_path) != first
    key = snapshot.SnapshotKey(qemu="q", kernel=("k",), rootfs="r", host_key="h", cpus=1,
                               memory_mb=1024, accel="tcg", tcg_threads="single", cmdline="c")
    assert dataclasses.replace(key, probes=first).digest() != \
        dataclasses.replace(key, probes=probes_digest(tmp_path)).digest()


def fake_guest(restored: bool) -> SimpleNamespace:
    return SimpleNamespace(record=guest.BootRecord(ssh_port=1, boot_s=1.0, ssh_ready_s=1.0,
                                                   restored=restored), gcov=False)


def test_a_snapshot_that_fails_to_restore_becomes_a_boot_with_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
        ) -> None:
    p = plan(tmp_path)
    d = write_snapshot(p.snapshots, guest.snapshot_key(p))

    def bad_restore(*_a: object) -> None:
        raise snapshot.SnapshotError("migration failed: load of migration failed")

    started: list[object] = []
    monkeypatch.setattr(guest, "_restore", bad_restore)
    monkeypatch.setattr(guest, "_start", lambda plan, workdir, attempt, save_as=None:
                        started.append(save_as) or fake_guest(False))
    with caplog.at_level(logging.WARNING):
        g = guest.boot(p)
    assert not g.record.restored and "load of migration failed" in g.record.fallback
    assert started == [guest.snapshot_key(p)]  # booted, and saved again
    assert not d.exists()  # the bad snapshot is gone
    assert "did not restore" in caplog.text
    assert "did not restore" in p.console_log.read_text()


def test_a_good_snapshot_is_restored_and_ctrl_c_is_not_a_fallback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = plan(tmp_path)
    write_snapshot(p.snapshots, guest.snapshot_key(p))
    monkeypatch.setattr(guest, "_restore", lambda *a: fake_guest(True))
    monkeypatch.setattr(guest, "_start", lambda *a, **k: pytest.fail("booted"))
    assert guest.boot(p).record.restored

    def interrupted(*_a: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(guest, "_restore", interrupted)
    with pytest.raises(KeyboardInterrupt):
        guest.boot(p)


def test_without_a_snapshot_folder_every_guest_boots_unsaved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[object] = []
    monkeypatch.setattr(guest, "_restore", lambda *a: pytest.fail("restored"))
    monkeypatch.setattr(guest, "_start", lambda plan, workdir, attempt, save_as=None:
                        started.append(save_as) or fake_guest(False))
    guest.boot(plan(tmp_path, snapshots=None))
    assert started == [None]
