"""lab.yaml: load, validate and turn into typed records.

Every mistake is reported as one ConfigError naming the file, the key (dotted path) and what
was expected; unknown keys are rejected so a typo never silently falls back to a default.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from collections.abc import Callable, Set as AbstractSet

import yaml

from harness import arch as arches
from harness.errors import ConfigError
from harness.probe_modules import explore_paths, probe_module

ACCELS = ("auto", "kvm", "tcg")
TCG_THREADS = ("auto", "single", "multi")
ROOTFS_VARIANTS = ("minbase", "essential", "apt", "required", "important", "standard")
# Debian suite and flavour names: letters, digits, dash, dot, plus.
_DEBIAN_NAME = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")
_DEBIAN_VERSION = re.compile(r"^[0-9][\w.+~:-]*$")


@dataclass(frozen=True)
class DebianKernel:
    """A kernel from a Debian package: linux-image-<flavour> of <suite>, from the Packages
    index of Debian architecture `arch` (the kernel's arch's: amd64, arm64)."""
    suite: str
    flavour: str
    arch: str = arches.get(arches.DEFAULT).debian
    version: str | None = None  # a Debian (7.2.12-1~bpo13+1) or upstream (7.2.12) version


@dataclass(frozen=True)
class PathKernel:
    """A kernel image already on disk, with an optional modules directory; or a `make O=`
    folder (`build_dir`) whose image, modules, vmlinux and headers the lab uses as they are."""
    image: Path
    modules: Path | None = None
    build_dir: Path | None = None


# The bases a build's config can start from: a make target of the kernel tree (the fragments
# then go on top), a .config file, or `debian:<kernel>` (that Debian kernel's own config).
CONFIG_TARGETS = ("defconfig", "tinyconfig", "allnoconfig")


@dataclass(frozen=True)
class DebianSource:
    """A kernel source package of a Debian suite (linux-source-<x.y>): its tarball is the tree."""
    suite: str
    package: str
    version: str | None = None  # default: the newest in the suite


@dataclass(frozen=True)
class BuildKernel:
    """A kernel the lab builds: a tree (a directory, or a Debian source package), an optional
    patch series applied to a throw-away copy, and a config: a base plus fragments in order."""
    tree: Path | DebianSource
    series: tuple[Path, ...] = ()
    base: str = "defconfig"  # a CONFIG_TARGETS name, a .config path, or debian:<kernel name>
    fragments: tuple[Path, ...] = ()
    # Source files (tree-relative .c paths) compiled with gcov profiling: the coverage variant
    # of a build kernel (harness/kernels/gcov.py). Empty: no file is profiled.
    profiled: tuple[str, ...] = ()
    # With CONFIG_KCSAN: the only files KCSAN instruments (harness/kernels/kcsan.py). Empty:
    # KCSAN's own default, every object.
    kcsan_only: tuple[str, ...] = ()

    def with_series(self, extra: Path) -> BuildKernel:
        return replace(self, series=self.series + (extra,))

    def with_tree(self, tree: Path) -> BuildKernel:
        return replace(self, tree=tree)


@dataclass(frozen=True)
class KernelSpec:
    name: str
    source: DebianKernel | PathKernel | BuildKernel
    cmdline: str = ""
    arch: str = arches.DEFAULT  # a harness.arch name: x86_64, arm64


@dataclass(frozen=True)
class RootfsSpec:
    suite: str = "trixie"
    variant: str = "minbase"
    packages: tuple[str, ...] = ()


@dataclass(frozen=True)
class MachineSpec:
    cpus: int = 1
    memory_mb: int = 1024
    accel: str = "auto"
    tcg_threads: str = "auto"
    boot_timeout_s: float = 120.0
    cmdline: str = ""
    # Console bytes kept per boot in the console log: the first part, then the tail (a guest
    # flooding its console must not fill the disk, and its last words are what matter).
    console_log_mb: int = 16


@dataclass(frozen=True)
class MirrorSpec:
    """An explicit mirror; None in LabConfig means: read it from the host's apt configuration."""
    url: str
    keyring: Path | None = None


@dataclass(frozen=True)
class NightlyKernel:
    """A kernel of the nightly matrix: a lab.yaml kernel name and, for a `build` kernel whose
    tree is a git checkout, a branch fetched from `remote` before each cell builds it."""
    name: str
    branch: str | None = None
    remote: str = "origin"
    # This kernel's own `./lab explore` after its suite, in place of nightly.explore (the race
    # kernel's cell: actors and loads).
    explore: NightlyExplore | None = None


