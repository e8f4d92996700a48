"""`./lab ssh`: the command line parses to the verb's main; it imports no other verb."""
from __future__ import annotations

import subprocess
import sys

from harness import cli, host
from harness.commands import ssh
from harness.paths import REPO


def test_ssh_parses_and_dispatches_to_main() -> None:
    args = cli.build_parser(("ssh",)).parse_args(["ssh", "--kernel", "k", "--", "uname", "-r"])
    assert args.func is ssh.main
    assert (args.command, args.kernel, args.guest_command) == ("ssh", "k", ["uname", "-r"])


def test_the_ssh_verb_does_not_import_the_boot_verb() -> None:
    done = subprocess.run([sys.executable, "-c", "import sys, harness.commands.ssh; "
                           "print('harness.commands.boot' in sys.modules)"],
                          cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_the_verb_declares_no_build_tools_and_logs_to_the_screen() -> None:
    needs = host.verb_needs("ssh")
    assert needs.own_logging is False and needs.host_tools == ()
