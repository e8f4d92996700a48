"""`./lab splats CONSOLE.LOG`: the command line parses to the verb's main; main reads a real
console log of tests/unit/data offline and exits 1 with each splat printed, 0 with none; a
missing or binary file is the user's error; --kernel decodes only with a kernel that has a
vmlinux (a `build` kernel, else an error listing them), through the decoder of the kernel the
Lab prepared (a fake here: no kernel is fetched or built)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import cli, host
from harness.commands import splats
from harness.errors import LabError
from harness.kernellog import decode

DATA = Path(__file__).resolve().parent.parent / "data"
WARN_LOG = DATA / "console-trace-mmap-warn-6.12.log"  # three tracing_buffers_mmap_close WARNs
BOOT_LOG = DATA / "console-boot-6.12.log"             # a clean boot
KINDS_LOG = DATA / "console-splat-kinds-6.12.log"     # ten splats, one kind after another


def _lab_yaml(tmp_path: Path) -> Path:
    tree = tmp_path / "linux"
    tree.mkdir()
    path = tmp_path / "lab.yaml"
    path.write_text(f"default_kernel: deb\nkernels:\n  mine:\n    build:\n      tree: {tree}\n"
                    "  deb:\n    debian: {suite: trixie, flavour: cloud-amd64}\n")
    return path


def _main(*argv: str) -> int:
    return splats.main(cli.build_parser(("splats",)).parse_args(list(argv)))


def test_splats_parses_and_dispatches_to_main() -> None:
    args = cli.build_parser(("splats",)).parse_args(["splats", "c.log", "--kernel", "mine"])
    assert args.func is splats.main and (args.log, args.kernel) == ("c.log", "mine")


def test_the_verb_declares_no_build_tools_and_logs_to_the_screen() -> None:
    needs = host.verb_needs("splats")
    assert needs.own_logging is False and needs.host_tools == ()
    assert (splats.OWN_LOGGING, splats.HOST_TOOLS) == (False, ())


def test_each_splat_of_a_console_log_is_printed_and_the_exit_is_1(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _main("splats", str(WARN_LOG)) == 1
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("splat ")] == [
        f"splat {i} of 3: WARNING at kernel/trace/trace.c:8274 tracing_buffers_mmap_close"
        for i in (1, 2, 3)]
    assert out.count("  RIP: tracing_buffers_mmap_close+0x51/0x70\n") == 3
    assert "  call trace:\n    remove_vma+0x2f/0x70\n" in out
    assert out.endswith(f"3 splat(s) in {WARN_LOG}\n")


def test_a_clean_boot_has_none_and_the_exit_is_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert _main("splats", str(BOOT_LOG)) == 0
    assert capsys.readouterr().out == f"0 splat(s) in {BOOT_LOG}\n"


def test_a_kernel_is_not_even_looked_up_when_there_is_nothing_to_decode(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # lab.yaml does not exist: reading it would be an error.
    assert _main("--lab-config", str(tmp_path / "none.yaml"), "splats", str(BOOT_LOG),
                 "--kernel", "mine") == 0


def test_a_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(LabError, match=r"cannot read the console log .*nope\.log: No such file"):
        _main("splats", str(tmp_path / "nope.log"))


def test_a_binary_file_is_not_a_console_log() -> None:
    binary = DATA / "trace_pipe_raw-6.12.bin"
    with pytest.raises(LabError, match="is not a console log"):
        _main("splats", str(binary))


def test_invalid_utf8_is_read_with_replacements(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    log.write_bytes(b"[    0.1] hello \xff\xfe world\n")
    assert "\ufffd" in splats.read_console_log(log)


def test_decoding_with_a_kernel_without_a_vmlinux_lists_the_build_kernels(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(splats, "Lab", lambda cfg: pytest.fail("no kernel to prepare"))
    with pytest.raises(LabError, match="--kernel deb: not a `build` kernel or a make O= folder"
                       r".*the build kernels of .* are: mine$"):
        _main("--lab-config", str(_lab_yaml(tmp_path)), "splats", str(WARN_LOG),
              "--kernel", "deb")


def test_a_build_kernel_decodes_with_the_decoder_of_the_kernel_prepared(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    kernel = SimpleNamespace(name="mine")
    asked: list[str] = []

    class FakeLab:
        def __init__(self, cfg: object) -> None:
            pass

        def kernel(self, name: str) -> object:
            asked.append(name)
            return kernel
    monkeypatch.setattr(splats, "Lab", FakeLab)
    monkeypatch.setattr(decode, "decoder_for",
                        lambda k: f"kernel {k.name} was built without debug info")
    assert _main("--lab-config", str(_lab_yaml(tmp_path)), "splats", str(KINDS_LOG),
                 "--kernel", "mine") == 1
    assert asked == ["mine"]
    out = capsys.readouterr().out
    # Every splat, not only decode's default first three, is given to the decoder.
    assert out.count("  not decoded: kernel mine was built without debug info") == 10


def test_every_splat_is_decoded_not_only_the_first_few(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """decode.with_decoded decodes the first three by default (the run's report); the verb a
    person asks for a log's frames decodes them all."""
    decoder = object()

    class FakeLab:
        def __init__(self, cfg: object) -> None:
            pass

        def kernel(self, name: str) -> object:
            return SimpleNamespace(name=name)
    monkeypatch.setattr(splats, "Lab", FakeLab)
    monkeypatch.setattr(decode, "decoder_for", lambda k: decoder)
    decoded: list[str] = []

    def decode_one(splat: dict, d: object) -> SimpleNamespace:
        assert d is decoder
        decoded.append(splat["title"])
        return SimpleNamespace(as_dict=lambda: {"decoded": ["fire (ringlab_splat.c:1)"]})
    monkeypatch.setattr(decode, "decode", decode_one)
    assert _main("--lab-config", str(_lab_yaml(tmp_path)), "splats", str(KINDS_LOG),
                 "--kernel", "mine") == 1
    assert len(decoded) == 10
    out = capsys.readouterr().out
    assert out.count("    fire (ringlab_splat.c:1)\n") == 10 and "not decoded" not in out
