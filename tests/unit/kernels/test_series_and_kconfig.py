"""harness/kernels/series.py, kconfig.py and trees.py on small trees made here: series in each form,
patches applied to a hard-link copy (the original never changes), rejected hunks named, and
config fragments merged and checked."""
from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest

from harness.kernels import kconfig, series, trees
from harness.errors import BuildError, PatchError
from harness.paths import FRAGMENTS

PATCH_1 = """From 1111 Mon Sep 17 00:00:00 2001
From: A Developer <dev@example.invalid>
Subject: [PATCH 1/2] ring: say hello

---
diff --git a/kernel/ring.c b/kernel/ring.c
--- a/kernel/ring.c
+++ b/kernel/ring.c
@@ -1,3 +1,3 @@
 int a;
-int b;
+int hello;
 int c;
--
2.39.2
"""
PATCH_2 = """From 2222 Mon Sep 17 00:00:00 2001
From: A Developer <dev@example.invalid>
Subject: [PATCH 2/2] ring: and goodbye

---
diff --git a/kernel/ring.c b/kernel/ring.c
--- a/kernel/ring.c
+++ b/kernel/ring.c
@@ -2,2 +2,3 @@
 int hello;
 int c;
+int goodbye;
--
2.39.2
"""
COVER = """From 0000 Mon Sep 17 00:00:00 2001
From: A Developer <dev@example.invalid>
Subject: [PATCH 0/2] ring: greetings

Two patches.
"""


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "linux"
    (tree / "kernel").mkdir(parents=True)
    (tree / "kernel/ring.c").write_text("int a;\nint b;\nint c;\n")
    return tree


