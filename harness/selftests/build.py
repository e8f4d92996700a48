"""Build the catalog's selftests from a kernel's tree into a bundle the guest runs.

The tree: a build kernel's own (with its series applied, so a series' new selftest case runs);
for a Debian kernel, the linux-source package of its version, or the nearest one the mirror
has (said in the bundle's `source`). Programs are linked statically (USERLDFLAGS=-static) so
the guest's libc does not matter, against the tree's own uapi headers (`make headers`, in a
folder of ours: the tree stays clean for O= builds). The bundle is cached by the tree's
fingerprint; its manifest.json lists every case (catalog.SelftestCase).
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness import arch as arches
from harness import cache, progress
from harness.config import DebianKernel, DebianSource
from harness.debian import mirror
from harness.errors import BuildError, LabError
from harness.kernels import trees
from harness.resources import Lab
from harness.selftests import catalog
from harness.selftests.catalog import SelftestCase

log = logging.getLogger("ringlab")
MANIFEST = "manifest.json"
FORMAT = 1  # bump when the bundle's layout changes: old cache entries are rebuilt


class SelftestBuildError(LabError):
    """The selftests could not be built: the lab's error (the build log's tail), not the
    kernel's."""


@dataclass(frozen=True)
class Source:
    """The tree the selftests come from, and what to say about it in reports."""
    tree: Path
    description: str  # e.g. "linux-source-7.2 7.2.13-1 (the kernel's own version)"


@dataclass
class Bundle:
    """Built selftests: `root` is pushed to the guest whole."""
    root: Path
    source: str
    cases: list[SelftestCase] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # catalog programs the tree lacks

    def write(self, path: Path) -> None:
        """manifest.json beside the bundle's root (which it names relative to itself)."""
        path.write_text(json.dumps({"format": FORMAT, "root": self.root.name,
                                    "source": self.source, "missing": self.missing,
                                    "cases": [asdict(c) for c in self.cases]}, indent=1))


def load(manifest: Path) -> Bundle:
    """The bundle a manifest describes (written by build())."""
    d = json.loads(manifest.read_text())
    return Bundle(manifest.parent / d["root"], d["source"], [SelftestCase(**c) for c in d["cases"]],
                  d.get("missing", []))


def build(source: Source, arch: str, cache_root: Path, fingerprint: str) -> Path:
    """The manifest of the catalog built from `source` for `arch` (cached by fingerprint)."""
    a = arches.get(arch)
    key = hashlib.sha256(f"{FORMAT} {fingerprint} {a.name}".encode()).hexdigest()[:16]
    entry = cache.Layout(cache_root).selftests(key)
    cache.mark_used(cache_root, entry)  # for ./lab gc --keep
    if (entry / MANIFEST).exists():
        return entry / MANIFEST
    with progress.step(f"building the kernel's selftests from {source.description}"), \
            cache.building(entry) as scratch:
        _build(source, a, scratch).write(scratch / MANIFEST)
    return entry / MANIFEST


def _build(source: Source, a: arches.Arch, work: Path) -> Bundle:
    tree = source.tree
    make_vars = arches.make_vars(a)
    logf = work / "build.log"
    with logf.open("w") as out:
        _make(["make", "-C", str(tree), f"O={work / 'hdr'}", *make_vars,
               "headers"], out, logf, "make headers")
        targets = [t for t in catalog.PROGRAMS if (tree / "tools/testing/selftests" / t).is_dir()]
        if targets:
            _make(["make", "-C", str(tree / "tools/testing/selftests"), f"O={work / 'obj'}",
                   *make_vars, f"TARGETS={' '.join(targets)}",
                   f"KHDR_INCLUDES=-isystem {work / 'hdr/usr/include'}",
                   "USERLDFLAGS=-static", "all"], out, logf, "make -C tools/testing/selftests")
    root = work / "bundle"
    bundle = Bundle(root, source.description)
    for target, programs in catalog.PROGRAMS.items():
        timeout = _timeout(tree / "tools/testing/selftests" / target)
        for program in programs:
            built = work / "obj/kselftest" / target / program
            if not built.exists():
                bundle.missing.append(f"{target}/{program}")
                continue
            (root / target).mkdir(parents=True, exist_ok=True)
            shutil.copy2(built, root / target / program)
            for name in catalog.harness_cases(_listing(built, a)):
                bundle.cases.append(SelftestCase(target, program, name, timeout))
    bundle.cases += _ftrace(tree / "tools/testing/selftests/ftrace", root / "ftrace")
    shutil.rmtree(work / "obj", ignore_errors=True)
    shutil.rmtree(work / "hdr", ignore_errors=True)
    return bundle


