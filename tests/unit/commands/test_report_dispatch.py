"""`./lab report`: the command line parses to the verb's main, and main resolves lab.yaml's
names once (the default kernels, the newest Debian source) before it hands the report to
harness/findings/issue_report.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import arch, cli, config, host, paths
from harness.commands import report
from harness.errors import LabError
from harness.findings import issue_report
from harness.runs import run_folder

ISSUE = "perf-mmap-second-mapping-charged"


def test_report_parses_and_dispatches_to_main() -> None:
    args = cli.build_parser(("report",)).parse_args(
        ["report", ISSUE, "--kernel", "a", "--kernel", "b", "--source", "src", "--out", "d"])
    assert args.func is report.main
    assert (args.issue, args.kernel, args.source, args.out) == (ISSUE, ["a", "b"], "src", "d")
    bare = cli.build_parser(("report",)).parse_args(["report", ISSUE])
    assert (bare.kernel, bare.source, bare.out) == (None, None, None)


def test_an_issue_must_be_named() -> None:
    with pytest.raises(SystemExit):
        cli.build_parser(("report",)).parse_args(["report"])


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[issue_report.ReportRequest]:
    """What main hands to issue_report.write, with the run folder and the Lab stood in for."""
    monkeypatch.delenv("RINGLAB_CONFIG", raising=False)
    got: list[issue_report.ReportRequest] = []

    def write(lab: object, req: issue_report.ReportRequest, out: Path) -> issue_report.Written:
        assert out == tmp_path
        got.append(req)
        return issue_report.Written("text")
    monkeypatch.setattr(run_folder, "open_run", lambda cfg, args, name: tmp_path)
    monkeypatch.setattr(report, "Lab", lambda cfg: object())
    monkeypatch.setattr(issue_report, "write", write)
    return got


def test_main_hands_down_the_default_kernels_and_the_newest_source(
        handed: list[issue_report.ReportRequest]) -> None:
    args = cli.build_parser(("report",)).parse_args(["report", ISSUE])
    assert report.main(args) == 0
    cfg = config.load(paths.REPO / "lab.yaml")
    (req,) = handed
    assert req.issue.id == ISSUE
    assert req.kernels == tuple(issue_report.default_kernels(cfg))
    assert req.source == issue_report.newest_source(cfg, arch.DEFAULT)


def test_an_unknown_kernel_or_issue_is_an_error_before_any_report(
        handed: list[issue_report.ReportRequest]) -> None:
    parse = cli.build_parser(("report",)).parse_args
    with pytest.raises(LabError, match="unknown kernel 'no-such-kernel'"):
        report.main(parse(["report", ISSUE, "--kernel", "trixie-cloud", "--kernel",
                           "no-such-kernel"]))
    with pytest.raises(LabError, match="'nope' is not an issue"):
        report.main(parse(["report", "nope"]))
    assert handed == []


def test_the_verb_declares_its_own_logging_and_the_build_tools() -> None:
    needs = host.verb_needs("report")
    assert needs.own_logging is True and needs.host_tools == ("build",)
    assert (report.OWN_LOGGING, report.HOST_TOOLS) == (True, ("build",))
