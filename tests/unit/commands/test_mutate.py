"""`./lab mutate`: the command line parses to the verb's main."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import cli, host
from harness.errors import LabError
from harness.commands import mutate


def test_mutate_parses_and_dispatches_to_main() -> None:
    args = cli.build_parser(("mutate",)).parse_args(
        ["mutate", "--kernel", "src-6.12-min", "--mutants", "00[1-3]*", "-k", "mmap",
         "--whole-suite", "--explore", "2m", "--selftests", "--", "-x"])
    assert args.func is mutate.main
    assert (args.kernel, args.mutants, args.k, args.whole_suite, args.explore, args.selftests,
            args.jobs, args.pytest_args) == (
        "src-6.12-min", "00[1-3]*", "mmap", True, "2m", True, 1, ["-x"])


def test_the_verb_declares_its_own_logging_and_the_build_tools() -> None:
    needs = host.verb_needs("mutate")
    assert needs.own_logging is True and needs.host_tools == ("build",)


def test_seeds_and_steer_choose_the_explorers_runs() -> None:
    assert mutate.explorer_runs("1", "off", False) == ((1,), (False,))
    assert mutate.explorer_runs("0,1,2,1", "both", True) == ((0, 1, 2), (False, True))
    assert mutate.explorer_runs("3", "on", True) == ((3,), (True,))


@pytest.mark.parametrize("seeds, steer, exploring, says", [
    ("0,x", "off", True, "--seeds '0,x': expected whole numbers"),
    ("0,1", "off", False, "add --explore BUDGET"),
    ("1", "both", False, "add --explore BUDGET"),
])
def test_bad_seeds_or_steer_give_one_clear_error(seeds: str, steer: str, exploring: bool,
                                                 says: str) -> None:
    with pytest.raises(LabError, match=re.escape(says)):
        mutate.explorer_runs(seeds, steer, exploring)


def test_steer_is_one_of_its_modes_on_the_command_line() -> None:
    args = cli.build_parser(("mutate",)).parse_args(
        ["mutate", "--explore", "30s", "--seeds", "0,1,2", "--steer", "both"])
    assert (args.seeds, args.steer) == ("0,1,2", "both")
    with pytest.raises(SystemExit):
        cli.build_parser(("mutate",)).parse_args(["mutate", "--steer", "sometimes"])


def test_actors_and_loads_reach_the_plan_and_need_explore(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    """Race mutants are judged by the explorer with actors and loads (issue 43)."""
    plans: list = []
    monkeypatch.setattr(mutate.options, "config_and_kernel", lambda args: (
        SimpleNamespace(), SimpleNamespace(name="src-7.2-race")))
    monkeypatch.setattr(mutate, "select", lambda catalog, names: [])
    monkeypatch.setattr(mutate, "catalog", lambda: [])
    monkeypatch.setattr(mutate.run_folder, "open_run", lambda cfg, args, name: tmp_path)
    monkeypatch.setattr(mutate.session, "run", lambda plan: plans.append(plan) or 0)
    parse = cli.build_parser(("mutate",)).parse_args
    mutate.main(parse(["mutate", "--explore", "2m", "--actors", "2", "--load", "marker,mapper"]))
    assert (plans[0].actors, plans[0].load) == (2, "marker,mapper")
    with pytest.raises(LabError, match="add --explore BUDGET"):
        mutate.main(parse(["mutate", "--load", "marker"]))
    with pytest.raises(LabError, match="'nope' is not one of"):
        mutate.main(parse(["mutate", "--explore", "2m", "--load", "nope"]))
