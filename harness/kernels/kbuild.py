"""Building a kernel from a tree + patch series + config (a lab.yaml `build` kernel).

    source tree ──(series? hard-link copy + git apply)──> build source
    base config + fragments ──merge──> .config ──make olddefconfig──> checked against fragments
    make O=<out> bzImage|Image [modules] ──> a prepared kernel in the cache (like any other)

A kernel of another arch than the host's (lab.yaml `arch: arm64`) is cross-built: make gets
ARCH= and CROSS_COMPILE= (harness/arch.py), its config and build folders are keyed by the arch,
and its initramfs gets that arch's static busybox from the rootfs suite.

Two caches: the out-of-tree build folder, kept per (source, config) so a changed file rebuilds
incrementally; and the prepared kernel, keyed by the tree's state + series + config, so an
unchanged kernel is never rebuilt at all. Both record the digests of the files the lab takes
from them (harness/cache.py): a prepared kernel whose files changed is stored again, and a
build output that changed is removed so make makes it again. Builds use ccache when the host
has it. make's output goes to a log file; the screen gets progress, and a failure gets its
first compiler error and the log's path.
"""
from __future__ import annotations

import filecmp
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from harness import arch as arches, cache, host, progress
from harness.kernels import gcov, kconfig, kcsan, kernel, series, trees
from harness.config import BuildKernel, DebianSource, KernelSpec
from harness.errors import BuildError
from harness.kernels.kernel import BootableKernel
from harness.debian.mirror import Mirror

log = logging.getLogger(__name__)
RECIPE = 1  # bump when what a build produces changes
_COMPILED = re.compile(r"^\s+(?:CC|AS|LD|AR|CC \[M\])\s+(?P<target>\S+)")
_COMPILER_ERROR = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: ")


@dataclass
class BuildReport:
    """How a build went, for the screen, the benchmark and `./lab build`."""
    kernel: str
    release: str = ""
    cached: bool = False           # the prepared kernel was in the cache: no make at all
    seconds: float = 0.0           # wall time of this call
    make_seconds: float = 0.0      # of which make (config + build)
    compiled: int = 0              # CC/AS/LD lines make printed
    dropped: list[str] = field(default_factory=list)  # fragment options olddefconfig changed
    log: Path | None = None
    source: Path | None = None     # the tree make built (a patched copy if there was a series)
    out: Path | None = None


def first_error(log_text: str) -> str:
    """The first compiler error of a failed build ('file:line: error: ...'), else the first
    make error line, else the last line."""
    lines = log_text.splitlines()
    for line in lines:
        if _COMPILER_ERROR.match(line):
            return line.strip()
    for line in lines:
        if re.match(r"^make(\[\d+\])?: \*\*\*", line):
            return line.strip()
    return lines[-1].strip() if lines else "(empty build log)"


def _copied(src: BuildKernel) -> bool:
    """Whether make builds a hard-link copy of the tree (patched, or its Makefiles changed)."""
    return bool(src.series or src.profiled or src.kcsan_only)


def make_vars(src: BuildKernel) -> list[str]:
    """make's command-line variables for a build of `src` (a scoped KCSAN turns its default
    off there, harness/kernels/kcsan.py)."""
    return list(kcsan.MAKE_VARS) if src.kcsan_only else []


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


CONFIG_STAMP = "ringlab-config.stamp"  # beside the build's .config


def outputs(out: Path, arch: str) -> list[str]:
    """What the lab takes from a build folder after make, recorded in its manifest (harness/
    cache.py): the boot image, vmlinux (gdb, decoding), .config, Module.symvers (test modules
    build against it) and the modules modules_install copies."""
    names = [arches.get(arch).image, "vmlinux", ".config", "Module.symvers"]
    try:
        order = (out / "modules.order").read_text().split()
    except OSError:
        order = []
    names += [n.removesuffix(".o") + ".ko" if n.endswith(".o") else n for n in order]
    return [n for n in names if (out / n).is_file()]


