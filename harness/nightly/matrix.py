"""The nightly matrix: lab.yaml's NightlySpec expanded into cells, and each cell as the
RunRequest of its `./lab run` (harness/runs/request.py).

A cell changes nothing in lab.yaml: its config variant is the build kernel's spec with the
variant's fragments (named `kernel+variant`), its guest profile is lab.yaml's machine with the
profile's values (the request's `machine`), its selection is the request's -k. A branch is
the one thing only a worker can add (the tree is the worktree it fetches): cell.py varies the
spec's tree there (config.varied)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from harness.config import (BuildKernel, KernelSpec, LabConfig, MachineSpec, NightlyKernel,
                            NightlyProfile, NightlySelection, NightlyVariant)
from harness.errors import ConfigError
from harness.runs.request import RunRequest


@dataclass(frozen=True)
class Cell:
    """One cell of the matrix: a kernel (and branch), a config variant (build kernels with
    variants only), a guest profile and a test selection."""
    name: str
    kernel: NightlyKernel
    variant: NightlyVariant | None
    profile: NightlyProfile
    selection: NightlySelection


def cells(cfg: LabConfig) -> list[Cell]:
    """The nightly section expanded, in lab.yaml's order. A cell's name is its kernel (with
    @branch) plus each dimension that varies: the variant for a build kernel, the profile
    and the selection when there are several."""
    spec = cfg.nightly
    if spec is None:
        raise ConfigError(f"{cfg.path}: no `nightly:` section: nothing to run",
                          hint="add one (see the shipped lab.yaml and the README's Nightly)")
    out: list[Cell] = []
    for k in spec.kernels:
        built = isinstance(cfg.kernels[k.name].source, BuildKernel)
        variants: tuple[NightlyVariant | None, ...] = spec.variants if built and spec.variants \
            else (None,)
        for v in variants:
            for p in spec.profiles:
                for s in spec.selections:
                    parts = [k.name + (f"@{k.branch.replace('/', '-')}" if k.branch else "")]
                    parts += [v.name] if v else []
                    parts += [p.name] if len(spec.profiles) > 1 else []
                    parts += [s.name] if len(spec.selections) > 1 else []
                    out.append(Cell(".".join(parts), k, v, p, s))
    names = [c.name for c in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{cfg.path}: nightly: two cells are both named {dup[0]}; rename a "
                          "variant, profile or selection")
    return out


def chosen(cfg: LabConfig, only: tuple[str, ...]) -> list[Cell]:
    """The cells named by --cell (all of them for none); an unknown name is an error listing
    the cells."""
    every = cells(cfg)
    unknown = sorted(set(only) - {c.name for c in every})
    if unknown:
        raise ConfigError(f"--cell {unknown[0]}: not a cell of {cfg.path}'s nightly; its "
                          f"cells are: {', '.join(c.name for c in every)}")
    return [c for c in every if not only or c.name in only]


def kernel(cfg: LabConfig, cell: Cell) -> KernelSpec:
    """The cell's kernel: lab.yaml's, or with a variant its build spec with the variant's
    fragments in place of its own, under a name of its own (`kernel+variant`: its summary,
    KCIDB document and build say which config they ran)."""
    spec = cfg.kernels[cell.kernel.name]
    if cell.variant is None:
        return spec
    src = spec.source
    assert isinstance(src, BuildKernel)  # cells() gives variants to build kernels only
    return replace(spec, name=f"{spec.name}+{cell.variant.name}",
                   source=replace(src, fragments=cell.variant.fragments))


def machine(cfg: LabConfig, profile: NightlyProfile) -> MachineSpec:
    """lab.yaml's machine with the profile's values. Always given, even unchanged: the
    submitter's machine is the night's, whatever a remote worker's lab.yaml says."""
    return replace(cfg.machine,
                   cpus=cfg.machine.cpus if profile.cpus is None else profile.cpus,
                   memory_mb=cfg.machine.memory_mb if profile.memory_mb is None
                   else profile.memory_mb)


def run_request(cfg: LabConfig, cell: Cell, report_dir: Path, *, refresh: bool,
                selftests: bool) -> RunRequest:
    """The cell's `./lab run` as a request, as the submitter sees it (its paths, its report
    folder): the worker moves it to its checkout and scratch folder (cell.py). History is
    the nightly's own (report.py, per cell), so the child keeps none."""
    return RunRequest(cfg.path, kernel(cfg, cell), report_dir, selection=cell.selection.expr,
                      refresh=refresh, selftests=selftests, machine=machine(cfg, cell.profile))
