"""One run of the suite, asked for in one typed record: the kernel resolved once, where the
command line (or lab.yaml's nightly matrix) was read, with its modules and any build change
(a review's extra series, a bisect's tree, a nightly variant's fragments) applied.

Every stage after that takes the record: `./lab run` in this process, a child `./lab run`
(`run --request JSON`), the pytest plugin (`--lab-request FILE`, the request.json a run
writes into its report folder) and each xdist worker. None of them resolves the kernel again;
they load lab.yaml for the rest (rootfs, mirror, cache) and put the request's kernel and
machine into it (`run_config`).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from harness import config as lab_config
from harness.config import (BuildKernel, DebianKernel, DebianSource, KernelSpec, LabConfig,
                            MachineSpec, PathKernel)
from harness.errors import ConfigError


@dataclass(frozen=True)
class RunRequest:
    """What one `./lab run` of one kernel is asked to do."""
    lab_config: Path
    kernel: KernelSpec                  # resolved: a child never looks its name up again
    report_dir: Path
    selection: str | None = None        # pytest -k
    jobs: str | None = None             # ./lab run -j (test workers): N or 'auto'
    refresh: bool = False               # look for a newer Debian kernel package
    history: str | None = None          # keep the summary there, compare with the last
    keep_guest: bool = False
    gdb_on_failure: bool = False        # keep the first failing test's guest paused for gdb
    selftests: bool = False             # the kernel's own selftests too (tests/kernel/kselftest)
    selftests_from: Path | None = None  # ... built from this tree (review: the patched one)
    machine: MachineSpec | None = None  # a nightly profile's machine; None: lab.yaml's
    pytest_args: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(_plain(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunRequest:
        try:
            return _request(json.loads(text))
        except (ValueError, TypeError, KeyError) as e:
            raise ConfigError(f"a run request that cannot be read ({e}): {text[:200]}") from None

    def with_folder(self, report_dir: Path) -> RunRequest:
        return replace(self, report_dir=report_dir)


def make(cfg: LabConfig, kernel: str | KernelSpec | None, report_dir: Path, *,
         series: tuple[Path, ...] = (), tree: Path | None = None,
         **options: Any) -> RunRequest:
    """The request to run the suite on `kernel` (a name or command-line form, resolved here;
    or a spec already resolved) into `report_dir`, with a build kernel's patches (`series`,
    after its own) or tree (`tree`) varied: what review and bisect ask for."""
    spec = kernel if isinstance(kernel, KernelSpec) else cfg.kernel(kernel)
    if series or tree is not None:
        spec = lab_config.varied(spec, series, tree, cfg.path)
    return RunRequest(cfg.path, spec, report_dir, **options)


def run_config(req: RunRequest, cfg: LabConfig | None = None) -> LabConfig:
    """lab.yaml (given, or read from the request's path) with the request's kernel and machine
    in it: what a Lab of this run is made from. The kernel is put in under its own name, so a
    look-up by that name finds the resolved spec and never resolves it again."""
    cfg = cfg if cfg is not None and cfg.path == req.lab_config else lab_config.load(req.lab_config)
    return replace(cfg, kernels={**cfg.kernels, req.kernel.name: req.kernel},
                   machine=req.machine or cfg.machine)


def write(req: RunRequest) -> Path:
    """The request as request.json in its report folder: what the plugin is given."""
    path = req.report_dir / "request.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(req.to_json() + "\n")
    tmp.replace(path)
    return path


def read(path: Path) -> RunRequest:
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read the run request {path}: {e.strerror}") from None
    return RunRequest.from_json(text)


# --- JSON: the records of harness/config.py as plain values, and back -----------------------

_SOURCES: dict[str, type] = {t.__name__: t for t in (DebianKernel, PathKernel, BuildKernel)}


def _plain(value: Any) -> Any:
    """Dataclasses as dicts (a kernel source tagged with its kind), paths as strings."""
    if isinstance(value, (DebianKernel, PathKernel, BuildKernel)):
        return {"kind": type(value).__name__, **{f.name: _plain(getattr(value, f.name))
                                                 for f in fields(value)}}
    if isinstance(value, DebianSource):
        return {"debian_source": _plain(asdict(value))}
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def _request(data: dict[str, Any]) -> RunRequest:
    """The RunRequest `data` (its JSON, parsed) came from."""
    return RunRequest(**{
        **data, "lab_config": Path(data["lab_config"]),
        "kernel": _kernel(data["kernel"]), "report_dir": Path(data["report_dir"]),
        "selftests_from": _path(data.get("selftests_from")),
        "machine": MachineSpec(**data["machine"]) if data.get("machine") else None,
        "pytest_args": tuple(data.get("pytest_args", ()))})


def _kernel(data: dict[str, Any]) -> KernelSpec:
    src = dict(data["source"])
    kind = _SOURCES[src.pop("kind")]
    if kind is DebianKernel:
        source: DebianKernel | PathKernel | BuildKernel = DebianKernel(**src)
    elif kind is PathKernel:
        source = PathKernel(Path(src["image"]), _path(src.get("modules")),
                            _path(src.get("build_dir")))
    else:
        tree = src["tree"]
        source = BuildKernel(
            DebianSource(**tree["debian_source"]) if isinstance(tree, dict) else Path(tree),
            tuple(Path(s) for s in src.get("series", ())), src.get("base", "defconfig"),
            tuple(Path(f) for f in src.get("fragments", ())), tuple(src.get("profiled", ())),
            tuple(src.get("kcsan_only", ())))
    return KernelSpec(data["name"], source, data.get("cmdline", ""), data["arch"])


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None