@dataclass(frozen=True)
class ConfigStamp:
    """What produced a build folder's .config: the config key (base + fragments), the tree's
    Kconfig files and the toolchain. The config step (make defconfig, the fragments,
    olddefconfig: seconds of make) is skipped when the stamp matches and .config is the one it
    describes, which is every rebuild of a bisect or mutate step that left Kconfig alone."""
    key: str

    def is_current(self, out: Path) -> bool:
        """The stamp beside out/.config has this key and the .config's SHA256 it recorded."""
        try:
            recorded = json.loads((out / CONFIG_STAMP).read_text())
            config = (out / ".config").read_bytes()
        except (OSError, ValueError):
            return False
        return isinstance(recorded, dict) and recorded.get("key") == self.key and \
            recorded.get("config_sha256") == hashlib.sha256(config).hexdigest()

    def write(self, out: Path) -> None:
        sha = hashlib.sha256((out / ".config").read_bytes()).hexdigest()
        cache.write_atomic(out / CONFIG_STAMP,
                           json.dumps({"key": self.key, "config_sha256": sha}).encode())


def check_arch(spec: KernelSpec, config_text: str) -> None:
    """Refuse a configured .config of another arch than the kernel's (its Arch.kconfig unset):
    a cross build's wrong tree, base or fragment, caught before the long make. (A native
    make configures for the host's arch whatever it is given.)"""
    want = arches.get(spec.arch).kconfig
    if kconfig.values(config_text).get(want) != "y":
        raise BuildError(f"kernels.{spec.name}: the configured .config is not an "
                         f"{spec.arch} one (CONFIG_{want} is not set)")


def _toolchain(a: arches.Arch) -> str:
    """The compiler and linker versions: Kconfig records them (CC_VERSION_TEXT) and tests
    their features, so a new toolchain must reconfigure."""
    prefix = arches.compiler(a).removesuffix("gcc")
    out = []
    for tool in (f"{prefix}gcc", f"{prefix}ld"):
        try:
            p = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30)
            out.append(p.stdout.partition("\n")[0])
        except (OSError, subprocess.TimeoutExpired):
            out.append(f"{tool}: absent")
    return "\n".join(out)