@dataclass(frozen=True)
class NightlyVariant:
    """A config variant of the build kernels: the fragments that replace the kernel's own."""
    name: str
    fragments: tuple[Path, ...]


@dataclass(frozen=True)
class NightlyProfile:
    """A guest profile: machine values that differ from lab.yaml's `machine` for a cell."""
    name: str
    cpus: int | None = None
    memory_mb: int | None = None


@dataclass(frozen=True)
class NightlySelection:
    """A test selection: a pytest -k expression (None: the whole suite)."""
    name: str
    expr: str | None = None


@dataclass(frozen=True)
class NightlyExplore:
    """`./lab explore` in every cell after its suite: a budget per path, the paths (empty:
    every one the kernel has). The night's date is the seed, so each night tries new
    sequences; a new confirmed failure fails the cell, with its reproducers in the cell's
    report."""
    budget_s: float
    paths: tuple[str, ...] = ()
    actors: int = 1                 # ./lab explore --actors
    load: str = ""                  # ./lab explore --load


@dataclass(frozen=True)
class NightlySpec:
    """`./lab nightly`'s matrix: kernels x config variants (build kernels only) x guest
    profiles x test selections, and how each cell is run."""
    kernels: tuple[NightlyKernel, ...]
    variants: tuple[NightlyVariant, ...] = ()
    profiles: tuple[NightlyProfile, ...] = (NightlyProfile("default"),)
    selections: tuple[NightlySelection, ...] = (NightlySelection("all"),)
    refresh: bool = True            # look for a newer Debian kernel package in every cell
    history: Path | None = None     # default: <reports.dir>/history
    # With --scheduler: how long the cluster may have no worker at all before the cells still
    # pending are reported as not run (Dask itself would wait for a worker forever).
    no_worker_timeout_s: int = 600
    explore: NightlyExplore | None = None
    selftests: bool = False         # each cell runs the kernel's own selftests too


@dataclass(frozen=True)
class LabConfig:
    path: Path
    kernels: dict[str, KernelSpec]
    default_kernel: str
    rootfs: RootfsSpec = field(default_factory=RootfsSpec)
    machine: MachineSpec = field(default_factory=MachineSpec)
    mirror: MirrorSpec | None = None
    reports_dir: Path = Path("reports")
    cache_dir: Path | None = None
    nightly: NightlySpec | None = None

    def kernel(self, name: str | None, modules: str | None = None) -> KernelSpec:
        """The kernel called `name` (the default one for None), or one named on the command
        line (`debian:SUITE/FLAVOUR[=VERSION]`, an image with its `modules`, a make O= folder,
        a source tree: `command_line_kernel`), or a ConfigError listing them. Called once,
        where a command line is read: the spec then travels (harness/runs/request.py)."""
        name = name or self.default_kernel
        if name in self.kernels and not modules:
            return self.kernels[name]
        spec = command_line_kernel(name, self.path.parent / "kernels" / "fragments", modules)
        if spec is None:
            raise ConfigError(
                f"unknown kernel {name!r}; {self.path} defines: {', '.join(sorted(self.kernels))}"
                "; or give debian:SUITE/FLAVOUR[=VERSION], a kernel image, a make O= folder "
                "or a kernel source tree")
        return spec

    def build_kernel_names(self) -> list[str]:
        """The names of the `build` kernels (for an error that lists them)."""
        return [n for n, s in self.kernels.items() if isinstance(s.source, BuildKernel)]

    def with_kernel(self, spec: KernelSpec) -> LabConfig:
        """This config with `spec` among its kernels under its own name: a look-up by that
        name then finds the resolved spec instead of resolving it again."""
        return replace(self, kernels={**self.kernels, spec.name: spec})


MODULES_SUFFIX = "?modules="  # the name of `--kernel IMAGE --modules DIR`: IMAGE?modules=DIR
_COMMAND_LINE_DEBIAN = re.compile(r"^debian:(?P<suite>[a-z0-9][a-z0-9.+-]*)/"
                                  r"(?P<flavour>[a-z0-9][a-z0-9.+-]*)(?:=(?P<version>[0-9][\w.+~:-]*))?$")