def test_a_folder_of_patches_applies_in_name_order_to_a_copy(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    (tmp_path / "s").mkdir()
    (tmp_path / "s/0002-bye.patch").write_text(PATCH_2)
    (tmp_path / "s/0001-hello.patch").write_text(PATCH_1)
    copy = tmp_path / "copy"
    trees.link_farm(tree, copy)
    applied = series.apply((tmp_path / "s",), copy)
    assert [p.subject for p in applied] == ["[PATCH 1/2] ring: say hello",
                                            "[PATCH 2/2] ring: and goodbye"]
    assert (copy / "kernel/ring.c").read_text() == "int a;\nint hello;\nint c;\nint goodbye;\n"
    assert (tree / "kernel/ring.c").read_text() == "int a;\nint b;\nint c;\n", \
        "the user's tree was changed through the hard link"


def test_a_quilt_series_file_gives_the_order(tmp_path: Path) -> None:
    (tmp_path / "b.patch").write_text(PATCH_1)
    (tmp_path / "a.patch").write_text(PATCH_2)
    (tmp_path / "series").write_text("# order\nb.patch\na.patch -p1\n")
    assert [p.name for p in series.read(tmp_path)] == ["b.patch", "a.patch"]
    (tmp_path / "series").write_text("b.patch\nmissing.patch\n")
    with pytest.raises(PatchError, match="missing.patch"):
        series.read(tmp_path / "series")


def test_an_mbox_from_b4_skips_the_cover_letter(tmp_path: Path) -> None:
    mbx = tmp_path / "v2_20260101_dev_ring.mbx"
    mbx.write_text(COVER + "\n" + PATCH_1 + "\n" + PATCH_2)
    patches = series.read(mbx)
    assert [p.subject for p in patches] == ["[PATCH 1/2] ring: say hello",
                                            "[PATCH 2/2] ring: and goodbye"]
    copy = tmp_path / "copy"
    trees.link_farm(_tree(tmp_path), copy)
    series.apply((mbx,), copy)
    assert "goodbye" in (copy / "kernel/ring.c").read_text()


def test_a_patch_that_does_not_apply_is_named_with_its_hunk(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    (tree / "kernel/ring.c").write_text("int a;\nint z;\nint c;\n")
    (tmp_path / "0001-hello.patch").write_text(PATCH_1)
    with pytest.raises(PatchError) as e:
        series.apply((tmp_path / "0001-hello.patch",), tree)
    msg = str(e.value)
    assert "patch 0001-hello.patch" in msg and "kernel/ring.c:1" in msg
    assert "rejected hunk:\n@@ -1,3 +1,3 @@\n int a;\n-int b;\n+int hello;" in msg


def test_a_patch_already_in_the_tree_is_told_apart(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    (tree / "kernel/ring.c").write_text("int a;\nint hello;\nint c;\n")
    (tmp_path / "p.patch").write_text(PATCH_1)
    with pytest.raises(PatchError, match="already in the tree"):
        series.apply((tmp_path / "p.patch",), tree)


def test_reapplying_an_unchanged_series_keeps_mtimes(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    (tmp_path / "p.patch").write_text(PATCH_1)
    old, new = tmp_path / "old", tmp_path / "new"
    for copy in (old, new):
        trees.link_farm(tree, copy)
        series.apply((tmp_path / "p.patch",), copy)
    import os
    os.utime(old / "kernel/ring.c", ns=(1, 10**18))
    assert trees.keep_mtimes(["kernel/ring.c"], new, old) == 1
    assert (new / "kernel/ring.c").stat().st_mtime_ns == 10**18


def test_fragments_merge_and_report_what_olddefconfig_dropped() -> None:
    base = "CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=m\n"
    options = kconfig.parse("CONFIG_B=y\n# comment\nCONFIG_C=y\nCONFIG_D=\"x\"\n", "f.config")
    merged = kconfig.merge(base, options)
    assert kconfig.values(merged) == {"A": "y", "B": "y", "C": "y", "D": '"x"'}
    final = {"A": "y", "B": "y", "C": "m"}
    dropped = kconfig.dropped(options, final)
    assert [str(d) for d in dropped] == ["CONFIG_C=y (f.config:3): got m",
                                        'CONFIG_D="x" (f.config:4): got n']


def test_a_fragment_changing_an_earlier_value_is_a_redefinition_as_merge_config_says() -> None:
    base = kconfig.parse("CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=m\n", "defconfig")
    first = kconfig.parse("CONFIG_B=y\nCONFIG_C=m\n", "a.config")
    second = kconfig.parse("# comment\nCONFIG_B=n\nCONFIG_E=y\n# CONFIG_A is not set\n",
                           "b.config")
    found = [str(r) for r in kconfig.redefinitions(base, first + second)]
    # C=m again is no change; E is new; B changes twice (base, then a.config); A once.
    assert found == ["CONFIG_B redefined by a.config:1 (was n at defconfig:2, now y)",
                     "CONFIG_B redefined by b.config:2 (was y at a.config:1, now n)",
                     "CONFIG_A redefined by b.config:4 (was y at defconfig:1, now n)"]


def test_redefinitions_are_logged_as_build_warnings(caplog: pytest.LogCaptureFixture) -> None:
    from harness.config import KernelSpec, PathKernel
    from harness.kernels import kbuild

    spec = KernelSpec("k", PathKernel(Path("/bzImage")))
    with caplog.at_level(logging.WARNING):
        kbuild.Builder._warn_redefinitions(spec, "/my/base.config", "CONFIG_A=y\n",
                                           kconfig.parse("CONFIG_A=m\nCONFIG_B=y\n", "f.config")
                                           + kconfig.parse("CONFIG_B=n\n", "g.config"))
    assert [r.getMessage() for r in caplog.records] == [
        "kernel k: CONFIG_A redefined by f.config:1 (was y at base config /my/base.config:1, "
        "now m)",
        "kernel k: CONFIG_B redefined by g.config:1 (was y at f.config:2, now n)"]


def test_a_fragment_changing_what_make_generated_is_one_line_and_listed_in_the_log(
        caplog: pytest.LogCaptureFixture) -> None:
    """tinyconfig + minimal.config changes ~30 values: the purpose of the fragment, not a
    mistake; only a fragment overriding another fragment is still a warning."""
    import io

    from harness.config import KernelSpec, PathKernel
    from harness.kernels import kbuild

    spec = KernelSpec("k", PathKernel(Path("/bzImage")))
    logf = io.StringIO()
    with caplog.at_level(logging.INFO):
        kbuild.Builder._warn_redefinitions(
            spec, "tinyconfig", "# CONFIG_A is not set\nCONFIG_C=y\n",
            kconfig.parse("CONFIG_A=y\nCONFIG_B=y\n", "f.config")
            + kconfig.parse("CONFIG_B=n\n", "g.config"), logf)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "kernel k: CONFIG_B redefined by g.config:1 (was y at f.config:2, now n)"),
        ("INFO", "kernel k: the fragments change 1 values of tinyconfig (listed in build.log)")]
    assert logf.getvalue() == ("fragment sets: CONFIG_A redefined by f.config:1 "
                               "(was n at tinyconfig:1, now y)\n")


def test_fragment_errors_name_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match=r"f.config:2: not a config line: 'PERF_EVENTS=y'"):
        kconfig.parse("CONFIG_A=y\nPERF_EVENTS=y\n", "f.config")
    (tmp_path / "Kconfig").write_text("config PERF_EVENTS\n\tbool\nmenuconfig TRACING\n")
    known = kconfig.symbols(tmp_path)
    assert known == {"PERF_EVENTS", "TRACING"}
    opts = kconfig.parse("CONFIG_PERF_EVENTS=y\nCONFIG_PREF_EVENTS=y\n", "f.config")
    assert [o.symbol for o in kconfig.unknown(opts, known)] == ["PREF_EVENTS"]


def test_shipped_fragments_parse() -> None:
    for name in ("minimal.config", "ringbuf.config", "debug.config"):
        assert kconfig.read_fragment(FRAGMENTS / name), name


def test_a_folder_that_is_not_a_kernel_tree_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="kernels.k.build.tree: .* is not a kernel source tree"):
        trees.check(tmp_path, "kernels.k.build.tree")


