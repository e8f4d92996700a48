"""A known issue's report folder (`./lab report ISSUE`): what the verb writes, so the verb only
reads its command line. The code is quoted from a build kernel's tree, the reproducer kept by
`./lab explore` is built and run on each kernel asked for, the issue's fix is copied beside it,
and the mail's text says all of it. The folder is made by the caller (harness/runs, a layer
above this one) and passed in."""
from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from debian.debian_support import Version

from harness import arch as arches, config as lab_config, paths
from harness.config import BuildKernel, DebianKernel, DebianSource, LabConfig
from harness.errors import LabError
from harness.findings import code, mail, repro
from harness.kernels import series as kseries
from harness.resources import Lab
from harness.results import known_issues

log = logging.getLogger("ringlab")


@dataclass(frozen=True)
class ReportRequest:
    """What `./lab report` was asked, its names already checked against lab.yaml."""
    issue: known_issues.KnownIssue
    kernels: tuple[str, ...]     # the reproducer runs on each
    source: str                  # the build kernel whose tree the code is quoted from


@dataclass
class Written:
    """What went into the folder: the mail's text, the files beside report.txt, the runs."""
    text: str
    files: list[Path] = field(default_factory=list)
    runs: list[mail.ReproRun] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """1 when the reproducer ran and passed everywhere: it shows nothing."""
        return 1 if self.runs and not any(r.verdict == "FAIL" for r in self.runs) else 0


def known(issue_id: str) -> known_issues.KnownIssue:
    """The issue of kernels/known-issues.yaml; an unknown id is one error listing the ids."""
    issues = {i.id: i for i in known_issues.load()}
    if issue_id not in issues:
        raise LabError(f"{issue_id!r} is not an issue of {known_issues.KNOWN_ISSUES}; it has: "
                       f"{', '.join(sorted(issues))}")
    return issues[issue_id]


def default_kernels(cfg: LabConfig) -> list[str]:
    """One Debian kernel per suite, for this host's arch, in lab.yaml's order (the default
    kernel first): a kernel of each line the lab runs."""
    host = arches.host()
    names = [cfg.default_kernel] if cfg.default_kernel else []
    suites = set()
    for name in [*names, *cfg.kernels]:
        spec = cfg.kernels[name]
        if isinstance(spec.source, DebianKernel) and (host is None or spec.arch == host.name) \
                and spec.source.suite not in suites:
            suites.add(spec.source.suite)
            if name not in names:
                names.append(name)
    return names


def newest_source(cfg: LabConfig, arch: str) -> str:
    """The build kernel of lab.yaml for `arch` on the newest Debian source version (the
    caller names the arch whose kernels the code is quoted from)."""
    best: tuple[Version, str] | None = None
    for name, spec in cfg.kernels.items():
        src = spec.source
        if isinstance(src, BuildKernel) and isinstance(src.tree, DebianSource) and \
                src.tree.version and spec.arch == arch:
            v = Version(src.tree.version)
            if best is None or v > best[0]:
                best = (v, name)
    if best is None:
        raise LabError(f"{cfg.path} has no `build` kernel on a Debian source to quote code from",
                       hint="name one with --source")
    return best[1]


def quotes(lab: Lab, issue: known_issues.KnownIssue, source: str) -> tuple[str, list[code.Quote]]:
    """The tree's label and the issue's code quoted from it (nothing when it quotes none)."""
    if not issue.code:
        return "", []
    spec = lab.config.kernel(source)
    if not isinstance(spec.source, BuildKernel):
        raise LabError(f"--source {source}: not a `build` kernel of {lab.config.path}, so the "
                       f"lab has no tree to quote from")
    tree = lab.builder().tree(spec, spec.source)
    src = spec.source.tree
    label = f"{src.package} {src.version}" if isinstance(src, DebianSource) else str(tree)
    return label, [code.quote(tree, where) for where in issue.code]


def reproduce(lab: Lab, req: ReportRequest, out: Path, written: Written) -> str:
    """The kept failure's repro.c and repro.py in `out`, built and run on each kernel; what
    the mail calls the reproducer."""
    kept = repro.kept_failure(req.issue.id)
    if kept is None:
        return (f"none standalone yet: `./lab explore` has kept no failure for it; the lab's "
                f"test {', '.join(req.issue.tests)} shows it")
    written.files.extend(repro.write(out, kept))
    binary = repro.build(out / "repro.c")
    for k in req.kernels:
        log.info("report: the reproducer on %s", k)
        written.runs.append(repro.run_on(lab, k, binary,
                                         out / f"console-{lab_config.file_safe(k)}.log"))
        log.info("report: %s on %s (%s)", written.runs[-1].verdict, k, written.runs[-1].release)
    binary.unlink()
    return "repro.c"


def write_fix(issue: known_issues.KnownIssue, out: Path, repo: Path = paths.REPO) -> Path | None:
    """fix.patch: the issue's fix series as one file, when it names one."""
    if not issue.fix:
        return None
    fix = out / "fix.patch"
    fix.write_text("".join(p.text for p in kseries.read(repo / issue.fix)))
    return fix


def write(lab: Lab, req: ReportRequest, out: Path,
          say: Callable[[str], None] = print) -> Written:
    """The folder: report.txt (also said), repro.c and repro.py, fix.patch, runs.json."""
    tree_label, quoted = quotes(lab, req.issue, req.source)
    written = Written(text="")
    what = reproduce(lab, req, out, written)
    fix = write_fix(req.issue, out)
    if fix is not None:
        written.files.append(fix)
    written.text = mail.report_text(req.issue, written.runs, quoted, tree_label, what,
                                    fix.name if fix is not None else None)
    (out / "report.txt").write_text(written.text)
    (out / "runs.json").write_text(json.dumps([r.__dict__ | {"verdict": r.verdict}
                                               for r in written.runs], indent=1) + "\n")
    say(written.text)
    say(f"report of {req.issue.id} in {out}: report.txt "
        + " ".join(f.name for f in written.files))
    return written