class Builder:
    """Builds the `build` kernels of one lab configuration."""

    def __init__(self, cache_root: Path, mirror_for: Callable[[], Mirror],
                 debian_config: Callable[[str], Path | None], jobs: int | None = None,
                 ccache: bool = True, usage: cache.Usage | None = None,
                 busybox_suite: str = "trixie") -> None:
        # ccache=False: compile for real (CCACHE_DISABLE), for build-time benchmarks.
        self.cache_root = cache_root
        self.ccache = ccache
        self.mirror_for = mirror_for
        self.debian_config = debian_config  # kernel name -> that Debian kernel's .config
        self.jobs = jobs or os.cpu_count() or 1
        self.usage = usage or cache.Usage(cache_root)  # the tree and build folder, held
        self.busybox_suite = busybox_suite  # where a foreign arch's initramfs busybox comes from

    # --- what to build -------------------------------------------------------------------

    def tree(self, spec: KernelSpec, src: BuildKernel) -> Path:
        if isinstance(src.tree, DebianSource):
            return trees.debian_tree(src.tree, self.cache_root, self.mirror_for)
        trees.check(src.tree, f"kernels.{spec.name}.build.tree")
        return src.tree

    def base_config(self, spec: KernelSpec, src: BuildKernel) -> tuple[str, str | None]:
        """(identity for the cache key, .config text or None for a make target)."""
        if src.base.startswith("debian:"):
            name = src.base.removeprefix("debian:")
            path = self.debian_config(name)
            if path is None:
                raise BuildError(f"kernels.{spec.name}.build.config.base: kernel {name} has "
                                 "no config file")
            text = path.read_text()
            return f"debian:{_digest(text)}", text
        if src.base in ("defconfig", "tinyconfig", "allnoconfig"):
            return src.base, None
        text = Path(src.base).read_text()
        return f"file:{_digest(text)}", text

    def fragments(self, src: BuildKernel) -> list[kconfig.Option]:
        return [o for f in src.fragments for o in kconfig.read_fragment(f)]

    def keys(self, spec: KernelSpec, src: BuildKernel) -> tuple[str, str]:
        """(config key, series key) of a build: what its caches are keyed by, with the tree."""
        base_id, _ = self.base_config(spec, src)
        # The arch joins the key only if it is named in keys: x86 keys stay as they were.
        arch = (f"arch={spec.arch}",) if arches.get(spec.arch).named_in_keys else ()
        config_key = _digest(base_id, *(o.line for o in self.fragments(src)), *arch,
                             str(RECIPE))
        series_key = series.fingerprint(src.series) if src.series else "none"
        if src.profiled:  # the coverage variant: the same tree, other Makefiles
            series_key = _digest(series_key, "gcov", *src.profiled)
        if src.kcsan_only:  # the race variant: KCSAN on these files only
            series_key = _digest(series_key, "kcsan", *src.kcsan_only)
        return config_key, series_key

    def work_dir(self, tree: Path, src: BuildKernel, config_key: str, series_key: str) -> Path:
        """The build's folder: the O= output, the log, the patched copy. Kept per source,
        series and config, so the next build of the same kernel is incremental."""
        return cache.Layout(self.cache_root).build(
            _digest(str(tree), series_key if _copied(src) else "", config_key))

    # --- the build -----------------------------------------------------------------------

    def prepare(self, spec: KernelSpec, src: BuildKernel) -> tuple[BootableKernel, BuildReport]:
        """The built kernel for `spec`, from the cache if nothing changed."""
        start = time.monotonic()
        report = BuildReport(spec.name)
        host.require(host.BUILD_TOOLS + host.cross_build_tools(arches.get(spec.arch)))
        host.require_headers(host.BUILD_HEADERS)
        tree = self.tree(spec, src)
        _, base_text = self.base_config(spec, src)
        options = self.fragments(src)
        config_key, series_key = self.keys(spec, src)
        state = trees.fingerprint(tree) if not isinstance(src.tree, DebianSource) else \
            f"deb-{tree.parent.name}"
        entry_key = _digest(state, series_key, config_key)
        entry = cache.Layout(self.cache_root).kernel(f"build-{entry_key}")
        if (k := kernel.load_prepared(entry)) is not None:
            if k.build_dir is None or \
                    not self._drop_changed(k.build_dir, outputs(k.build_dir, spec.arch)) \
                    and not _made_again(k, spec.arch):
                log.debug("kernel %s: built before, cached in %s", spec.name, entry)
                report.cached, report.release = True, k.release
                report.seconds = time.monotonic() - start
                return kernel.with_name(k, spec), report
            # Test modules build against that folder: make remakes what changed, and the
            # kernel is stored again from it.
            cache.discard(entry)
        work = self.work_dir(tree, src, config_key, series_key)
        self.usage.use(tree)
        self.usage.use(work)
        source = self._source(tree, src, work)
        report.source, report.out, report.log = source, work / "out", work / "build.log"
        self._drop_changed(work / "out", [])
        (work / "out" / cache.MANIFEST).unlink(missing_ok=True)  # recorded again after make
        make_start = time.monotonic()
        self._configure(spec, source, work / "out", base_text, src.base, options, report,
                        config_key)
        if not arches.is_native(arches.get(spec.arch)):
            # Checked before the long make: a wrong tree or fragment shows in seconds.
            check_arch(spec, (work / "out" / ".config").read_text())
        self._make(spec, src, source, work / "out", report)
        cache.record(work / "out", outputs(work / "out", spec.arch))
        report.make_seconds = time.monotonic() - make_start
        k = self._store(spec, src, tree, source, work / "out", entry, report)
        report.release = k.release
        report.seconds = time.monotonic() - start
        return kernel.with_name(k, spec), report

    @staticmethod
    def _drop_changed(out: Path, files: list[str]) -> bool:
        """Whether an output of build folder `out` changed since the make that recorded it (a
        flipped block in bzImage, a truncated vmlinux). Those are removed, with the record, so
        that make makes them again: make itself trusts any target newer than its sources.
        `files`: what a folder built before manifests is recorded with now."""
        found = cache.changes(out, files)
        for c in found:
            (out / c.path).unlink(missing_ok=True)
        if found:
            (out / cache.MANIFEST).unlink(missing_ok=True)
        return bool(found)

    def _source(self, tree: Path, src: BuildKernel, work: Path) -> Path:
        """The tree make builds: the tree itself, or a patched hard-link copy of it."""
        if not _copied(src):
            return tree
        patches = [p for s in src.series for p in series.read(s)]
        what = f"applying {len(patches)} patch(es) to" if patches else \
            "profiling with gcov" if src.profiled else "scoping KCSAN in"
        with progress.step(f"{what} a copy of {tree}"):
            current, fresh = work / "src", work / "src.new"
            trees.link_farm(tree, fresh)
            try:
                applied = series.apply(src.series, fresh) if src.series else []
                touched = sorted({m.group(1) for p in applied
                                  for m in re.finditer(r"^diff --git a/\S+ b/(\S+)", p.text,
                                                       re.M)})
                touched += gcov.profile(fresh, src.profiled)
                touched += kcsan.instrument(fresh, src.kcsan_only)
            except BaseException:
                shutil.rmtree(fresh, ignore_errors=True)
                raise
            if current.exists():
                trees.keep_mtimes(touched, fresh, current)
                shutil.rmtree(current)
            fresh.rename(current)
        return current

    def _run_make(self, source: Path, out: Path, args: list[str], logf, what: str,
                  status: Callable[[str], None] | None = None,
                  report: BuildReport | None = None,
                  arch: str = arches.DEFAULT) -> None:
        a = arches.get(arch)
        cmd = ["make", "-C", str(source), f"O={out}", f"-j{self.jobs}", *arches.make_vars(a),
               *args]
        env = {**os.environ, "LANG": "C"}
        if shutil.which("ccache"):
            # The same CC either way: kbuild rebuilds every object whose command line changed.
            cmd.append(f"CC=ccache {arches.compiler(a)}")
            if not self.ccache:
                env["CCACHE_DISABLE"] = "1"
        log.debug("run: %s", " ".join(cmd))
        logf.write(f"\n$ {' '.join(cmd)}\n")
        logf.flush()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", env=env)
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                logf.write(line)
                if (m := _COMPILED.match(line)) and report is not None:
                    report.compiled += 1
                    if status is not None:
                        status(f"{report.compiled} steps, {m.group('target')}")
            code = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        logf.flush()
        if code in (-signal.SIGINT, -signal.SIGTERM):   # Ctrl-C reached make first: ours
            raise KeyboardInterrupt
        if code != 0:
            try:
                text = Path(logf.name).read_text(errors="replace")
            except OSError:     # removed under us: the error is make's exit, not the log
                text = f"make exited {code}; its log {logf.name} is gone"
            raise BuildError(f"{what} failed: {first_error(text)}", hint=f"full log: {logf.name}")

    def _configure(self, spec: KernelSpec, source: Path, out: Path, base_text: str | None,
                   base: str, options: list[kconfig.Option], report: BuildReport,
                   config_key: str) -> None:
        files = kconfig.scan(source)
        unknown = kconfig.unknown(options, set(files.symbols))
        if unknown:
            raise BuildError(f"kernels.{spec.name}: config fragment options name no Kconfig "
                             "symbol of this tree: " + ", ".join(
                                 f"CONFIG_{o.symbol} ({o.source})" for o in unknown),
                             hint="a typo, or an option this kernel version does not have")
        out.mkdir(parents=True, exist_ok=True)
        assert report.log is not None
        stamp = ConfigStamp(_digest(config_key, files.digest,
                                    _toolchain(arches.get(spec.arch))))
        if stamp.is_current(out):
            log.info("kernel %s: config unchanged (%s): make %s, fragments and olddefconfig "
                     "skipped", spec.name, stamp.key, base)
            report.log.write_text("config step skipped: the config key matches "
                                  f"{out / CONFIG_STAMP}\n")
            report.dropped = [str(d) for d in kconfig.dropped(
                options, kconfig.values((out / ".config").read_text()))]
            return
        with report.log.open("w") as logf, progress.step(f"configuring {spec.name}"):
            scratch = out.parent / "config.new"
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir()
            if base_text is None:
                self._run_make(source, scratch, [base], logf, f"make {base}", arch=spec.arch)
                base_text = (scratch / ".config").read_text()
            self._warn_redefinitions(spec, base, base_text, options, logf)
            (scratch / ".config").write_text(kconfig.merge(base_text, options))
            self._run_make(source, scratch, ["olddefconfig"], logf, "make olddefconfig",
                           arch=spec.arch)
            final = (scratch / ".config").read_text()
            # Replace the build's .config only if it changed: an unchanged config must not
            # make the next build look stale to make.
            if not (out / ".config").exists() or (out / ".config").read_text() != final:
                cache.write_atomic(out / ".config", final.encode())
            stamp.write(out)
            shutil.rmtree(scratch, ignore_errors=True)
        report.dropped = [str(d) for d in kconfig.dropped(options, kconfig.values(final))]
        for d in report.dropped:
            log.warning("kernel %s: config option did not survive olddefconfig: %s",
                        spec.name, d)

    @staticmethod
    def _warn_redefinitions(spec: KernelSpec, base: str, base_text: str,
                            options: list[kconfig.Option], logf: IO[str] | None = None) -> None:
        """merge_config.sh's warning: a fragment changing what an earlier fragment or the
        user's own base file set is most often a mistake in one of them. Changing what `make
        tinyconfig`/`defconfig` generated is what a fragment is for: those go to build.log,
        with one line on the screen, so a real redefinition is not lost among 30 of them."""
        generated = base in ("defconfig", "tinyconfig", "allnoconfig")
        label = base if generated else f"base config {base}"
        overrides = 0
        for r in kconfig.redefinitions(kconfig.parse(base_text, label), options):
            if generated and r.previous.source.startswith(f"{label}:"):
                overrides += 1
                if logf is not None:
                    logf.write(f"fragment sets: {r}\n")
            else:
                log.warning("kernel %s: %s", spec.name, r)
        if overrides:
            log.info("kernel %s: the fragments change %d values of %s (listed in build.log)",
                     spec.name, overrides, base)

    def _make(self, spec: KernelSpec, src: BuildKernel, source: Path, out: Path,
              report: BuildReport) -> None:
        modules = kconfig.values((out / ".config").read_text()).get("MODULES") == "y"
        targets = [Path(arches.get(spec.arch).image).name] + (["modules"] if modules else [])
        assert report.log is not None
        with report.log.open("a") as logf, progress.step(
                f"building {spec.name} ({' '.join(targets)}, {self.jobs} jobs, log "
                f"{report.log})") as status:
            self._run_make(source, out, targets + make_vars(src), logf,
                           f"building kernel {spec.name}", status, report, arch=spec.arch)

    def _store(self, spec: KernelSpec, src: BuildKernel, tree: Path, source: Path, out: Path,
               entry: Path, report: BuildReport) -> BootableKernel:
        release = (out / "include/config/kernel.release").read_text().strip()
        config = kconfig.values((out / ".config").read_text())
        with cache.building(entry) as scratch:
            base = None
            if config.get("MODULES") == "y":
                base = scratch / "staging"
                assert report.log is not None
                with report.log.open("a") as logf:
                    self._run_make(source, out, ["modules_install", f"INSTALL_MOD_PATH={base}",
                                                 "INSTALL_MOD_STRIP=1", "DEPMOD=true"], logf,
                                   "make modules_install", arch=spec.arch)
            desc = f"built from {tree}" + (f" + {len(src.series)} series" if src.series else "") \
                + f" ({src.base}" + "".join(f" + {f.name}" for f in src.fragments) + ")"
            a = arches.get(spec.arch)
            busybox = None if arches.is_native(a) else kernel.foreign_busybox(
                self.mirror_for(), self.busybox_suite, a.debian, self.cache_root)
            meta = kernel.finish(scratch, spec.name, release, out / a.image, base,
                                 out / ".config", desc, spec.cmdline, arch=spec.arch,
                                 busybox=busybox)
            meta["build"] = {"tree": str(tree), "source": str(source), "out": str(out),
                             "series": [str(s) for s in src.series], "base": src.base,
                             "fragments": [str(f) for f in src.fragments],
                             "dropped": report.dropped,
                             "commit": trees.git(tree, "rev-parse", "HEAD", check=False)
                             if trees.is_git(tree) else None}
            if base is not None:
                shutil.rmtree(base)
            kernel.write_entry(scratch, meta)
        k = kernel.load_prepared(entry)
        assert k is not None
        return k


def _made_again(k: BootableKernel, arch: str) -> bool:
    """Whether the build folder holds another kernel than the one stored from it: a mutant
    (./lab mutate builds each in the same folder, then reverts its source) or a bisect step
    made it again since. Its vmlinux would then decode another kernel's lines (a mutant's
    moved WARN line decoded the unmutated kernel's splats, races round 5) and test modules
    would build against it; make again, which recompiles what was reverted."""
    assert k.build_dir is not None
    built = k.build_dir / arches.get(arch).image
    return not built.exists() or not filecmp.cmp(built, k.vmlinuz, shallow=False)
