"""`./lab build`: a kernel the lab builds (tree + series + config fragments), incrementally."""
from __future__ import annotations

import argparse

from harness import config as lab_config
from harness.commands import options
from harness.kernels.gcov import variant
from harness.runs import run_folder
from harness.errors import LabError
from harness.resources import Lab

# Read by harness/cli.py, and as text by harness/host.py (./lab's host check): literals only.
OWN_LOGGING: bool = False
HOST_TOOLS: tuple[str, ...] = ("build",)


def register(sub: argparse._SubParsersAction) -> None:
    bu = sub.add_parser("build", help="build a kernel from a tree + series + config fragments",
                        description=main.__doc__)
    options.kernel(bu, "the kernel to build (a build kernel or a source tree)")
    bu.add_argument("--coverage", action="store_true",
                    help="build its coverage variant: gcov on the ring-buffer files "
                         "(harness/coverage/, what ./lab coverage runs)")
    bu.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Build a `build` kernel (nothing happens if it is built already): its tree, series and
    config fragments; print the image, the release and any fragment option that did not
    survive olddefconfig."""
    cfg, spec = options.config_and_kernel(args)
    if not isinstance(spec.source, lab_config.BuildKernel):
        raise LabError(f"kernel {spec.name} is not a `build` kernel of {cfg.path}; the build "
                       f"kernels are: {', '.join(cfg.build_kernel_names()) or 'none'}")
    if args.coverage:
        spec = variant(cfg, spec)
    src = spec.source
    assert isinstance(src, lab_config.BuildKernel)
    k, report = Lab(cfg).builder().prepare(spec, src)
    print(f"{spec.name}: {k.release}: {k.vmlinuz}")
    print(f"  {'cached (nothing changed)' if report.cached else f'built in {report.seconds:.0f} s'}"
          + (f", {report.compiled} make steps, log {report.log}" if not report.cached else ""))
    for d in report.dropped:
        print(f"  fragment option not in the final .config: {d}")
    return 0
