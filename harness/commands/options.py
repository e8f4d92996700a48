"""The option groups several `./lab` verbs share, written once: the kernel (every form it can
be named in), a test selection, pytest arguments, benchmark runs."""
from __future__ import annotations

import argparse

KERNEL_FORMS = ("a kernel of lab.yaml, debian:SUITE/FLAVOUR[=VERSION], a kernel image "
                "(bzImage, vmlinuz, arm64 Image), a make O= folder, or a kernel source tree "
                "(built with ringbuf.config)")


def kernel(parser: argparse.ArgumentParser, what: str = "the kernel") -> None:
    """--kernel and --modules (for an image): harness/config.py command_line_kernel()."""
    parser.add_argument("--kernel", metavar="KERNEL", help=f"{what}: {KERNEL_FORMS}")
    parser.add_argument("--modules", metavar="DIR", help="with --kernel IMAGE: its modules "
                        "(lib/modules/<release> or the folder holding it; default: found beside "
                        "the image)")


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
