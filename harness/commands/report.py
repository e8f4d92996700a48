"""`./lab report ISSUE`: a known kernel issue as a maintainer reads it (harness/findings/)."""
from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from debian.debian_support import Version

from harness import arch as arches, config as lab_config
from harness.runs import run_folder
from harness.config import BuildKernel, DebianKernel, DebianSource, LabConfig
from harness.errors import LabError
from harness.findings import code, mail, repro
from harness.kernels import series as kseries
from harness.resources import Lab
from harness.results import known_issues

# Read by harness/cli.py, and as text by harness/host.py (./lab's host check): literals only.
OWN_LOGGING: bool = True
HOST_TOOLS: tuple[str, ...] = ("build",)

log = logging.getLogger("ringlab")

def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("report", help="a known kernel issue as a maintainer reads it: "
                       "report.txt, the reproducer run on the lab's kernels, the fix",
                       description=main.__doc__)
    r.add_argument("issue", metavar="ISSUE", help="an id of kernels/known-issues.yaml")
    r.add_argument("--kernel", action="append", metavar="KERNEL", help="a kernel of lab.yaml "
                   "to run the reproducer on (again for more; default: one Debian kernel of "
                   "lab.yaml per suite, for this host's arch)")
    r.add_argument("--source", metavar="KERNEL", help="the build kernel of lab.yaml whose tree "
                   "the code is quoted from (default: the newest Debian source of lab.yaml)")
    r.add_argument("--out", metavar="DIR", help="the folder to write (default: "
                   "reports/<time>-report-ISSUE/)")
    r.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Write a folder for a known kernel issue: report.txt (the mail body: what happens, the
    reproducer's output on a kernel with the bug and one without, Fixes:, the code, what the
    lab checks), repro.c and repro.py (from the failure `./lab explore` kept for it), and
    fix.patch when the issue names a fix. The reproducer is built here and run as root on each
    kernel. Exit 0 when written, 1 when the reproducer passed everywhere (it shows nothing)."""
    issues = {i.id: i for i in known_issues.load()}
    if args.issue not in issues:
        raise LabError(f"{args.issue!r} is not an issue of {known_issues.KNOWN_ISSUES}; it has: "
                       f"{', '.join(sorted(issues))}")
    issue = issues[args.issue]
    cfg = run_folder.config(args)
    kernels = args.kernel or default_kernels(cfg)
    for k in kernels:
        cfg.kernel(k)   # an unknown name is one clear error before any boot
    source = args.source or newest_source(cfg)
    if args.out:
        out = run_folder.make(Path(args.out))
        run_folder.setup_logging(args.verbose, out / "lab.log")
    else:
        out = run_folder.open_run(cfg, args, f"report-{lab_config.file_safe(issue.id)}")
    lab = Lab(cfg)

    tree_label, quotes = "", []
    if issue.code:
        spec = cfg.kernel(source)
        if not isinstance(spec.source, BuildKernel):
            raise LabError(f"--source {source}: not a `build` kernel of {cfg.path}, so the lab "
                           f"has no tree to quote from")
        tree = lab.builder().tree(spec, spec.source)
        src = spec.source.tree
        tree_label = f"{src.package} {src.version}" if isinstance(src, DebianSource) else \
            str(tree)
        quotes = [code.quote(tree, where) for where in issue.code]

    runs: list[mail.ReproRun] = []
    kept = repro.kept_failure(issue.id)
    if kept is not None:
        files = repro.write(out, kept)
        binary = repro.build(out / "repro.c")
        for k in kernels:
            log.info("report: the reproducer on %s", k)
            runs.append(repro.run_on(lab, k, binary, out / f"console-{lab_config.file_safe(k)}.log"))
            log.info("report: %s on %s (%s)", runs[-1].verdict, k, runs[-1].release)
        binary.unlink()
        what = "repro.c"
    else:
        files = []
        what = (f"none standalone yet: `./lab explore` has kept no failure for it; the lab's "
                f"test {', '.join(issue.tests)} shows it")
    fix_name = None
    if issue.fix:
        patches = kseries.read(run_folder.REPO / issue.fix)
        fix = out / "fix.patch"
        fix.write_text("".join(p.text for p in patches))
        files.append(fix)
        fix_name = fix.name
    text = mail.report_text(issue, runs, quotes, tree_label, what, fix_name)
    (out / "report.txt").write_text(text)
    (out / "runs.json").write_text(json.dumps([r.__dict__ | {"verdict": r.verdict}
                                               for r in runs], indent=1) + "\n")
    print(text)
    print(f"report of {issue.id} in {out}: report.txt "
          + " ".join(f.name for f in files))
    return 1 if runs and not any(r.verdict == "FAIL" for r in runs) else 0


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


def newest_source(cfg: LabConfig) -> str:
    """The build kernel of lab.yaml on the newest Debian source version."""
    best: tuple[Version, str] | None = None
    for name, spec in cfg.kernels.items():
        src = spec.source
        if isinstance(src, BuildKernel) and isinstance(src.tree, DebianSource) and \
                src.tree.version and spec.arch == arches.DEFAULT:
            v = Version(src.tree.version)
            if best is None or v > best[0]:
                best = (v, name)
    if best is None:
        raise LabError(f"{cfg.path} has no `build` kernel on a Debian source to quote code from",
                       hint="name one with --source")
    return best[1]
