"""Splats decoded to file:line (harness/kernellog/decode.py) with a fake decode_stacktrace.sh, and
`./lab splats` parsing real console logs (tests/unit/data) offline."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness import cli
from harness.kernellog import decode, splats
from harness.kernels.kernel import BootableKernel
from harness.results.summary import splat_line as _splat_line

DATA = Path(__file__).resolve().parents[1] / "data"
WARN_LOG = DATA / "console-trace-mmap-warn-6.12.log"

# Records its argv and stdin, answers like the real script on a kernel with debug info: the
# kernel-mode frames with (file:line), one it cannot place left as it was.
FAKE_SCRIPT = r"""#!/bin/bash
here=$(dirname "$0")
printf '%s\n' "$@" > "$here/argv"
cat > "$here/stdin"
echo "RIP: 0010:tracing_buffers_mmap_close (kernel/trace/trace.c:8274)"
echo " remove_vma (mm/vma.c:329)"
echo " vms_complete_munmap_vmas (mm/vma.c:1176 (discriminator 1))"
echo " do_vmi_align_munmap+0x1a2/0x1e0"
"""


def _kernel(tmp_path: Path, script: str = FAKE_SCRIPT, debug_info: bool = True
            ) -> BootableKernel:
    src, out = tmp_path / "src", tmp_path / "out"
    (src / "scripts").mkdir(parents=True)
    (src / "scripts/decode_stacktrace.sh").write_text(script)
    out.mkdir()
    (out / "vmlinux").write_bytes(b"\x7fELF")
    (out / ".config").write_text("CONFIG_DEBUG_INFO=y\n" if debug_info else
                                 "CONFIG_DEBUG_INFO_NONE=y\n")
    return BootableKernel(name="built", release="6.12.107", vmlinuz=out / "bzImage",
                          initramfs=out / "initramfs.gz", modules_image=None,
                          config=out / ".config", description="built", build_dir=out,
                          source_dir=src)


def _warning() -> dict:
    return splats.find(WARN_LOG.read_text().splitlines())[0].as_dict()


def test_the_script_gets_vmlinux_tree_and_build_folder_and_the_kernel_frames(tmp_path) -> None:
    k = _kernel(tmp_path)
    decoder = decode.decoder_for(k)
    assert isinstance(decoder, decode.Decoder)
    [d] = decode.with_decoded([_warning()], decoder)
    scripts = tmp_path / "src/scripts"
    assert (scripts / "argv").read_text().split() == [
        str(tmp_path / "out/vmlinux"), str(tmp_path / "src"), str(tmp_path / "out")]
    fed = (scripts / "stdin").read_text().splitlines()
    assert fed[0] == "RIP: 0010:tracing_buffers_mmap_close+0x51/0x70"
    assert fed[1] == " remove_vma+0x2f/0x70" and len(fed) == 1 + 8  # the reliable frames only
    assert d["decoded"] == ["tracing_buffers_mmap_close (kernel/trace/trace.c:8274)",
                            "remove_vma (mm/vma.c:329)",
                            "vms_complete_munmap_vmas (mm/vma.c:1176 (discriminator 1))",
                            "do_vmi_align_munmap+0x1a2/0x1e0"]
    assert decode.top_frame(d) == "tracing_buffers_mmap_close (kernel/trace/trace.c:8274)"
    assert _splat_line(d) == ("splat: WARNING at kernel/trace/trace.c:8274 tracing_buffers_"
                              "mmap_close at tracing_buffers_mmap_close "
                              "(kernel/trace/trace.c:8274)")
    assert json.loads(json.dumps(d)) == d  # it goes into summary.json as it is


def test_nested_parentheses_of_a_discriminator_are_parsed() -> None:
    # The real script prints addr2line's "(discriminator N)" inside the frame's parentheses.
    assert decode.parse_output(" f (mm/vma.c:1176 (discriminator 1))\n") == \
        ["f (mm/vma.c:1176 (discriminator 1))"]


@pytest.mark.parametrize("script, why", [
    ("#!/bin/bash\necho 'ERROR! vmlinux image must be specified' >&2\nexit 1\n",
     "decode_stacktrace.sh failed: ERROR! vmlinux image must be specified"),
    ("#!/bin/bash\ncat >/dev/null\necho 'RIP: 0010:f (trace.c:?)'\necho ' g (??:?)'\n",
     "addr2line found no line for any frame"),
])
def test_a_failed_decode_says_why_and_raises_nothing(tmp_path, script: str, why: str) -> None:
    [d] = decode.with_decoded([_warning()], decode.decoder_for(_kernel(tmp_path, script)))
    assert "decoded" not in d and d["not_decoded"].startswith(why)
    assert "(not decoded: " in _splat_line(d)


def test_a_hanging_script_is_cut_off(tmp_path) -> None:
    k = _kernel(tmp_path, "#!/bin/bash\nsleep 30\n")
    decoder = dataclasses.replace(decode.decoder_for(k), timeout_s=0.5)
    [d] = decode.with_decoded([_warning()], decoder)
    assert d["not_decoded"] == "decode_stacktrace.sh took more than 0.5 s"


def test_kernels_that_cannot_be_decoded_say_why(tmp_path) -> None:
    k = _kernel(tmp_path, debug_info=False)
    assert "without debug info" in decode.decoder_for(k)
    debian = dataclasses.replace(k, build_dir=None, source_dir=None)
    assert "not built by the lab" in decode.decoder_for(debian)
    (tmp_path / "out/vmlinux").unlink()
    assert "no vmlinux" in decode.decoder_for(_kernel_without_debug_check(k))
    [d] = decode.with_decoded([_warning()], decode.decoder_for(debian))
    assert d["not_decoded"].startswith("kernel built was not built by the lab")


def _kernel_without_debug_check(k: BootableKernel) -> BootableKernel:
    return dataclasses.replace(k, config=None)


def test_only_the_first_splats_are_decoded_and_once(tmp_path) -> None:
    decoder = decode.decoder_for(_kernel(tmp_path))
    found = [s.as_dict() for s in splats.find(WARN_LOG.read_text().splitlines())]
    out = decode.with_decoded(found, decoder, limit=1)
    assert "decoded" in out[0] and out[1]["not_decoded"] == "only the first 1 splats are decoded"
    (tmp_path / "src/scripts/argv").unlink()
    assert decode.with_decoded(out, decoder) == out  # already said: no second run
    assert not (tmp_path / "src/scripts/argv").exists()


def test_lab_splats_prints_each_splat_of_a_real_log_and_exits_1(capsys) -> None:
    assert cli.main(["splats", str(WARN_LOG)]) == 1
    out = capsys.readouterr().out
    assert out.count("WARNING at kernel/trace/trace.c:8274 tracing_buffers_mmap_close") == 3
    assert "  RIP: tracing_buffers_mmap_close+0x51/0x70" in out
    assert "    remove_vma+0x2f/0x70" in out and "tainting modules: none" in out
    assert out.rstrip().endswith(f"3 splat(s) in {WARN_LOG}")


def test_lab_splats_on_a_clean_boot_exits_0(capsys) -> None:
    assert cli.main(["splats", str(DATA / "console-boot-6.12.log")]) == 0
    assert "0 splat(s)" in capsys.readouterr().out


def test_lab_splats_names_the_stalled_cpu_of_a_real_rcu_stall(capsys) -> None:
    assert cli.main(["splats", str(DATA / "console-rcu-stall-6.12.log")]) == 1
    assert "rcu: INFO:" in capsys.readouterr().out


@pytest.mark.parametrize("name, why", [("missing.log", "cannot read the console log"),
                                       ("binary.log", "is not a console log")])
def test_lab_splats_on_a_bad_file_is_one_error_line(tmp_path, capsys, name, why) -> None:
    (tmp_path / "binary.log").write_bytes(b"\x00\x01ELF")
    assert cli.main(["splats", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("lab: error: ") and why in err[0]


def test_lab_splats_decodes_only_with_a_build_kernel(tmp_path, capsys) -> None:
    config = tmp_path / "lab.yaml"
    config.write_text("default_kernel: deb\nkernels:\n  deb:\n    debian: {suite: trixie, "
                      "flavour: cloud-amd64}\n")
    assert cli.main(["--lab-config", str(config), "splats", str(WARN_LOG), "--kernel",
                     "deb"]) == 2
    assert "not a `build` kernel" in capsys.readouterr().err
