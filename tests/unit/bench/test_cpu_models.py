"""The CPU models bench: models per arch, what a model's boots say."""
from __future__ import annotations

from pathlib import Path

from harness import arch as arches
from harness.bench import cpu_models


def test_models_default_per_arch_and_parse_on_semicolons() -> None:
    for a in arches.ARCHES.values():
        assert cpu_models.parse_models(None, a) == cpu_models.parse_models("", a) == \
            a.tcg_cpu_models
    assert cpu_models.parse_models("max,pauth-impdef=on; neoverse-n1;", arches.ARM64) == \
        ("max,pauth-impdef=on", "neoverse-n1")


def test_a_model_line_says_which_boots_were_not_clean() -> None:
    r = cpu_models.ModelRuns("max", [30.0, 36.0, 41.0], ["run 4: WARNING at x"])
    assert "median  36.00" in r.line() and "1 not clean: run 4: WARNING at x" in r.line()
    assert "no clean boot" in cpu_models.ModelRuns("cortex-a72").line()


def test_a_console_log_name_has_no_comma_or_equals() -> None:
    log = cpu_models.console_name(Path("/o"), "max,pauth-impdef=on", 2)
    assert log == Path("/o/console-max_pauth-impdef-on-2.log")
