"""harness/splat_proof.py without a guest: judging what a fired splat left in a real kernel log,
the cache, and the blind parser that must stop a run."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import splat_proof

DATA = Path(__file__).parent / "data"
TAINT_WARN, TAINT_DIE = 1 << 9, 1 << 7


def _lines(line: str) -> list[str]:
    return (DATA / f"console-splat-kinds-{line}.log").read_text().splitlines()


@pytest.mark.parametrize("line", ["6.12", "7.2", "7.3"])
def test_a_real_warn_and_bug_are_judged_seen_with_titles_naming_the_module(line: str) -> None:
    lines = _lines(line)
    warn = splat_proof.judge("warn", lines, TAINT_WARN, "k", Path("w"))
    bug = splat_proof.judge("bug", lines, TAINT_DIE, "k", Path("w"))
    proof = splat_proof.Proof("k", "r", True, seen={"warn": warn[:1], "bug": bug[:1]})
    assert splat_proof._judged(proof).proved, (warn, bug)


def test_a_parser_that_sees_nothing_where_the_kernel_warned_is_blind() -> None:
    # What a 7.x WARNING looked like to the 6.x parser: nothing.
    quiet = ["------------[ cut here ]------------", "ringlab_splat: warning requested",
             "Modules linked in: ringlab_splat(OE)", "---[ end trace 0000000000000000 ]---"]
    with pytest.raises(splat_proof.Blind, match="taint bit 9 set"):
        splat_proof.judge("warn", quiet, TAINT_WARN, "sid-cloud", Path("w"))
    # The kernel did not report (or its taint mask is unknown): not proved, not blind.
    assert splat_proof.judge("warn", quiet, 0, "k", Path("w")) == []
    assert splat_proof.judge("warn", quiet, -1, "k", Path("w")) == []


def test_a_title_that_does_not_name_the_site_proves_nothing() -> None:
    proof = splat_proof.Proof("k", "r", True, seen={"warn": ["WARNING at somewhere_else"],
                                                    "bug": ["kernel BUG at ringlab_splat.c:9"]})
    judged = splat_proof._judged(proof)
    assert not judged.proved and "'warn' splat was seen with the title" in judged.why


def test_a_cached_proof_is_used_without_a_guest_and_the_key_follows_the_image(
        tmp_path: Path) -> None:
    image = tmp_path / "vmlinuz"
    image.write_bytes(b"kernel one")
    lab = SimpleNamespace(kernel=lambda name: SimpleNamespace(vmlinuz=image, name=name,
                                                              release="7.2.13"),
                          layout=SimpleNamespace(root=tmp_path / "cache"))
    stored = splat_proof.Proof("k", "7.2.13", True, seen={"warn": ["w"], "bug": ["b"]})
    where = tmp_path / "cache" / "splat-proofs" / f"{splat_proof.key(image)}.json"
    where.parent.mkdir(parents=True)
    where.write_text(json.dumps(asdict(stored)))
    proof = splat_proof.prove(lab, "k", tmp_path / "work")  # type: ignore[arg-type]
    assert proof.proved and proof.cached and proof.seen == stored.seen
    first = splat_proof.key(image)
    image.write_bytes(b"kernel two")
    assert splat_proof.key(image) != first


def test_a_run_reads_its_proof_back_without_the_console(tmp_path: Path) -> None:
    splat_proof.write(splat_proof.Proof("k", "r", False, "no modules", console="x" * 100),
                      tmp_path)
    assert splat_proof.read(tmp_path) == {"kernel": "k", "release": "r", "proved": False,
                                          "why": "no modules", "seen": {}, "cached": False}
    assert splat_proof.read(tmp_path / "none") is None


class _RaceGuest:
    """A guest whose kernel reports a data race when fired: KCSAN's counter goes up and
    `printed` lands in its log."""

    def __init__(self, printed: list[str], counts: bool = True) -> None:
        self.kernel_log: list[str] = []
        self.printed, self.counts, self.races = printed, counts, 0

    def run(self, command: str, timeout: float = 60) -> SimpleNamespace:
        if "echo race" in command:
            self.kernel_log += self.printed
            self.races += self.counts
        out = f"enabled: 1\ndata_races: {self.races}\n" if "kcsan" in command else ""
        return SimpleNamespace(stdout=out, exit_status=0)

    def kmsg(self) -> list[str]:
        return []


def test_a_race_kcsan_counted_but_the_parser_missed_is_blind() -> None:
    quiet = ["==================================================================",
             "KCSAN: something the parser does not know",
             "=================================================================="]
    with pytest.raises(splat_proof.Blind, match="data_races went up"):
        splat_proof.fire_race(_RaceGuest(quiet), "src-7.2-race", Path("w"))  # type: ignore[arg-type]
    # KCSAN counted nothing: the kernel did not report it, not proved, not blind.
    assert splat_proof.fire_race(_RaceGuest(quiet, counts=False), "k", Path("w")) == []  # type: ignore[arg-type]


def test_a_fired_race_needs_its_title_in_the_proof() -> None:
    seen = {"warn": ["WARNING at ringlab_splat.c:56 ringlab_splat_warn"],
            "bug": ["kernel BUG at ringlab_splat.c:9"], "race": ["KCSAN: data-race in a / b"]}
    judged = splat_proof._judged(splat_proof.Proof("k", "r", True, seen=seen))
    assert not judged.proved and "'race' splat" in judged.why
    seen["race"] = ["KCSAN: data-race in ringlab_splat_race_read / ringlab_splat_race_tick"]
    assert splat_proof._judged(splat_proof.Proof("k", "r", True, seen=seen)).proved


def test_a_real_kcsan_report_proves_the_race_kernel_sees_races() -> None:
    lines = _lines("7.2-race")
    start = next(i for i, line in enumerate(lines) if "BUG: KCSAN" in line) - 1
    titles = splat_proof.fire_race(_RaceGuest(lines[start:]), "src-7.2-race",  # type: ignore[arg-type]
                                   Path("w"))
    assert titles == ["KCSAN: data-race in ringlab_splat_race_read / ringlab_splat_race_tick"]
