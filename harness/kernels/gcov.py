"""The coverage variant of a build kernel: the same tree, series and config, plus gcov
(kernels/fragments/coverage.config) on the ring-buffer files only. Profiling only those files:
kbuild's per-object `GCOV_PROFILE_<obj>.o := y`
lines, added to a copy of each file's directory Makefile, so that the rest of the kernel is
compiled as before (fast under TCG, and the same objects ccache already has)."""
from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from harness import paths
from harness.config import BuildKernel, KernelSpec, LabConfig
from harness.errors import ConfigError
from harness.kernels import objlines

log = logging.getLogger(__name__)

# The files of the four paths (issue 42): the perf ring buffer, AUX and accounting live in
# kernel/events; the tracefs ring buffer and its mapping, snapshot and remotes in kernel/trace.
# A file a tree lacks (6.12 has no trace_remote.c) is left out of that tree's variant.
FILES: tuple[str, ...] = (
    "kernel/events/core.c",
    "kernel/events/ring_buffer.c",
    "kernel/trace/ring_buffer.c",
    "kernel/trace/trace.c",
    "kernel/trace/trace_snapshot.c",
    "kernel/trace/simple_ring_buffer.c",
    "kernel/trace/trace_remote.c",
)

MARK = "# ringlab coverage (harness/kernels/gcov.py)"
FRAGMENT = paths.FRAGMENTS / "coverage.config"
SUFFIX = "+coverage"


def profile(tree: Path, files: tuple[str, ...]) -> list[str]:
    """Add the profiling lines for `files` to the Makefiles of `tree`, a hard-link copy. The
    Makefiles changed, tree-relative (none when `files` is empty)."""
    return objlines.add(tree, files, "GCOV_PROFILE", MARK, what="coverage")


def variant(cfg: LabConfig, spec: KernelSpec, extra: tuple[str, ...] = ()) -> KernelSpec:
    """`spec` with gcov on the ring-buffer files (and the `extra` .c files: those a series
    under review changes). A kernel the lab does not build (a Debian image: none has
    CONFIG_GCOV_KERNEL) cannot have one: the error names a build kernel."""
    if not isinstance(spec.source, BuildKernel):
        builds = [n for n in cfg.build_kernel_names() if cfg.kernel(n).arch == spec.arch]
        use = next((n for n in reversed(builds) if "ringbuf" in n), builds[0] if builds else None)
        raise ConfigError(f"kernel {spec.name} has no gcov (Debian builds none of its kernels "
                          "with CONFIG_GCOV_KERNEL) and the lab cannot rebuild it"
                          + (f": use a build kernel, e.g. --kernel {use}" if use else
                             ": give a `build` kernel of lab.yaml"))
    src = spec.source
    files = tuple(dict.fromkeys(src.profiled + FILES + tuple(sorted(extra))))
    if spec.name.endswith(SUFFIX):
        return replace(spec, source=replace(src, profiled=files))
    return replace(spec, name=spec.name + SUFFIX,
                   source=replace(src, fragments=src.fragments + (FRAGMENT,), profiled=files))
