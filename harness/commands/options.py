"""The option groups several `./lab` verbs share, written once: the kernel (every form it can
be named in), a test selection, pytest arguments, benchmark runs."""
from __future__ import annotations

import argparse

from harness.config import KernelSpec, LabConfig
from harness.errors import ConfigError
from harness.runs import run_folder

KERNEL_FORMS = ("a kernel of lab.yaml, debian:SUITE/FLAVOUR[=VERSION], a kernel image "
                "(bzImage, vmlinuz, arm64 Image), a make O= folder, or a kernel source tree "
                "(built with ringbuf.config)")


def kernel(parser: argparse.ArgumentParser, what: str = "the kernel") -> None:
    """--kernel and --modules (for an image): harness/config.py command_line_kernel()."""
    parser.add_argument("--kernel", metavar="KERNEL", help=f"{what}: {KERNEL_FORMS}")
    parser.add_argument("--modules", metavar="DIR", help="with --kernel IMAGE: its modules "
                        "(lib/modules/<release> or the folder holding it; default: found beside "
                        "the image)")


def kernel_spec(cfg: LabConfig, args: argparse.Namespace) -> KernelSpec:
    """--kernel (and --modules) resolved: the one place a verb turns them into a spec. The
    spec then travels whole (a Lab's config `with_kernel`, a RunRequest); nothing after this
    looks the name up again."""
    modules = getattr(args, "modules", None)
    if modules and not args.kernel:
        raise ConfigError("--modules goes with --kernel IMAGE")
    return cfg.kernel(args.kernel, modules)


def config_and_kernel(args: argparse.Namespace) -> tuple[LabConfig, KernelSpec]:
    """lab.yaml and --kernel resolved (`kernel_spec`), the spec put into the config under its
    name: what a verb of one kernel works from."""
    cfg = run_folder.config(args)
    spec = kernel_spec(cfg, args)
    return cfg.with_kernel(spec), spec


def selection(parser: argparse.ArgumentParser,
              what: str = "only tests matching EXPR (pytest -k)") -> None:
    parser.add_argument("-k", metavar="EXPR", help=what)


def pytest_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")


def runs(parser: argparse.ArgumentParser, default: int, what: str = "throughput runs") -> None:
    parser.add_argument("--runs", type=int, default=default, help=f"{what} (default {default})")


def failure_policies(parser: argparse.ArgumentParser) -> None:
    """What a commit that does not build, or whose kernel does not boot, is in a bisect."""
    parser.add_argument("--on-build-failure", choices=("skip", "bad", "abort"), default="skip",
                        help="what a commit that does not build is (default: skip)")
    parser.add_argument("--on-boot-failure", choices=("skip", "bad", "abort"), default="skip",
                        help="what a commit whose kernel does not boot is (default: skip)")
