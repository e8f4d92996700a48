"""Every verb declares what it needs (issue 32 §3): OWN_LOGGING for harness/cli.py, HOST_TOOLS
(and HOST_TOOLS_WITH) for ./lab's host check, which reads them as text (harness/host.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli, host

# Today's needs, as the `lab` script's case list and cli.py's OWN_LOGGING tuple had them.
OWN_LOGGING = {"run", "explore", "review", "bisect", "mutate", "nightly", "report", "coverage"}
BUILDS = {"selftest", "build", "review", "bisect", "bisect-step", "mutate", "nightly", "report",
          "coverage"}


@pytest.mark.parametrize("verb", cli.VERBS)
def test_each_verb_declares_what_it_needs(verb: str) -> None:
    needs = host.verb_needs(verb)  # both declared, literals, valid group names
    module = cli.verb_module(verb)
    # What ./lab reads as text is what the module holds when imported.
    assert module.OWN_LOGGING is needs.own_logging
    assert module.HOST_TOOLS == needs.host_tools
    assert getattr(module, "HOST_TOOLS_WITH", {}) == needs.host_tools_with
    assert needs.own_logging == (verb in OWN_LOGGING)
    assert ("build" in needs.host_tools) == (verb in BUILDS)
    assert ("selftest" in needs.host_tools) == (verb == "selftest")


def test_run_selftests_builds() -> None:
    assert host.verb_needs("run").host_tools_with == {"--selftests": ("build",)}


def test_every_verb_module_is_listed() -> None:
    """A module of harness/commands/ that declares HOST_TOOLS is a verb: it is in VERBS (which
    stays a list for the help's order), and each verb of VERBS has its module."""
    declaring = {p.stem.replace("_", "-") for p in Path(host.COMMANDS).glob("*.py")
                 if "HOST_TOOLS" in host.module_constants(p, ("HOST_TOOLS",))}
    assert declaring == set(cli.VERBS)
    assert host.verbs() == cli.VERBS
