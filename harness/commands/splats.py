"""`./lab splats CONSOLE.LOG`: the kernel splats of a console log, offline (like kunit.py's
parse stage), decoded to file:line with a kernel that has a vmlinux."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import options
from harness.runs import run_folder
from harness.config import BuildKernel, PathKernel
from harness.errors import LabError
from harness.kernellog import decode, splats
from harness.resources import Lab

# Read by harness/cli.py, and as text by harness/host.py (./lab's host check): literals only.
OWN_LOGGING: bool = False
HOST_TOOLS: tuple[str, ...] = ()


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser("splats", help="the kernel splats of a console log (decoded with "
                        "--kernel of a built kernel); exit 1 if any", description=main.__doc__)
    sp.add_argument("log", metavar="CONSOLE.LOG", help="a console log (console-<kernel>.log of a "
                    "report, or any kernel log)")
    options.kernel(sp, "a kernel with a vmlinux (a build kernel, a make O= folder): decode the "
                   "frames to file:line with it")
    sp.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """The kernel splats of a console log, offline: each one's title, RIP, call trace and
    tainting modules; with --kernel of a kernel with a vmlinux, its frames as file:line. Exit 1
    if there is any, 0 if none, 2 if the file cannot be read."""
    text = read_console_log(Path(args.log))
    found = [s.as_dict() for s in splats.find(text.splitlines())]
    if args.kernel and found:
        cfg, spec = options.config_and_kernel(args)
        src = spec.source
        if not (isinstance(src, BuildKernel) or isinstance(src, PathKernel) and src.build_dir):
            raise LabError(f"--kernel {spec.name}: not a `build` kernel or a make O= folder, so "
                           f"there is no vmlinux to decode with; the build kernels of "
                           f"{cfg.path} are: {', '.join(cfg.build_kernel_names()) or 'none'}")
        k = Lab(cfg).kernel(spec.name)
        found = decode.with_decoded(found, decode.decoder_for(k), limit=len(found))
    for i, s in enumerate(found, 1):
        print(f"splat {i} of {len(found)}: " + "\n".join(decode.render(s)))
    print(f"{len(found)} splat(s) in {args.log}")
    return 1 if found else 0


def read_console_log(path: Path) -> str:
    """A console log's text; a missing, unreadable or binary file is the user's error."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise LabError(f"cannot read the console log {path}: {e.strerror or e}") from None
    if b"\0" in data[:65536]:
        raise LabError(f"{path} is not a console log (it holds binary data)")
    return data.decode("utf-8", errors="replace")
