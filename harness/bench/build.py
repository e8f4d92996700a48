"""`./lab bench build`: kernel build times on this host, from Debian's linux-source-6.12 (a
hard-link copy of it in the cache, so a file can be touched): a full build with minimal.config
(on tinyconfig) and, with `ringbuf`, with ringbuf.config (on defconfig), both without ccache;
an incremental rebuild after touching kernel/trace/ring_buffer.c; and one bisect step's work
end to end (touch kernel/events/core.c, rebuild, boot, one probe)."""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import paths
from harness.bench import report
from harness.config import BuildKernel, DebianSource, KernelSpec, LabConfig
from harness.debian import mirror
from harness.debian.mirror import Mirror
from harness.errors import LabError
from harness.guest.guest import boot
from harness.kernels import trees
from harness.kernels.kbuild import Builder
from harness.resources import Lab

# Issue 20: one bisect step (a one-file change rebuilt, booted, probed) within this.
BISECT_STEP_TARGET_S = 180.0
FALLBACK_SOURCE = DebianSource("trixie", "linux-source-6.12")


@dataclass(frozen=True)
class Tree:
    """The bench's own copy of the source (hard links to the cache's unpacked tree)."""
    path: Path

    def touch(self, rel: str) -> None:
        """A new inode: the hard-linked original in the cache keeps its mtime."""
        path = self.path / rel
        data = path.read_bytes()
        path.unlink()
        path.write_bytes(data)

    def kernel(self, name: str, base: str, fragment: str) -> KernelSpec:
        return KernelSpec(name, BuildKernel(self.path, (), base, (paths.FRAGMENTS / fragment,)))


def debian_source(cfg: LabConfig) -> DebianSource:
    """The tree lab.yaml's src-6.12-min builds (its version pin included), else the newest
    linux-source-6.12 of trixie."""
    shipped = cfg.kernels.get("src-6.12-min")
    if shipped and isinstance(shipped.source, BuildKernel) \
            and isinstance(shipped.source.tree, DebianSource):
        return shipped.source.tree
    return FALLBACK_SOURCE


def _no_mirror() -> Mirror:  # the benchmark's tree is a local copy: nothing to fetch
    raise LabError("the build benchmark fetches nothing")


def _source(k: KernelSpec) -> BuildKernel:
    assert isinstance(k.source, BuildKernel)
    return k.source


def timed_build(cache_root: Path, tree: Tree, k: KernelSpec, fresh: bool
                ) -> tuple[float, int]:
    """make's seconds and steps compiled for `k` (built from `tree`); `fresh`: its build
    folder removed first and no ccache."""
    builder = Builder(cache_root, _no_mirror, lambda n: None, ccache=not fresh)
    if fresh:
        src = _source(k)
        shutil.rmtree(builder.work_dir(tree.path, src, *builder.keys(k, src)),
                      ignore_errors=True)
    _, built = builder.prepare(k, _source(k))
    return built.make_seconds, built.compiled


def table(results: dict[str, dict[str, Any]]) -> list[str]:
    """One row a build, its extra figures beside; the bisect step judged."""
    lines = []
    for name, r in results.items():
        extra = ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                          for k, v in r.items() if k != "s")
        lines.append(f"{name:34s} {r['s']:8.1f} s  ({extra})")
    step = results["bisect_step_s"]["s"]
    lines.append(f"bisect step target <= {BISECT_STEP_TARGET_S:g} s: "
                 f"{'met' if step <= BISECT_STEP_TARGET_S else 'MISSED'}")
    return lines


def run(cfg: LabConfig, ringbuf: bool = True) -> int:
    out = report.folder(cfg, "build")
    lab = Lab(cfg)
    source = trees.debian_tree(debian_source(cfg), lab.cache_root,
                               lambda: mirror.resolve(cfg.mirror))
    tree = Tree(lab.layout.bench_tree())
    if not tree.path.exists():
        trees.link_farm(source, tree.path)
    results: dict[str, dict[str, Any]] = {}
    minimal = tree.kernel("bench-min", "tinyconfig", "minimal.config")
    tree.touch("README")  # a tree state no earlier bench built: the full build cannot be a hit
    s, n = timed_build(lab.cache_root, tree, minimal, fresh=True)
    results["full_build_minimal_s"] = {"s": s, "steps": n}
    tree.touch("kernel/trace/ring_buffer.c")
    s, n = timed_build(lab.cache_root, tree, minimal, fresh=False)
    results["incremental_ring_buffer_c_s"] = {"s": s, "steps": n}
    tree.touch("kernel/events/core.c")
    start = time.monotonic()
    Builder(lab.cache_root, _no_mirror, lambda n: None).prepare(minimal, _source(minimal))
    build_s = time.monotonic() - start
    t = time.monotonic()
    with boot(Lab(cfg.with_kernel(minimal)).plan(minimal.name, out / "console.log")) as g:
        boot_s = time.monotonic() - t
        d = g.probe("probe_perf_ring", ["lengths"], timeout=120).data
    results["bisect_step_s"] = {"s": time.monotonic() - start, "build_s": build_s,
                                "boot_s": boot_s, "probe_ok": "results" in d}
    if ringbuf:
        tree.touch("README")
        s, n = timed_build(lab.cache_root, tree, tree.kernel("bench-ringbuf", "defconfig",
                                                       "ringbuf.config"), fresh=True)
        results["full_build_ringbuf_s"] = {"s": s, "steps": n}
    report.save(out, report.Report(
        [f"ringlab bench build: linux-source-6.12 on {os.cpu_count()} cpu(s)", *table(results)],
        results))
    return 0
