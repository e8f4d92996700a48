"""probes/trace_abi.py judge_abi(): which tracefs mapping ABI the facts of one mmap and the
GET_READER ioctls show (the trace probe's `abi` check and the capabilities probe share them)."""
from __future__ import annotations


import trace_abi  # from probes/ (pytest's pythonpath): guest-side, stdlib only
from trace_abi import MappingFacts, judge_abi

MAINLINE, OLD = (name for name, _ in trace_abi.GET_READERS)


def test_the_two_get_readers_newest_first() -> None:
    assert trace_abi.GET_READERS == ((MAINLINE, 0x5220), (OLD, 0x5401))
    assert (MAINLINE, OLD) == ("mainline _IO('R',0x20)", "pre-6.10 _IO('T',0x1)")


def test_no_mmap() -> None:
    assert judge_abi(MappingFacts("ENODEV")) == {
        "abi": "none", "why": "kernel has no trace_pipe_raw mmap: ENODEV"}


def test_mainline() -> None:
    facts = MappingFacts(None, (4096, 80, 4096, 9), MAINLINE, {}, 4096)
    assert judge_abi(facts) == {"abi": "mainline", "why": "GET_READER _IO('R',0x20) answers",
                                "meta_page_size": 4096}


def test_only_the_old_get_reader_answers() -> None:
    rc = MappingFacts(None, (4096, 80, 4096, 9), OLD, {MAINLINE: "ENOTTY"}, 4096)
    assert judge_abi(rc, page=4096) == {
        "abi": "v6.10-rc", "why": "only the pre-6.10 GET_READER _IO('T',0x1) answers "
        "(_IO('R',0x20): ENOTTY); first meta word 4096"}
    rfc = MappingFacts(None, (3, 0, 0, 0), OLD, {MAINLINE: "ENOTTY"}, 3)
    assert judge_abi(rfc, page=4096)["abi"] == "rfc"


def test_neither_answers() -> None:
    facts = MappingFacts(None, (0, 0, 0, 0), None, {MAINLINE: "ENOTTY", OLD: "EINVAL"})
    assert judge_abi(facts) == {
        "abi": "unknown", "why": "trace_pipe_raw maps but neither GET_READER answers: "
        "_IO('R',0x20) ENOTTY, _IO('T',0x1) EINVAL"}