def command_line_kernel(arg: str, fragments_dir: Path,
                        modules_arg: str | None = None) -> KernelSpec | None:
    """A kernel named on the command line rather than in lab.yaml, the spec's name being `arg`
    itself (a path made absolute), so a child run given that name finds the same kernel:

    - `debian:SUITE/FLAVOUR[=VERSION]`: that Debian kernel (the arch from the flavour);
    - a kernel image file (bzImage, vmlinuz, arm64 Image), with the modules given (their
      folder is interpreted, or found beside the image, by harness/kernels/kernel.py);
    - a `make O=` folder (or a tree built in place): its image, modules, vmlinux and headers;
    - a kernel source tree with nothing built: built by the lab with ringbuf.config.

    None if `arg` is none of these (then it was meant as a lab.yaml name)."""
    if arg.startswith("debian:"):
        m = _COMMAND_LINE_DEBIAN.match(arg)
        if not m:
            raise ConfigError(f"--kernel {arg}: expected debian:SUITE/FLAVOUR[=VERSION], such as "
                              "debian:sid/cloud-amd64 or debian:trixie-backports/cloud-amd64=7.2.12")
        flavour = m.group("flavour")
        arch = _flavour_arch(flavour) or arches.DEFAULT
        return KernelSpec(name=arg, arch=arch, source=DebianKernel(
            suite=m.group("suite"), flavour=flavour, arch=arches.get(arch).debian,
            version=m.group("version")))
    image_arg = arg
    path = Path(os.path.expanduser(image_arg))
    if not path.exists():
        if "/" in image_arg or modules_arg:
            raise ConfigError(f"--kernel {image_arg}: no such file or folder")
        return None
    path = path.resolve()
    modules = Path(os.path.expanduser(modules_arg)).resolve() if modules_arg else None
    if modules is not None and not modules.is_dir():
        raise ConfigError(f"--modules {modules_arg}: no such folder")
    name = str(path) + (f"{MODULES_SUFFIX}{modules}" if modules else "")
    if path.is_file():
        a = arches.of_image(path)
        if a is None:
            raise ConfigError(f"--kernel {path}: not a kernel image the lab can boot (neither an "
                              "x86 bzImage nor an uncompressed arm64 Image)")
        return KernelSpec(name=name, arch=a.name, source=PathKernel(
            image=path, modules=modules))  # or found beside it: kernel.modules_of()
    if modules is not None:
        raise ConfigError(f"--modules goes with a kernel image, not with the folder {path}")
    built = [(a, path / a.image) for a in arches.ARCHES.values() if (path / a.image).is_file()]
    if built and (path / ".config").is_file():
        a, image = built[0]
        return KernelSpec(name=name, arch=a.name,
                          source=PathKernel(image=image, build_dir=path))
    if (path / "Kconfig").is_file() and (path / "Makefile").is_file():
        return KernelSpec(name=name, source=BuildKernel(
            tree=path, base="defconfig", fragments=(fragments_dir / "ringbuf.config",)))
    raise ConfigError(f"--kernel {path}: a folder, but neither a built kernel (a .config and "
                      f"{' or '.join(a.image for a in arches.ARCHES.values())}) nor a kernel "
                      "source tree (Kconfig and Makefile)")


def file_safe(name: str) -> str:
    """A kernel name fit for a file or folder name (a command-line kernel is a path)."""
    return re.sub(r"[^A-Za-z0-9_.+=-]+", "-", name.replace(MODULES_SUFFIX, "+modules-")).strip("-") \
        or "kernel"


def with_build(cfg: LabConfig, name: str, series: tuple[Path, ...] = (),
               tree: Path | None = None) -> LabConfig:
    """`cfg` with the build kernel `name` varied (`varied`): what a Lab of a review's or a
    bisect step's build is made from."""
    return cfg.with_kernel(varied(cfg.kernel(name), series, tree, cfg.path))


def varied(spec: KernelSpec, series: tuple[Path, ...] = (), tree: Path | None = None,
           where: Path | None = None) -> KernelSpec:
    """A build kernel with more patches and/or another tree (what `./lab review` and
    `./lab bisect` run: the user's kernel, varied)."""
    if not isinstance(spec.source, BuildKernel):
        raise ConfigError(f"{where or 'lab.yaml'}: kernels.{spec.name}: not a `build` kernel (a "
                          "tree + series + config), so the lab cannot patch or bisect it")
    src = spec.source
    for extra in series:
        if not extra.exists():
            raise ConfigError(f"series {extra} does not exist")
        src = src.with_series(extra)
    if tree is not None:
        src = src.with_tree(tree)
    return replace(spec, source=src)