def _make(argv: list[str], out, logf: Path, what: str) -> None:
    log.debug("%s", " ".join(argv))
    p = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        out.flush()
        tail = "\n".join(logf.read_text(errors="replace").splitlines()[-15:])
        raise SelftestBuildError(f"{what} failed (exit {p.returncode}):\n{tail}")


def _listing(program: Path, a: arches.Arch) -> str:
    """`program -l` (on the host; through qemu-user for another arch): the harness lists
    its cases on stderr and exits KSFT_SKIP without touching the kernel."""
    argv = [str(program), "-l"]
    if not arches.is_native(a):
        argv = [a.qemu_user, *argv]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return p.stderr + p.stdout


def _timeout(target_dir: Path) -> int:
    """The target's `settings` timeout (kselftest's runner reads the same file)."""
    settings = target_dir / "settings"
    if settings.exists() and (m := re.search(r"^timeout=(\d+)", settings.read_text(), re.M)):
        return int(m.group(1))
    return catalog.DEFAULT_TIMEOUT_S


def _ftrace(src: Path, dest: Path) -> list[SelftestCase]:
    """ftracetest with its helpers and the catalog's cases (and the files they source)."""
    if not (src / "ftracetest").exists():
        return []
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("*.c", "Makefile", "samples"))
    timeout = _timeout(src)
    cases = []
    for pattern in catalog.FTRACE_CASES:
        for tc in sorted((src / "test.d").glob(pattern)):
            text = tc.read_text(errors="replace")
            m = re.search(r"^#\s*requires:\s*(.*)$", text, re.M)
            cases.append(SelftestCase("ftrace", "ftracetest",
                                      str(tc.relative_to(src / "test.d")), timeout,
                                      m.group(1).strip() if m else ""))
    return cases


def source_for(lab: Lab, name: str) -> tuple[Source, str]:
    """The tree of kernel `name`'s selftests, and a fingerprint for the bundle's cache: a
    build kernel's own tree (its series applied); a Debian kernel's linux-source of the same
    version in its suite, else the newest linux-source-X.Y of the first suite that has one."""
    k = lab.kernel(name)
    if k.source_dir is not None:
        what = f"the tree the kernel was built from ({k.source_dir}"
        what += f", with {', '.join(k.series)})" if k.series else ")"
        return Source(k.source_dir, what), f"build {k.build_dir}"
    spec = lab.config.kernel(name)
    if not isinstance(spec.source, DebianKernel):
        raise SelftestBuildError(f"kernel {name}: the lab has no source tree for it (a kernel "
                                 "image given as it is); give a build kernel or a Debian one")
    m = re.match(r"(\d+)\.(\d+)", k.release)
    if m is None:
        raise SelftestBuildError(f"kernel {name}: cannot read X.Y from release {k.release!r}")
    package = f"linux-source-{m.group(1)}.{m.group(2)}"
    want = k.package_version
    suites = [spec.source.suite] + [s for s in OTHER_SUITES if s != spec.source.suite]
    tried = []
    for suite, version in [(spec.source.suite, want)] + [(s, None) for s in suites]:
        try:
            tree = trees.debian_tree(DebianSource(suite, package, version), lab.cache_root,
                                     lambda: mirror.resolve(lab.config.mirror))
        except BuildError as e:
            tried.append(e.message)
            continue
        got = tree.parent.name.split("_", 1)[1]
        note = ("the kernel's own version" if got == want
                else f"the kernel is {want}: no {package} {want} in {spec.source.suite}")
        return Source(tree, f"{package} {got} of {suite} ({note})"), f"debian {tree}"
    raise SelftestBuildError(f"kernel {name}: no {package} to build its selftests from:\n  "
                             + "\n  ".join(tried))


# Where to look for a Debian kernel's linux-source when its own suite has none (a backports
# image whose X.Y is only in experimental, say).
OTHER_SUITES = ("experimental", "sid", "trixie-backports", "trixie")
