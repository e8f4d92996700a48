"""Cache entries that know their own files (harness/cache.py's manifest): a file changed since
the entry was made is found before it is used, said once at WARNING, and the entry made again;
per kind of entry (prepared kernels, build outputs, test modules, the rootfs, snapshots) and in
Lab.boot, which asks for every digest after a failed boot. No QEMU: tmp_path and fakes."""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import arch as arches, cache
from harness.config import BuildKernel, KernelSpec, PathKernel, RootfsSpec
from harness.errors import BootError
from harness.guest import rootfs, snapshot
from harness.kernels import initramfs, kbuild, kernel, modules
from harness.resources import Lab

BLOCK = 4096


def flip(path: Path, keep_mtime: bool, offset: int = BLOCK) -> None:
    """Invert 4 KiB of `path` in place (its size stays); `keep_mtime`: put its mtime back, as a
    copy with preserved times or a bad disk block would leave it."""
    st = path.stat()
    with path.open("r+b") as f:
        f.seek(offset)
        data = f.read(BLOCK)
        f.seek(offset)
        f.write(bytes(b ^ 0xFF for b in data))
    mtime = st.st_mtime_ns if keep_mtime else st.st_mtime_ns + 2_000_000_000
    os.utime(path, ns=(st.st_atime_ns, mtime))


def blob(path: Path, tag: str, size: int = 3 * BLOCK) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((tag.encode() * size)[:size])
    return path


def remade(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "changed: remade" in r.getMessage()]


# --- the mechanism -----------------------------------------------------------------------

@pytest.fixture
def entry(tmp_path: Path) -> Path:
    e = tmp_path / "kernels" / "k"
    blob(e / "vmlinuz", "v")
    blob(e / "sub" / "x.ko", "m")
    cache.record(e, ["vmlinuz", "sub/x.ko"])
    return e


def test_an_entry_as_made_verifies(entry: Path) -> None:
    assert cache.verify(entry) == []
    assert cache.verify(entry, deep=True) == []
    data = json.loads((entry / cache.MANIFEST).read_text())
    assert set(data["files"]) == {"vmlinuz", "sub/x.ko"}
    assert data["files"]["vmlinuz"]["size"] == 3 * BLOCK


def test_a_flip_under_the_same_size_and_mtime_is_seen_only_by_the_digest(entry: Path) -> None:
    flip(entry / "vmlinuz", keep_mtime=True)
    assert cache.verify(entry) == []  # the cheap check of every use: a stat
    assert [c.path for c in cache.verify(entry, deep=True)] == ["vmlinuz"]


def test_a_flip_that_moved_the_mtime_is_seen_by_the_cheap_check(entry: Path) -> None:
    flip(entry / "sub" / "x.ko", keep_mtime=False)
    changed = cache.verify(entry)
    assert [c.path for c in changed] == ["sub/x.ko"]
    assert "SHA256" in changed[0].why


def test_a_missing_or_resized_file(entry: Path) -> None:
    (entry / "vmlinuz").unlink()
    with (entry / "sub" / "x.ko").open("ab") as f:
        f.write(b"more")
    assert {c.path: c.why for c in cache.verify(entry)} == {
        "vmlinuz": "missing", "sub/x.ko": f"{3 * BLOCK + 4} bytes, recorded {3 * BLOCK}"}


