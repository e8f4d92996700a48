"""`./lab explore`: the command line parses to the verb's main, and main hands the checked
request, with the kernel resolved once, to harness/explore/drive.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli, host, splat_proof
from harness.commands import explore
from harness.explore import drive
from harness.explore.session import ExploreRequest
from harness.runs import run_folder


def test_explore_parses_and_dispatches_to_main() -> None:
    args = cli.build_parser(("explore",)).parse_args(
        ["explore", "pinning", "trace-mmap", "--kernel", "trixie-cloud", "--budget", "2m",
         "--seed", "7", "--actors", "2", "--keep"])
    assert args.func is explore.main
    assert (args.paths, args.kernel, args.budget, args.seed, args.actors, args.keep) == (
        ["pinning", "trace-mmap"], "trixie-cloud", "2m", "7", "2", True)
    bare = cli.build_parser(("explore",)).parse_args(["explore"])
    assert (bare.paths, bare.budget, bare.seed, bare.actors, bare.keep) == (
        [], explore.DEFAULT_BUDGET, "0", "1", False)


def test_main_hands_the_request_and_the_splat_proof_to_the_driver(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RINGLAB_CONFIG", raising=False)
    lab = object()
    proofs: list[tuple[object, str, Path]] = []
    written: list[tuple[object, Path]] = []
    handed: list[ExploreRequest] = []

    def run(lab_: object, req: ExploreRequest, out: Path, prove, say=print) -> int:
        assert (lab_, out) == (lab, tmp_path)
        handed.append(req)
        prove(req.kernel)
        return 1
    monkeypatch.setattr(run_folder, "open_run", lambda cfg, args, name: tmp_path)
    monkeypatch.setattr(explore, "Lab", lambda cfg: lab)
    monkeypatch.setattr(drive, "run", run)
    monkeypatch.setattr(splat_proof, "prove",
                        lambda lab_, kernel, work: proofs.append((lab_, kernel, work)) or "proof")
    monkeypatch.setattr(splat_proof, "write", lambda proof, out: written.append((proof, out)))
    args = cli.build_parser(("explore",)).parse_args(
        ["explore", "pinning", "--kernel", "trixie-cloud", "--seed", "3"])
    assert explore.main(args) == 1
    assert handed == [ExploreRequest(kernel="trixie-cloud", paths=("pinning",), budget_s=60.0,
                                     seed=3)]
    assert proofs == [(lab, "trixie-cloud", tmp_path / "splat-proof")]
    assert written == [("proof", tmp_path)]


def test_the_verb_declares_its_own_logging_and_no_host_tools() -> None:
    needs = host.verb_needs("explore")
    assert needs.own_logging is True and needs.host_tools == ()
    assert (explore.OWN_LOGGING, explore.HOST_TOOLS) == (True, ())


def test_a_nightly_cells_request_gives_the_kernel_and_the_folder(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`--request` (a nightly cell's explore): the cell's kernel as it ran, a variant not in
    lab.yaml included, and its folder; lab.yaml's kernels are not looked up."""
    from harness import config
    from harness.runs.request import RunRequest
    tree = tmp_path / "linux"
    tree.mkdir()
    (tmp_path / "lab.yaml").write_text(
        f"default_kernel: src\nkernels:\n  src:\n    build:\n      tree: {tree}\n")
    spec = config.KernelSpec("src+v", config.BuildKernel(tree, fragments=(tmp_path / "v",)))
    req = RunRequest(tmp_path / "lab.yaml", spec, tmp_path / "cell" / "explore")
    labs: list[config.LabConfig] = []
    handed: list[tuple[ExploreRequest, Path]] = []
    monkeypatch.setattr(explore, "Lab", lambda cfg: labs.append(cfg) or cfg)
    monkeypatch.setattr(drive, "run", lambda lab, r, out, prove: handed.append((r, out)) or 0)
    monkeypatch.setattr(run_folder, "setup_logging", lambda verbose, logfile=None: None)
    args = cli.build_parser(("explore",)).parse_args(
        ["explore", "--request", req.to_json(), "--seed", "5"])
    assert explore.main(args) == 0
    assert handed == [(ExploreRequest(kernel="src+v", paths=(), budget_s=60.0, seed=5),
                       tmp_path / "cell" / "explore")]
    assert labs[0].kernel("src+v") == spec
