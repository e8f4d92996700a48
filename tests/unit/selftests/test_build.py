"""harness/selftests/build.py: the kernel's selftests built into a bundle the guest runs. The
manifest round-trips; a program the tree lacks is listed missing rather than failing the build;
each case gets its target's `settings` timeout; ftracetest brings the catalog's cases with their
`requires:`; a failed make says its log's tail; a bundle in the cache is not built again; and
the tree is chosen as the docstring says (a build kernel's own, a Debian kernel's linux-source
of its version, else another suite's). make, the program listings and the trees are faked."""
from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness import arch as arches
from harness.config import BuildKernel, DebianKernel, KernelSpec, PathKernel
from harness.errors import BuildError
from harness.selftests import build, catalog
from harness.selftests.catalog import SelftestCase

LISTING = "%-20s %-25s %s\n%-20s %-25s %s\n" % ("mmap", "", "basic", "", "", "aux")


def _tree(tmp_path: Path) -> Path:
    """A tree with perf_events (timeout 90) and ftrace selftests, no ring-buffer ones."""
    st = tmp_path / "linux/tools/testing/selftests"
    (st / "perf_events").mkdir(parents=True)
    (st / "perf_events/settings").write_text("# comment\ntimeout=90\n")
    (st / "ftrace/test.d/00basic").mkdir(parents=True)
    (st / "ftrace/test.d/instances").mkdir()
    (st / "ftrace/ftracetest").write_text("#!/bin/sh\n")
    (st / "ftrace/Makefile").write_text("")
    (st / "ftrace/test.d/00basic/snapshot.tc").write_text("#!/bin/sh\n# requires: snapshot\n")
    (st / "ftrace/test.d/00basic/unrelated.tc").write_text("")
    (st / "ftrace/test.d/instances/instance.tc").write_text("# description: x\n")
    return tmp_path / "linux"


