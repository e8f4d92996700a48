"""The coverage variant: which Makefile lines profile which files, written without touching
the pristine tree a hard-link copy shares its files with."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.config import BuildKernel, DebianKernel, DebianSource, KernelSpec, LabConfig
from harness.errors import BuildError, ConfigError
from harness.kernels import gcov, kcsan, objlines


def test_makefile_lines_group_files_by_directory() -> None:
    lines = objlines.makefile_lines(["kernel/events/core.c", "kernel/events/ring_buffer.c",
                                     "kernel/trace/trace.c"], "GCOV_PROFILE", "coverage")
    assert lines == {"kernel/events/Makefile": ["GCOV_PROFILE_core.o := y",
                                                "GCOV_PROFILE_ring_buffer.o := y"],
                     "kernel/trace/Makefile": ["GCOV_PROFILE_trace.o := y"]}


@pytest.mark.parametrize("bad", ["kernel/events/core.h", "/abs/core.c", "../x/core.c"])
def test_a_file_that_is_not_a_tree_relative_c_file_is_refused(bad: str) -> None:
    with pytest.raises(BuildError, match="tree-relative .c"):
        objlines.makefile_lines([bad], "GCOV_PROFILE", "coverage")


def _tree(root: Path) -> Path:
    for d in ("kernel/events", "kernel/trace"):
        (root / d).mkdir(parents=True)
        (root / d / "Makefile").write_text("obj-y += x.o\n")
    (root / "kernel/events/core.c").write_text("")
    (root / "kernel/trace/trace.c").write_text("")
    return root


def test_profile_breaks_the_hard_link_and_skips_absent_files(tmp_path: Path) -> None:
    pristine = _tree(tmp_path / "pristine")
    copy = tmp_path / "copy"
    for f in pristine.rglob("*"):
        target = copy / f.relative_to(pristine)
        if f.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(f, target)
    changed = gcov.profile(copy, ("kernel/events/core.c", "kernel/trace/trace.c",
                                  "kernel/trace/trace_remote.c"))
    assert sorted(changed) == ["kernel/events/Makefile", "kernel/trace/Makefile"]
    assert (pristine / "kernel/events/Makefile").read_text() == "obj-y += x.o\n"
    text = (copy / "kernel/trace/Makefile").read_text()
    assert text.startswith("obj-y += x.o\n") and "GCOV_PROFILE_trace.o := y" in text
    assert "trace_remote" not in text


def test_profile_of_a_tree_with_none_of_the_files_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="none of the files"):
        gcov.profile(tmp_path, ("kernel/events/core.c",))


def test_no_files_change_no_makefile(tmp_path: Path) -> None:
    """A series-only copy (a review) asks for no profiling: nothing to add, no error."""
    assert gcov.profile(tmp_path, ()) == []


def test_kcsan_scope_turns_instrumentation_back_on_per_object(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "t")
    changed = kcsan.instrument(tree, ("kernel/events/core.c", "kernel/trace/trace.c"))
    assert sorted(changed) == ["kernel/events/Makefile", "kernel/trace/Makefile"]
    assert "KCSAN_SANITIZE_core.o := y" in (tree / "kernel/events/Makefile").read_text()
    # The default is turned off on make's command line, which overrides every Makefile.
    assert kcsan.MAKE_VARS == ("KCSAN_SANITIZE=n",)


def _cfg(tmp_path: Path) -> LabConfig:
    build = KernelSpec("src-7.2-ringbuf", BuildKernel(DebianSource("sid", "linux-source-7.2")))
    deb = KernelSpec("trixie-cloud", DebianKernel("trixie", "cloud-amd64"))
    return LabConfig(tmp_path / "lab.yaml", {s.name: s for s in (build, deb)}, "trixie-cloud")


def test_variant_adds_the_fragment_and_the_files(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    v = gcov.variant(cfg, cfg.kernel("src-7.2-ringbuf"))
    assert v.name == "src-7.2-ringbuf+coverage"
    assert isinstance(v.source, BuildKernel)
    assert v.source.fragments[-1] == gcov.FRAGMENT and v.source.profiled == gcov.FILES
    assert gcov.variant(cfg, v) == v


def test_a_debian_kernel_has_no_variant_and_the_error_names_a_build_kernel(
        tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    with pytest.raises(ConfigError, match="no gcov.*--kernel src-7.2-ringbuf"):
        gcov.variant(cfg, cfg.kernel("trixie-cloud"))