def test_a_git_tree_fingerprint_follows_commits_and_edits(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    first = trees.fingerprint(tree)
    assert first == trees.fingerprint(tree)
    (tree / "kernel/ring.c").write_text("changed\n")
    assert trees.fingerprint(tree) != first


def test_a_pinned_debian_source_the_suite_no_longer_has_names_what_it_has(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mirror that moved on (6.12.107-1 pinned, 6.12.117-1 there) is one error naming the
    version, the suite and what to change, never a build of another tree."""
    from harness.config import DebianSource
    from harness.debian import archive

    class Mirror:
        url, origin = "http://mirror.invalid/debian", "mirror.invalid"

    class FakeArchive:
        def __init__(self, mirror: object, suite: str) -> None:
            pass

        def packages(self, component: str, arch: str, prefix: str):
            yield archive.PackageRecord("linux-source-6.12", "6.12.117-1",
                                        "pool/l/linux-source-6.12_6.12.117-1_all.deb", 1,
                                        "0" * 64, "", "all")
    monkeypatch.setattr(archive, "Archive", FakeArchive)
    src = DebianSource("trixie", "linux-source-6.12", "6.12.107-1")
    with pytest.raises(BuildError, match=r"no linux-source-6.12 6.12.107-1 in trixie on "
                       r"http://mirror.invalid/debian \(it has 6.12.117-1\): change or drop "
                       r"debian_source.version"):
        trees.debian_tree(src, tmp_path, lambda: Mirror())


def test_the_arm64_minimal_fragment_differs_from_minimal_only_in_its_machine() -> None:
    """arm64-minimal.config is minimal.config's twin: a change to what the lab needs of a
    kernel (initramfs, userspace, probes) must be made in both, or the arm64 build drifts."""
    marker = "# --- the lab's initramfs"
    x86 = (FRAGMENTS / "minimal.config").read_text()
    arm = (FRAGMENTS / "arm64-minimal.config").read_text()
    assert x86[x86.index(marker):] == arm[arm.index(marker):]
    arm_machine = {o.symbol for o in kconfig.parse(arm[:arm.index(marker)], "arm64")}
    assert {"SERIAL_AMBA_PL011_CONSOLE", "PCI_HOST_GENERIC", "VIRTIO_PCI"} <= arm_machine
    assert not arm_machine & {"SERIAL_8250", "X86_MPPARSE", "KVM_GUEST"}