@pytest.fixture
def make(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """make builds only perf_events/mmap; `mmap -l` lists two cases."""
    ran: list[list[str]] = []

    def run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        ran.append(argv)
        if argv[-1] == "-l":
            return subprocess.CompletedProcess(argv, 4, "", LISTING)
        if argv[-1] == "all":
            obj = Path(next(a for a in argv if a.startswith("O="))[2:])
            (obj / "kselftest/perf_events").mkdir(parents=True)
            (obj / "kselftest/perf_events/mmap").write_text("ELF")
        return subprocess.CompletedProcess(argv, 0)
    monkeypatch.setattr(build.subprocess, "run", run)
    monkeypatch.setattr(build.arches, "is_native", lambda a: True)
    return ran


def test_a_bundle_is_built_from_what_the_tree_has(tmp_path: Path, make: list[list[str]]
                                                   ) -> None:
    work = tmp_path / "work"
    work.mkdir()
    b = build._build(build.Source(_tree(tmp_path), "the tree"), arches.get("x86_64"), work)
    assert b.source == "the tree"
    perf = [c for c in b.cases if c.target == "perf_events"]
    assert perf == [SelftestCase("perf_events", "mmap", "mmap.basic", 90),
                    SelftestCase("perf_events", "mmap", "mmap.aux", 90)]
    assert "perf_events/watermark_signal" in b.missing and "ring-buffer/map_test" in b.missing
    assert (b.root / "perf_events/mmap").read_text() == "ELF"
    targets = next(a for a in make if a[-1] == "all")
    assert "TARGETS=perf_events" in targets and "USERLDFLAGS=-static" in targets
    assert not (work / "obj").exists() and not (work / "hdr").exists()


def test_ftrace_cases_are_the_catalogs_with_their_requires(tmp_path: Path,
                                                           make: list[list[str]]) -> None:
    src = _tree(tmp_path) / "tools/testing/selftests/ftrace"
    cases = build._ftrace(src, tmp_path / "bundle/ftrace")
    assert [(c.case, c.requires, c.timeout_s) for c in cases] == [
        ("00basic/snapshot.tc", "snapshot", catalog.DEFAULT_TIMEOUT_S),
        ("instances/instance.tc", "", catalog.DEFAULT_TIMEOUT_S)]
    assert (tmp_path / "bundle/ftrace/ftracetest").exists()
    assert not (tmp_path / "bundle/ftrace/Makefile").exists()


def test_a_tree_without_ftracetest_has_no_ftrace_cases(tmp_path: Path) -> None:
    assert build._ftrace(tmp_path / "nothing", tmp_path / "dest") == []


def test_a_failed_make_says_the_tail_of_its_log(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    logf = tmp_path / "build.log"

    def run(argv: list[str], stdout: Any, **kw: Any) -> subprocess.CompletedProcess[str]:
        stdout.write("".join(f"line {n}\n" for n in range(30)))
        return subprocess.CompletedProcess(argv, 2)
    monkeypatch.setattr(build.subprocess, "run", run)
    with logf.open("w") as out, pytest.raises(build.SelftestBuildError) as e:
        build._make(["make"], out, logf, "make headers")
    assert e.value.message.startswith("make headers failed (exit 2):\nline 15\n")
    assert e.value.message.endswith("line 29")


def test_the_manifest_round_trips_with_its_root_relative(tmp_path: Path) -> None:
    b = build.Bundle(tmp_path / "bundle", "src", [SelftestCase("ftrace", "ftracetest", "a.tc",
                                                                30, "snapshot")], ["x/y"])
    b.write(tmp_path / build.MANIFEST)
    assert build.load(tmp_path / build.MANIFEST) == b
    assert '"root": "bundle"' in (tmp_path / build.MANIFEST).read_text()


def test_a_bundle_in_the_cache_is_not_built_again(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    def fake(source: build.Source, a: arches.Arch, work: Path) -> build.Bundle:
        built.append(source.description)
        return build.Bundle(work / "bundle", source.description)
    monkeypatch.setattr(build, "_build", fake)
    src = build.Source(tmp_path, "t")
    first = build.build(src, "x86_64", tmp_path / "cache", "fp1")
    assert build.build(src, "x86_64", tmp_path / "cache", "fp1") == first and built == ["t"]
    assert build.build(src, "x86_64", tmp_path / "cache", "fp2") != first  # another tree
    assert build.build(src, "arm64", tmp_path / "cache", "fp1") != first   # another arch
    assert len(built) == 3 and build.load(first).source == "t"


def _lab(spec: KernelSpec, **kernel: Any) -> SimpleNamespace:
    k = SimpleNamespace(**{"source_dir": None, "series": (), "build_dir": None,
                           "release": "7.2.13+deb14-cloud-amd64", "package_version": "7.2.13-1",
                           **kernel})
    return SimpleNamespace(kernel=lambda name: k, cache_root=Path("/cache"),
                           config=SimpleNamespace(kernel=lambda name: spec, mirror=None))


def test_a_build_kernels_own_tree_is_used_with_its_series() -> None:
    lab = _lab(KernelSpec("mine", BuildKernel(Path("/src"))), source_dir=Path("/src"),
               series=("s1", "s2"), build_dir=Path("/out"))
    source, fp = build.source_for(lab, "mine")  # type: ignore[arg-type]
    assert source == build.Source(Path("/src"), "the tree the kernel was built from (/src, "
                                                "with s1, s2)")
    assert fp == "build /out"


def test_an_image_given_as_it_is_has_no_tree(tmp_path: Path) -> None:
    lab = _lab(KernelSpec("/img", PathKernel(Path("/img"))))
    with pytest.raises(build.SelftestBuildError, match="kernel /img: the lab has no source tree"):
        build.source_for(lab, "/img")  # type: ignore[arg-type]


def test_a_release_without_x_y_is_said(tmp_path: Path) -> None:
    lab = _lab(KernelSpec("d", DebianKernel("sid", "cloud-amd64")), release="weird")
    with pytest.raises(build.SelftestBuildError, match="cannot read X.Y from release 'weird'"):
        build.source_for(lab, "d")  # type: ignore[arg-type]


def _trees(monkeypatch: pytest.MonkeyPatch, have: dict[tuple[str, str | None], str]
           ) -> list[tuple[str, str | None]]:
    """linux-source-7.2 of (suite, version) -> the version unpacked; others a BuildError."""
    asked: list[tuple[str, str | None]] = []

    def debian_tree(src: Any, cache_root: Path, mirror_for: Any) -> Path:
        asked.append((src.suite, src.version))
        if (src.suite, src.version) not in have:
            raise BuildError(f"no {src.package} {src.version or ''} in {src.suite}")
        return Path(f"/t/{src.package}_{have[(src.suite, src.version)]}/linux-source-7.2")
    monkeypatch.setattr(build.trees, "debian_tree", debian_tree)
    return asked


def test_a_debian_kernel_takes_the_source_of_its_own_version(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _trees(monkeypatch, {("sid", "7.2.13-1"): "7.2.13-1"})
    lab = _lab(KernelSpec("d", DebianKernel("sid", "cloud-amd64")))
    source, _ = build.source_for(lab, "d")  # type: ignore[arg-type]
    assert source.description == "linux-source-7.2 7.2.13-1 of sid (the kernel's own version)"
    assert asked == [("sid", "7.2.13-1")]


def test_else_the_nearest_source_another_suite_has_is_said_as_such(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _trees(monkeypatch, {("experimental", None): "7.2.14-1"})
    lab = _lab(KernelSpec("d", DebianKernel("trixie-backports", "cloud-amd64")))
    source, fp = build.source_for(lab, "d")  # type: ignore[arg-type]
    assert asked == [("trixie-backports", "7.2.13-1"), ("trixie-backports", None),
                     ("experimental", None)]
    assert source.description == ("linux-source-7.2 7.2.14-1 of experimental (the kernel is "
                                  "7.2.13-1: no linux-source-7.2 7.2.13-1 in trixie-backports)")
    assert fp == "debian /t/linux-source-7.2_7.2.14-1/linux-source-7.2"


def test_no_source_anywhere_lists_every_suite_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    _trees(monkeypatch, {})
    lab = _lab(KernelSpec("d", DebianKernel("sid", "cloud-amd64")))
    with pytest.raises(build.SelftestBuildError) as e:
        build.source_for(lab, "d")  # type: ignore[arg-type]
    said = e.value.message.splitlines()
    assert said[0] == "kernel d: no linux-source-7.2 to build its selftests from:"
    assert len(said) == 1 + 1 + len(build.OTHER_SUITES)  # own version, then each suite