class YamlReader:
    """Walks the parsed YAML, checking types and rejecting unknown keys, with dotted key paths."""

    def __init__(self, path: Path) -> None:
        self.file = path

    def fail(self, key: str, expected: str, value: Any = None, got: bool = True) -> ConfigError:
        shown = f", got {value!r}" if got else ""
        return ConfigError(f"{self.file}: {key}: expected {expected}{shown}")

    def mapping(self, value: Any, key: str, allowed: set[str],
                required: AbstractSet[str] = frozenset()) -> dict[str, Any]:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise self.fail(key or "top level", "a mapping of keys", value)
        for k in value:
            if not isinstance(k, str) or k not in allowed:
                where = f"{key}.{k}" if key else str(k)
                raise ConfigError(f"{self.file}: {where}: unknown key; expected one of: "
                                  f"{', '.join(sorted(allowed))}")
        for k in sorted(required):
            if k not in value:
                raise self.fail(f"{key}.{k}" if key else k, "this key to be set", got=False)
        return value

    def string(self, value: Any, key: str, pattern: re.Pattern[str] | None = None,
               what: str = "a string") -> str:
        if not isinstance(value, str) or not value or (pattern and not pattern.match(value)):
            raise self.fail(key, what, value)
        return value

    def cmdline(self, value: Any, key: str) -> str:
        """Kernel command-line words; may be empty."""
        if value is None:
            return ""
        if not isinstance(value, str) or "\n" in value:
            raise self.fail(key, "kernel command-line words on one line", value)
        return value.strip()

    def choice(self, value: Any, key: str, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.fail(key, "one of " + ", ".join(choices), value)
        return value

    def integer(self, value: Any, key: str, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise self.fail(key, f"an integer from {lo} to {hi}", value)
        return value

    def number(self, value: Any, key: str, lo: float, hi: float) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
            raise self.fail(key, f"a number from {lo:g} to {hi:g}", value)
        return float(value)

    def path(self, value: Any, key: str, must_exist: bool = True) -> Path:
        text = self.string(value, key, what="a path")
        p = Path(os.path.expanduser(text))
        if not p.is_absolute():
            p = (self.file.parent / p).resolve()
        if must_exist and not p.exists():
            raise ConfigError(f"{self.file}: {key}: {p} does not exist")
        return p

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, "true or false", value)
        return value

    def optional(self, data: dict[str, Any], name: str, key: str,
                 convert: Callable[[Any, str], Any], default: Any) -> Any:
        return convert(data[name], f"{key}.{name}") if name in data else default


def _flavour_arch(flavour: str) -> str | None:
    """The lab arch a Debian kernel flavour is for, when one of its words is a Debian
    architecture the lab knows (cloud-amd64, rt-arm64, arm64-16k); None otherwise."""
    found = {a.name for w in flavour.split("-") if (a := arches.from_debian(w)) is not None}
    return found.pop() if len(found) == 1 else None


def _kernel(r: YamlReader, name: str, value: Any) -> KernelSpec:
    key = f"kernels.{name}"
    data = r.mapping(value, key, {"debian", "path", "build", "cmdline", "arch"})
    sources = [s for s in ("debian", "path", "build") if s in data]
    if len(sources) != 1:
        raise r.fail(key, "exactly one kernel source: debian, path or build", sorted(data))
    cmdline = r.optional(data, "cmdline", key, r.cmdline, "")
    arch = r.optional(data, "arch", key, lambda v, k: r.choice(v, k, tuple(arches.ARCHES)),
                      arches.DEFAULT)
    kind = sources[0]
    if kind == "build":  # another arch than the host's is cross-built (harness/arch.py)
        return KernelSpec(name=name, source=_build(r, f"{key}.build", data["build"]),
                          cmdline=cmdline, arch=arch)
    if kind == "debian":
        d = r.mapping(data["debian"], f"{key}.debian", {"suite", "flavour", "version"},
                      {"suite", "flavour"})
        flavour = r.string(d["flavour"], f"{key}.debian.flavour", _DEBIAN_NAME,
                           "a kernel flavour such as cloud-amd64")
        # A flavour of another arch would be looked for in the wrong Packages index: say so
        # here rather than as "no package linux-image-arm64 in trixie" after a download.
        if (meant := _flavour_arch(flavour)) is not None and meant != arch:
            raise r.fail(f"{key}.debian.flavour", f"a flavour of arch {arch} (this one is for "
                         f"{meant}: set {key}.arch: {meant})", flavour)
        source: DebianKernel | PathKernel = DebianKernel(
            suite=r.string(d["suite"], f"{key}.debian.suite", _DEBIAN_NAME, "a Debian suite name"),
            flavour=flavour, arch=arches.get(arch).debian,
            version=r.optional(d, "version", f"{key}.debian",
                               lambda v, k: r.string(str(v), k, _DEBIAN_VERSION,
                                                     "a Debian version"), None))
    else:
        if not arches.get(arch).release_in_header:
            raise r.fail(f"{key}.arch", "an arch whose image header carries the release for a "
                         "`path` kernel (" + ", ".join(a.name for a in arches.ARCHES.values()
                                                       if a.release_in_header) + ")", arch)
        p = r.mapping(data["path"], f"{key}.path", {"image", "modules"}, {"image"})
        source = PathKernel(
            image=r.path(p["image"], f"{key}.path.image"),
            modules=r.optional(p, "modules", f"{key}.path", r.path, None))
    return KernelSpec(name=name, source=source, cmdline=cmdline, arch=arch)


def _build(r: YamlReader, key: str, value: Any) -> BuildKernel:
    b = r.mapping(value, key, {"tree", "debian_source", "series", "config", "kcsan_only"})
    trees = [t for t in ("tree", "debian_source") if t in b]
    if len(trees) != 1:
        raise r.fail(key, "exactly one of: tree (a kernel source directory), debian_source "
                     "(a Debian source package)", sorted(b))
    tree: Path | DebianSource
    if "tree" in b:
        tree = r.path(b["tree"], f"{key}.tree")
        if not tree.is_dir():
            raise ConfigError(f"{r.file}: {key}.tree: {tree} is not a directory")
    else:
        d = r.mapping(b["debian_source"], f"{key}.debian_source", {"suite", "package", "version"},
                      {"suite", "package"})
        tree = DebianSource(
            suite=r.string(d["suite"], f"{key}.debian_source.suite", _DEBIAN_NAME,
                           "a Debian suite name"),
            package=r.string(d["package"], f"{key}.debian_source.package",
                             re.compile(r"^linux-source-[0-9.]+$"), "linux-source-<x.y>"),
            version=r.optional(d, "version", f"{key}.debian_source",
                               lambda v, k: r.string(v, k, _DEBIAN_VERSION,
                                                     "a Debian version"), None))
    series = b.get("series", [])
    series = [series] if isinstance(series, str) else series
    if not isinstance(series, list):
        raise r.fail(f"{key}.series", "a path or a list of paths (patch folders, series files, "
                     "mboxes)", series)
    c = r.mapping(b.get("config"), f"{key}.config", {"base", "fragments"})
    base = r.optional(c, "base", f"{key}.config", r.string, "defconfig")
    if base not in CONFIG_TARGETS and not base.startswith("debian:"):
        base = str(r.path(base, f"{key}.config.base"))
    fragments = c.get("fragments", [])
    if not isinstance(fragments, list):
        raise r.fail(f"{key}.config.fragments", "a list of config fragment files", fragments)
    kcsan_only = b.get("kcsan_only", [])
    if not isinstance(kcsan_only, list):
        raise r.fail(f"{key}.kcsan_only", "a list of tree-relative .c files", kcsan_only)
    return BuildKernel(
        tree=tree,
        series=tuple(r.path(s, f"{key}.series[{i}]") for i, s in enumerate(series)),
        base=base,
        fragments=tuple(r.path(f, f"{key}.config.fragments[{i}]")
                        for i, f in enumerate(fragments)),
        kcsan_only=tuple(r.string(f, f"{key}.kcsan_only[{i}]", _TREE_C_FILE,
                                  "a tree-relative .c file") for i, f in enumerate(kcsan_only)))


_LOADS = re.compile(r"^[a-z]+(?:@\d+)?(?:,[a-z]+(?:@\d+)?)*$")
_TREE_C_FILE = re.compile(r"^(?!/)(?!.*(^|/)\.\.(/|$))[A-Za-z0-9_./-]+\.c$")
_NIGHTLY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
_GIT_REF = re.compile(r"^(?!-)(?!.*\.\.)[A-Za-z0-9_./+-]+(?<![./])$")


def _nightly(r: YamlReader, value: Any, kernels: dict[str, KernelSpec]) -> NightlySpec:
    """The `nightly:` section; every kernel it names must be one of `kernels:`. Each part is
    read in the order of the fields, so the first mistake reported stays the same."""
    n = r.mapping(value, "nightly", {"kernels", "variants", "profiles", "selections", "refresh",
                                     "history", "no_worker_timeout_s", "explore", "selftests"},
                  {"kernels"})
    chosen = _nightly_kernels(r, n["kernels"], kernels)
    variants = _nightly_named(r, n, "variants", _nightly_variant)
    if variants and not any(isinstance(kernels[k.name].source, BuildKernel) for k in chosen):
        raise r.fail("nightly.variants", "config variants only with a `build` kernel in "
                     "nightly.kernels (a Debian or path kernel has its own config)",
                     [v.name for v in variants])
    return NightlySpec(
        kernels=chosen, variants=variants,
        profiles=_nightly_named(r, n, "profiles", _nightly_profile) or
        (NightlyProfile("default"),),
        selections=_nightly_named(r, n, "selections", _nightly_selection) or
        (NightlySelection("all"),),
        refresh=r.optional(n, "refresh", "nightly", r.boolean, True),
        history=r.optional(n, "history", "nightly",
                           lambda v, k: r.path(v, k, must_exist=False), None),
        no_worker_timeout_s=r.optional(n, "no_worker_timeout_s", "nightly",
                                       lambda v, k: r.integer(v, k, 10, 86400), 600),
        explore=_nightly_explore(r, n["explore"]) if "explore" in n else None,
        selftests=r.optional(n, "selftests", "nightly", r.boolean, False))


def _nightly_kernels(r: YamlReader, raw: Any, kernels: dict[str, KernelSpec]
                     ) -> tuple[NightlyKernel, ...]:
    """`nightly.kernels`: names of `kernels:` (or {kernel, branch, remote}), each once."""
    if not isinstance(raw, list) or not raw:
        raise r.fail("nightly.kernels", "a list of kernel names of `kernels:` (or {kernel: "
                     "NAME, branch: BRANCH} for a build kernel's git tree)", raw)
    chosen = tuple(_nightly_kernel(r, item, f"nightly.kernels[{i}]", kernels)
                   for i, item in enumerate(raw))
    if len({(k.name, k.branch) for k in chosen}) != len(chosen):
        raise r.fail("nightly.kernels", "each kernel (and branch) once", raw)
    return chosen


def _nightly_kernel(r: YamlReader, item: Any, key: str, kernels: dict[str, KernelSpec]
                    ) -> NightlyKernel:
    """One entry of `nightly.kernels`: a kernel of `kernels:`, a branch only for a build
    kernel whose tree is a folder (only a git tree can fetch one)."""
    if isinstance(item, dict):
        d = r.mapping(item, key, {"kernel", "branch", "remote", "explore"}, {"kernel"})
        name = r.string(d["kernel"], f"{key}.kernel")
        branch = r.optional(d, "branch", key, lambda v, k: r.string(
            v, k, _GIT_REF, "a git branch name"), None)
        remote = r.optional(d, "remote", key, lambda v, k: r.string(
            v, k, _GIT_REF, "a git remote name"), "origin")
    else:
        name, branch, remote = r.string(item, key, what="a kernel name of `kernels:`"), \
            None, "origin"
    key_name = f"{key}.kernel" if isinstance(item, dict) else key
    if name not in kernels:
        raise r.fail(key_name, "one of the kernels: " + ", ".join(kernels), name)
    src = kernels[name].source
    if branch is not None and not (isinstance(src, BuildKernel) and isinstance(src.tree, Path)):
        raise r.fail(f"{key}.branch", f"no branch: kernel {name} is not a `build` kernel "
                     "with a tree folder (only a git tree can fetch a branch)", branch)
    explore = _nightly_explore(r, item["explore"], f"{key}.explore") \
        if isinstance(item, dict) and "explore" in item else None
    return NightlyKernel(name, branch, remote, explore)


def _nightly_named(r: YamlReader, n: dict[str, Any], section: str,
                   convert: Callable[[YamlReader, Any, str], Any]) -> tuple[Any, ...]:
    """A `nightly:` dimension (variants, profiles, selections): names to values, each name
    checked before any value is read; () when the section is absent."""
    items = n.get(section)
    if items is None:
        return ()
    if not isinstance(items, dict) or not items:
        raise r.fail(f"nightly.{section}", "a mapping of names to values", items)
    for name in items:
        r.string(name, f"nightly.{section}.{name}", _NIGHTLY_NAME,
                 "a name of letters, digits, '.', '_', '+' and '-'")
    return tuple(convert(r, v, name) for name, v in items.items())


def _nightly_variant(r: YamlReader, v: Any, name: str) -> NightlyVariant:
    key = f"nightly.variants.{name}"
    if not isinstance(v, list):
        raise r.fail(key, "a list of config fragment files", v)
    return NightlyVariant(name, tuple(r.path(f, f"{key}[{i}]") for i, f in enumerate(v)))


def _nightly_profile(r: YamlReader, v: Any, name: str) -> NightlyProfile:
    key = f"nightly.profiles.{name}"
    p = r.mapping(v, key, {"cpus", "memory_mb"})
    return NightlyProfile(
        name, r.optional(p, "cpus", key, lambda x, k: r.integer(x, k, 1, 64), None),
        r.optional(p, "memory_mb", key, lambda x, k: r.integer(x, k, 256, 65536), None))


def _nightly_selection(r: YamlReader, v: Any, name: str) -> NightlySelection:
    if v is None or v == "":
        return NightlySelection(name, None)
    return NightlySelection(name, r.string(v, f"nightly.selections.{name}",
                                           what="a pytest -k expression (empty: all tests)"))


def _nightly_explore(r: YamlReader, value: Any, key: str = "nightly.explore") -> NightlyExplore:
    e = r.mapping(value, key, {"budget", "paths", "actors", "load"}, {"budget"})
    budget = e["budget"]
    m = re.fullmatch(r"(\d+)(s|m)", str(budget))
    if not m or int(m[1]) == 0:
        raise r.fail(f"{key}.budget", "a time per path like 90s or 2m", budget)
    paths = e.get("paths") or []
    known = explore_paths()
    if not isinstance(paths, list) or any(p not in known for p in paths):
        raise r.fail(f"{key}.paths", "a list of " + ", ".join(known), paths)
    actors = r.optional(e, "actors", key, lambda v, k: r.integer(v, k, 1, 4), 1)
    load = r.optional(e, "load", key, lambda v, k: r.string(
        v, k, _LOADS, "loads of probes/explore_load.py: NAME[@CPU],..."), "")
    loads = probe_module("explore_load")
    if bad := [name for name, _ in loads.split(load) if name not in loads.LOADS]:
        raise r.fail(f"{key}.load", "loads among " + ", ".join(loads.LOADS), bad[0])
    return NightlyExplore(int(m[1]) * (60 if m[2] == "m" else 1), tuple(paths), actors, load)


def parse(data: Any, path: Path) -> LabConfig:
    """Validate parsed YAML into a LabConfig; raise ConfigError on the first mistake (the
    sections are read in the order of the fields, so which one is first does not change)."""
    r = YamlReader(path)
    top = r.mapping(data, "", {"default_kernel", "kernels", "rootfs", "machine", "mirror",
                               "reports", "cache_dir", "nightly"}, {"kernels"})
    kernels = _kernels(r, top["kernels"])
    return LabConfig(
        path=path, kernels=kernels, default_kernel=_default_kernel(r, top, kernels),
        rootfs=_rootfs(r, top.get("rootfs")), machine=_machine(r, top.get("machine")),
        mirror=_mirror(r, top["mirror"]) if top.get("mirror") is not None else None,
        reports_dir=_reports_dir(r, top.get("reports"), path),
        cache_dir=r.optional(top, "cache_dir", "",
                             lambda v, k: r.path(v, "cache_dir", False), None),
        nightly=_nightly(r, top["nightly"], kernels) if top.get("nightly") is not None
        else None)


def _kernels(r: YamlReader, raw: Any) -> dict[str, KernelSpec]:
    """`kernels:`, in their order; a build kernel's `debian:` config base names one of them."""
    if not isinstance(raw, dict) or not raw:
        raise r.fail("kernels", "a mapping of kernel names to kernel sources", raw)
    kernels = {}
    for name, value in raw.items():
        r.string(name, f"kernels.{name}", re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"),
                 "a kernel name of letters, digits, '.', '_' and '-'")
        kernels[name] = _kernel(r, name, value)
    for spec in kernels.values():
        if isinstance(spec.source, BuildKernel) and spec.source.base.startswith("debian:"):
            other = spec.source.base.removeprefix("debian:")
            if not isinstance(getattr(kernels.get(other), "source", None), DebianKernel):
                raise r.fail(f"kernels.{spec.name}.build.config.base", "debian:<the name of a "
                             "debian kernel of this file>", spec.source.base)
    return kernels


def _default_kernel(r: YamlReader, top: dict[str, Any], kernels: dict[str, KernelSpec]) -> str:
    """`default_kernel:`, the first of `kernels:` when unset."""
    default = top.get("default_kernel", next(iter(kernels)))
    r.string(default, "default_kernel")
    if default not in kernels:
        raise r.fail("default_kernel", "one of the kernels: " + ", ".join(kernels), default)
    return default


def _rootfs(r: YamlReader, value: Any) -> RootfsSpec:
    rf = r.mapping(value, "rootfs", {"suite", "variant", "packages"})
    packages = rf.get("packages", [])
    if not isinstance(packages, list):
        raise r.fail("rootfs.packages", "a list of Debian package names", packages)
    return RootfsSpec(
        suite=r.optional(rf, "suite", "rootfs",
                         lambda v, k: r.string(v, k, _DEBIAN_NAME, "a Debian suite name"), "trixie"),
        variant=r.optional(rf, "variant", "rootfs",
                           lambda v, k: r.choice(v, k, ROOTFS_VARIANTS), "minbase"),
        packages=tuple(r.string(p, f"rootfs.packages[{i}]", _DEBIAN_NAME, "a Debian package name")
                       for i, p in enumerate(packages)))


def _machine(r: YamlReader, value: Any) -> MachineSpec:
    m = r.mapping(value, "machine",
                  {"cpus", "memory_mb", "accel", "tcg_threads", "boot_timeout_s", "cmdline",
                   "console_log_mb"})
    return MachineSpec(
        cpus=r.optional(m, "cpus", "machine", lambda v, k: r.integer(v, k, 1, 64), 1),
        memory_mb=r.optional(m, "memory_mb", "machine",
                             lambda v, k: r.integer(v, k, 256, 65536), 1024),
        accel=r.optional(m, "accel", "machine", lambda v, k: r.choice(v, k, ACCELS), "auto"),
        tcg_threads=r.optional(m, "tcg_threads", "machine",
                               lambda v, k: r.choice(v, k, TCG_THREADS), "auto"),
        boot_timeout_s=r.optional(m, "boot_timeout_s", "machine",
                                  lambda v, k: r.number(v, k, 5, 3600), 120.0),
        cmdline=r.optional(m, "cmdline", "machine", r.cmdline, ""),
        console_log_mb=r.optional(m, "console_log_mb", "machine",
                                  lambda v, k: r.integer(v, k, 1, 4096), 16))


def _mirror(r: YamlReader, value: Any) -> MirrorSpec:
    mi = r.mapping(value, "mirror", {"url", "keyring"}, {"url"})
    return MirrorSpec(
        url=r.string(mi["url"], "mirror.url", re.compile(r"^(https?|file)://\S+$"),
                     "an http://, https:// or file:// URL").rstrip("/"),
        keyring=r.optional(mi, "keyring", "mirror", r.path, None))


def _reports_dir(r: YamlReader, value: Any, path: Path) -> Path:
    """`reports.dir`, reports/ beside lab.yaml when unset."""
    rep = r.mapping(value, "reports", {"dir"})
    return r.optional(rep, "dir", "reports",
                      lambda v, k: r.path(v, k, must_exist=False), path.parent / "reports")


def load(path: Path) -> LabConfig:
    """Read and validate lab.yaml at `path`."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file", hint="pass --lab-config PATH or run from the "
                          "ringlab checkout") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{path}:{where}: not valid YAML: {problem}") from None
    return parse(data, path)