def test_a_touch_is_no_change_and_the_record_follows_it(entry: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    st = (entry / "vmlinuz").stat()
    os.utime(entry / "vmlinuz", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert cache.verify(entry) == []
    hashed: list[Path] = []
    real = cache._describe

    def describe(path: Path) -> cache.FileRecord:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(cache, "_describe", describe)
    assert cache.verify(entry) == []
    assert hashed == []  # the new mtime was recorded: the next use is a stat again


def test_intact_removes_a_changed_entry_and_warns_once(entry: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    flip(entry / "vmlinuz", keep_mtime=False)
    with caplog.at_level(logging.DEBUG, logger="harness.cache"):
        assert not cache.intact(entry, ["vmlinuz"])
        assert cache.intact(entry, ["vmlinuz"])  # gone: nothing to say again
    assert remade(caplog) == [f"cached {entry}/vmlinuz changed: remade (its SHA256 is not "
                              "the one recorded when it was made)"]
    assert not entry.exists()
    assert os.listdir(entry.parent) == []  # nothing left renamed away either


def test_an_unreadable_manifest_is_a_change(entry: Path, caplog: pytest.LogCaptureFixture) -> None:
    (entry / cache.MANIFEST).write_text("{not json")
    with caplog.at_level(logging.WARNING):
        assert not cache.intact(entry, ["vmlinuz"])
    assert len(remade(caplog)) == 1 and cache.MANIFEST in remade(caplog)[0]
    assert not entry.exists()


def test_a_legacy_entry_is_trusted_and_recorded_on_first_use(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    e = tmp_path / "rootfs" / "r"
    blob(e / "rootfs.ext4", "r")
    with caplog.at_level(logging.DEBUG, logger="harness.cache"):
        assert cache.intact(e, ["rootfs.ext4", "absent.pub"])
    assert any("no manifest" in r.getMessage() and r.levelno == logging.DEBUG
               for r in caplog.records)
    assert remade(caplog) == []
    assert set(json.loads((e / cache.MANIFEST).read_text())["files"]) == {"rootfs.ext4"}
    flip(e / "rootfs.ext4", keep_mtime=True)
    assert [c.path for c in cache.verify(e, deep=True)] == ["rootfs.ext4"]


def test_no_entry_is_made_by_checking_one_that_is_not_there(tmp_path: Path) -> None:
    assert cache.changes(tmp_path / "absent", ["f"]) == []
    assert not (tmp_path / "absent").exists()


# --- prepared kernels (harness/kernels/kernel.py) -------------------------------------------

def fake_finish(scratch: Path, name: str, release: str, vmlinuz: Path, modules_base: Path | None,
                config: Path | None, description: str, cmdline: str, arch: str = arches.DEFAULT,
                busybox: Path | None = None, system_map: Path | None = None) -> dict:
    """kernel.finish without busybox or mkfs.ext4: the image copied, a modules image made up."""
    shutil.copy2(vmlinuz, scratch / "vmlinuz")
    blob(scratch / "initramfs.gz", "i")
    blob(scratch / "modules.ext4", "e")
    return {"layout": kernel.LAYOUT, "initramfs_recipe": initramfs.recipe_hash(), "name": name,
            "release": release, "description": description, "has_modules": True,
            "has_config": False, "cmdline": cmdline, "arch": arch}


@pytest.fixture
def path_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """A path kernel prepared from an image on disk (its source), with a count of makes."""
    made: list[Path] = []

    def finish(scratch: Path, *args: object, **kwargs: object) -> dict:
        made.append(scratch)
        return fake_finish(scratch, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kernel, "finish", finish)
    monkeypatch.setattr(kernel, "image_release", lambda image, a: "6.12.0-test")
    image = blob(tmp_path / "src" / "bzImage", "k")
    spec = KernelSpec("mine", PathKernel(image=image))
    root = tmp_path / "cache"

    def prepare() -> kernel.BootableKernel:
        return kernel.prepare(spec, root, None)

    return SimpleNamespace(prepare=prepare, made=made, image=image)


def test_a_prepared_kernel_records_its_files(path_kernel: SimpleNamespace) -> None:
    k = path_kernel.prepare()
    recorded = cache.recorded(k.vmlinuz.parent)
    assert recorded is not None
    assert set(recorded) == {"kernel.json", "vmlinuz", "initramfs.gz", "modules.ext4"}
    assert path_kernel.prepare() == k and len(path_kernel.made) == 1


def test_a_flipped_vmlinuz_is_remade_from_its_source_not_booted(
        path_kernel: SimpleNamespace, caplog: pytest.LogCaptureFixture) -> None:
    k = path_kernel.prepare()
    flip(k.vmlinuz, keep_mtime=False)
    with caplog.at_level(logging.WARNING):
        again = path_kernel.prepare()
    assert remade(caplog) == [f"cached {k.vmlinuz} changed: remade (its SHA256 is not the "
                              "one recorded when it was made)"]
    assert len(path_kernel.made) == 2
    assert again.vmlinuz.read_bytes() == path_kernel.image.read_bytes()


def test_a_flip_under_the_same_mtime_is_found_after_a_failed_boot(
        path_kernel: SimpleNamespace, caplog: pytest.LogCaptureFixture) -> None:
    k = path_kernel.prepare()
    flip(k.vmlinuz, keep_mtime=True)
    assert path_kernel.prepare() == k  # a use checks sizes and mtimes only
    assert kernel.load_prepared(k.vmlinuz.parent) is not None
    with caplog.at_level(logging.WARNING):
        assert kernel.recheck(k)  # after a failed boot: every digest
    assert len(remade(caplog)) == 1 and not k.vmlinuz.parent.exists()
    assert path_kernel.prepare().vmlinuz.read_bytes() == path_kernel.image.read_bytes()
    assert len(path_kernel.made) == 2


def test_an_intact_kernel_passes_the_recheck(path_kernel: SimpleNamespace) -> None:
    k = path_kernel.prepare()
    assert not kernel.recheck(k)
    assert k.vmlinuz.exists()


def test_a_missing_modules_image_is_remade(path_kernel: SimpleNamespace,
                                           caplog: pytest.LogCaptureFixture) -> None:
    k = path_kernel.prepare()
    assert k.modules_image is not None
    k.modules_image.unlink()
    with caplog.at_level(logging.WARNING):
        assert path_kernel.prepare().modules_image.exists()  # type: ignore[union-attr]
    assert remade(caplog) == [f"cached {k.modules_image} changed: remade (missing)"]


def test_a_legacy_kernel_entry_is_trusted_then_checked(
        path_kernel: SimpleNamespace, caplog: pytest.LogCaptureFixture) -> None:
    k = path_kernel.prepare()
    (k.vmlinuz.parent / cache.MANIFEST).unlink()  # as an entry made before manifests
    with caplog.at_level(logging.DEBUG):
        assert path_kernel.prepare() == k
    assert any("no manifest" in r.getMessage() for r in caplog.records)
    assert remade(caplog) == [] and len(path_kernel.made) == 1
    assert (k.vmlinuz.parent / cache.MANIFEST).exists()
    flip(k.vmlinuz, keep_mtime=False)
    path_kernel.prepare()
    assert len(path_kernel.made) == 2


# --- kernel builds (harness/kernels/kbuild.py) ----------------------------------------------

@pytest.fixture
def builder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """A Builder whose make writes the outputs (a count of makes kept), whose tree, config
    step and tools are stubs; the kernel is stored by the real _store (finish faked)."""
    monkeypatch.setattr(kbuild.host, "require", lambda tools: None)
    monkeypatch.setattr(kbuild.host, "require_headers", lambda headers: None)
    monkeypatch.setattr(kbuild.trees, "fingerprint", lambda tree: "state-1")
    monkeypatch.setattr(kbuild.kernel, "finish", fake_finish)
    monkeypatch.setattr(kbuild.Builder, "_configure", lambda self, spec, source, out, *a: None)
    tree = tmp_path / "tree"
    tree.mkdir()
    monkeypatch.setattr(kbuild.Builder, "tree", lambda self, spec, src: tree)
    makes: list[dict[str, bool]] = []

    def make(self: kbuild.Builder, spec: KernelSpec, src: BuildKernel, source: Path, out: Path,
             report: kbuild.BuildReport) -> None:
        image = out / "arch/x86/boot/bzImage"
        makes.append({"image_was_there": image.exists()})
        if not image.exists():
            blob(image, "b")
        if not (out / "vmlinux").exists():
            blob(out / "vmlinux", "l")
        blob(out / "include/config/kernel.release", "6.12.0-built", size=12)
        (out / ".config").write_text("CONFIG_64BIT=y\n")
        (out / "modules.order").write_text("drivers/x.o\n")
        blob(out / "drivers/x.ko", "x")

    monkeypatch.setattr(kbuild.Builder, "_make", make)
    b = kbuild.Builder(tmp_path / "cache", lambda: None, lambda name: None)  # type: ignore[arg-type, return-value]
    src = BuildKernel(tree=tree)
    spec = KernelSpec("built", src)
    return SimpleNamespace(prepare=lambda: b.prepare(spec, src), makes=makes)


def test_a_build_records_its_outputs(builder: SimpleNamespace) -> None:
    k, report = builder.prepare()
    assert not report.cached and k.build_dir is not None
    assert set(cache.recorded(k.build_dir) or {}) == {
        "arch/x86/boot/bzImage", "vmlinux", ".config", "drivers/x.ko"}
    _, again = builder.prepare()
    assert again.cached and len(builder.makes) == 1


def test_a_changed_build_output_is_made_again_by_make(
        builder: SimpleNamespace, caplog: pytest.LogCaptureFixture) -> None:
    k, _ = builder.prepare()
    assert k.build_dir is not None
    flip(k.build_dir / "arch/x86/boot/bzImage", keep_mtime=False)
    with caplog.at_level(logging.WARNING):
        k2, report = builder.prepare()
    assert remade(caplog) == [f"cached {k.build_dir}/arch/x86/boot/bzImage changed: remade "
                              "(its SHA256 is not the one recorded when it was made)"]
    assert not report.cached
    # make found no bzImage (it would have trusted the changed one) and made it again
    assert builder.makes[-1] == {"image_was_there": False}
    assert cache.verify(k2.build_dir, deep=True) == []  # type: ignore[arg-type]
    assert builder.prepare()[1].cached


def test_a_changed_kernel_of_a_build_is_stored_again(builder: SimpleNamespace,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    k, _ = builder.prepare()
    (k.vmlinuz.parent / "initramfs.gz").write_bytes(b"short")
    with caplog.at_level(logging.WARNING):
        _, report = builder.prepare()
    assert len(remade(caplog)) == 1 and "initramfs.gz" in remade(caplog)[0]
    assert not report.cached and builder.makes[-1] == {"image_was_there": True}


def test_a_build_folder_from_before_manifests_is_recorded_when_its_kernel_is_used(
        builder: SimpleNamespace) -> None:
    k, _ = builder.prepare()
    assert k.build_dir is not None
    (k.build_dir / cache.MANIFEST).unlink()
    assert builder.prepare()[1].cached
    assert "vmlinux" in (cache.recorded(k.build_dir) or {})


# --- test modules (harness/kernels/modules.py) ----------------------------------------------

@pytest.fixture
def module(tmp_path: Path) -> SimpleNamespace:
    src = tmp_path / "src"
    blob(src / "Kbuild", "obj-m += m.o\n")
    k = kernel.BootableKernel(name="k", release="6.12", vmlinuz=tmp_path / "v",
                              initramfs=tmp_path / "i", modules_image=None, config=None,
                              description="")
    work = tmp_path / "work"
    builds: list[int] = []

    def build() -> Path:
        builds.append(1)
        return modules._make_ko("m", src, k, tmp_path / "cache", "key", work,
                                ["sh", "-c", f"head -c 12288 /dev/zero > {work}/m.ko"],
                                {"PATH": os.environ["PATH"]})

    return SimpleNamespace(build=build, builds=builds)


def test_a_changed_module_is_built_again(module: SimpleNamespace,
                                         caplog: pytest.LogCaptureFixture) -> None:
    ko = module.build()
    assert cache.recorded(ko.parent) is not None
    flip(ko, keep_mtime=False)
    with caplog.at_level(logging.WARNING):
        assert module.build() == ko
    assert remade(caplog) == [f"cached {ko} changed: remade (its SHA256 is not the one "
                              "recorded when it was made)"]
    assert ko.read_bytes() == bytes(12288)


def test_a_cached_module_is_not_built_again_and_a_legacy_one_is_trusted(
        module: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    ko = module.build()
    (ko.parent / cache.MANIFEST).unlink()
    monkeypatch.setattr(modules.subprocess, "run", lambda *a, **k: pytest.fail("rebuilt"))
    assert module.build() == ko
    assert cache.recorded(ko.parent) is not None


# --- the rootfs (harness/guest/rootfs.py) ---------------------------------------------------

@pytest.fixture
def rootfs_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    built: list[Path] = []

    def mmdebstrap(r: dict, target: Path, mirror: object, log_path: Path) -> None:
        blob(target / "etc/ssh/ssh_host_ed25519_key.pub", "ssh-ed25519 AAAA host\n", size=40)

    def make_image(root: Path, image: Path) -> None:
        built.append(image)
        blob(image, "ext4")

    monkeypatch.setattr(rootfs, "_mmdebstrap", mmdebstrap)
    monkeypatch.setattr(rootfs, "_install_files", lambda root, key: None)
    monkeypatch.setattr(rootfs, "_make_image", make_image)
    monkeypatch.setattr(arches, "is_native", lambda a: True)
    return SimpleNamespace(
        ensure=lambda: rootfs.ensure(RootfsSpec(), lambda: None, tmp_path / "cache",  # type: ignore[arg-type, return-value]
                                     "ecdsa-sha2-nistp256 AAAA lab"), built=built)


def test_a_changed_rootfs_image_is_built_again(rootfs_build: SimpleNamespace,
                                               caplog: pytest.LogCaptureFixture) -> None:
    img = rootfs_build.ensure()
    assert set(cache.recorded(img.image.parent) or {}) == set(rootfs.ENTRY_FILES)
    assert rootfs_build.ensure() == img and len(rootfs_build.built) == 1
    flip(img.image, keep_mtime=False)
    with caplog.at_level(logging.WARNING):
        assert rootfs_build.ensure() == img
    assert len(remade(caplog)) == 1 and len(rootfs_build.built) == 2


def test_a_rootfs_flip_under_its_mtime_is_found_after_a_failed_boot(
        rootfs_build: SimpleNamespace) -> None:
    img = rootfs_build.ensure()
    assert not rootfs.recheck(img)
    flip(img.image, keep_mtime=True)
    assert rootfs_build.ensure() == img and len(rootfs_build.built) == 1
    assert rootfs.recheck(img)
    rootfs_build.ensure()
    assert len(rootfs_build.built) == 2


def test_a_rootfs_missing_its_host_key_or_from_before_manifests(
        rootfs_build: SimpleNamespace) -> None:
    img = rootfs_build.ensure()
    (img.image.parent / cache.MANIFEST).unlink()
    assert rootfs_build.ensure() == img and len(rootfs_build.built) == 1  # trusted
    (img.image.parent / "ssh_host_ed25519_key.pub").unlink()
    rootfs_build.ensure()
    assert len(rootfs_build.built) == 2


# --- guest snapshots (harness/guest/snapshot.py) --------------------------------------------

def saved(root: Path, key: snapshot.SnapshotKey, manifest: bool = True) -> snapshot.Snapshot:
    """A snapshot folder as save() leaves it (without QEMU)."""
    snap = snapshot.Snapshot(root / key.digest())
    blob(snap.state, "state")
    blob(snap.base, "base")
    snap.meta.write_text(json.dumps({"key": asdict(key), "state_bytes": 3 * BLOCK,
                                     "base_bytes": 3 * BLOCK}))
    if manifest:
        cache.record(snap.path, snapshot.FILES)
    return snap


SNAP_KEY = snapshot.SnapshotKey(qemu="QEMU 7.2", kernel=("/k:1:2",), rootfs="/r:3:4",
                                host_key="ed25519 AAAA", cpus=1, memory_mb=1024, accel="tcg",
                                tcg_threads="multi", cmdline="console=ttyS0")


def test_a_changed_snapshot_is_dropped_for_a_boot_to_make_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    snap = saved(tmp_path, SNAP_KEY)
    assert snapshot.find(tmp_path, SNAP_KEY) == snap
    flip(snap.state, keep_mtime=True)
    assert snapshot.find(tmp_path, SNAP_KEY) == snap  # a stat per use; no digest
    flip(snap.state, keep_mtime=False, offset=0)
    with caplog.at_level(logging.WARNING):
        assert snapshot.find(tmp_path, SNAP_KEY) is None
        assert snapshot.unusable(snap, SNAP_KEY) == "absent"  # guest.boot says nothing more
    assert remade(caplog) == [f"cached {snap.state} changed: remade (its SHA256 is not the "
                              "one recorded when it was made)"]


def test_a_snapshot_from_before_manifests_is_trusted_and_recorded(tmp_path: Path) -> None:
    snap = saved(tmp_path, SNAP_KEY, manifest=False)
    assert snapshot.find(tmp_path, SNAP_KEY) == snap
    assert set(cache.recorded(snap.path) or {}) == {"state", "base.qcow2"}
    (snap.base).unlink()
    assert snapshot.find(tmp_path, SNAP_KEY) is None


# --- Lab.boot: every digest after a failed boot (harness/resources.py) ----------------------

@dataclass
class FakeBooted:
    """A booted guest: whether it was saved as a snapshot, and whether it was stopped."""
    name: str
    saved: bool = True
    stopped: bool = False

    @property
    def record(self) -> SimpleNamespace:
        return SimpleNamespace(snapshot="snap" if self.saved else None, restored=False)

    def stop(self) -> None:
        self.stopped = True


def lab(monkeypatch: pytest.MonkeyPatch, boots: list[object], changed: list[bool]) -> Lab:
    """A Lab whose plan() is a stub and whose boots raise or return what `boots` holds;
    kernel.recheck answers from `changed` (rootfs.recheck: False)."""
    lab = object.__new__(Lab)
    lab._kernels = {"k": object()}  # type: ignore[dict-item]
    lab._rootfs = {arches.DEFAULT: object()}  # type: ignore[dict-item]
    lab._ahead = SimpleNamespace(wait=lambda plan: None)  # type: ignore[assignment]
    plan = SimpleNamespace(kernel=SimpleNamespace(name="k", arch=arches.DEFAULT), rootfs=None)
    monkeypatch.setattr(lab, "plan", lambda *a, **k: plan)
    monkeypatch.setattr("harness.resources.warm.has_snapshot", lambda plan: True)

    def boot(plan: object) -> object:
        outcome = boots.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr("harness.resources.boot", boot)
    monkeypatch.setattr(kernel, "recheck", lambda k: changed.pop(0))
    monkeypatch.setattr(rootfs, "recheck", lambda img: False)
    return lab


def test_a_failed_boot_over_a_changed_entry_is_booted_again_once_remade(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    the_lab = lab(monkeypatch, [BootError("guest stalled"), "guest"], [True])
    assert the_lab.boot(None, tmp_path / "console.log") == "guest"
    assert the_lab._kernels == {} and the_lab._rootfs == {}  # prepared again by plan()


def test_a_guest_to_be_warm_rebooted_is_saved_stopped_and_restored(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Under TCG only a restored QEMU's first reset boots: a profile without a snapshot is
    cold booted (and saved) in a guest that is stopped, and the caller gets the restore."""
    cold = FakeBooted("cold")
    the_lab = lab(monkeypatch, [cold, "restored"], [])
    monkeypatch.setattr("harness.resources.warm.has_snapshot", lambda plan: False)
    monkeypatch.setattr("harness.resources.warm.cold_boot_lock",
                        lambda plan: contextlib.nullcontext(True))
    assert the_lab.boot(None, tmp_path / "console.log", restored=True) == "restored"
    assert cold.stopped


def test_a_guest_to_be_warm_rebooted_that_could_not_be_saved_is_kept(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No snapshot to restore: the cold guest is the caller's (its reset is tried twice), not
    stopped for a second cold boot."""
    cold = FakeBooted("cold", saved=False)
    the_lab = lab(monkeypatch, [cold, "a second boot"], [])
    monkeypatch.setattr("harness.resources.warm.has_snapshot", lambda plan: False)
    monkeypatch.setattr("harness.resources.warm.cold_boot_lock",
                        lambda plan: contextlib.nullcontext(True))
    assert the_lab.boot(None, tmp_path / "console.log", restored=True) is cold
    assert not cold.stopped


def test_a_failed_boot_over_an_intact_cache_is_the_kernels(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    the_lab = lab(monkeypatch, [BootError("guest stalled")], [False])
    with pytest.raises(BootError, match="guest stalled"):
        the_lab.boot(None, tmp_path / "console.log")


def test_a_second_failure_is_reported_even_if_the_cache_changed_again(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    the_lab = lab(monkeypatch, [BootError("first"), BootError("second")], [True, True])
    with pytest.raises(BootError, match="second"):
        the_lab.boot(None, tmp_path / "console.log")
