"""Splats of a kernel the lab built, decoded to file:line with the tree's own
scripts/decode_stacktrace.sh.

"tracing_buffers_mmap_close+0x51/0x70" says which function; "kernel/trace/trace.c:8274" says
which line, which is what a person fixing the bug reads first. Only a kernel the lab built has
its vmlinux (the make O= folder) and tree at hand; a Debian kernel ships neither. Decoding is
best effort: it is bounded in time, and a failure says "not decoded: why" and never fails the
run.
"""
from __future__ import annotations

import logging
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from harness.kernellog import splats
from harness.kernels.kernel import BootableKernel

log = logging.getLogger(__name__)
SCRIPT = Path("scripts/decode_stacktrace.sh")
TIMEOUT_S = 60.0
# A frame as decode_stacktrace.sh prints it: "remove_vma (mm/vma.c:329)" (or with the offset
# kept, by newer scripts; inlined frames give several places in one pair of parentheses);
# where addr2line found no line: "remove_vma (??:?)", "f (trace.c:?)", or the frame unchanged.
_OUT_FRAME = re.compile(r"(?P<fn>[\w.]+)(?P<off>\+0x[0-9a-f]+/0x[0-9a-f]+)?"
                        r"(?: \((?P<where>(?:[^()]|\([^()]*\))*)\))?(?P<mod> \[\w+\])?\s*$")
_LINE = re.compile(r":\d+")


@dataclass(frozen=True)
class Decoder:
    """How to decode this kernel's addresses: the script of its tree and its vmlinux."""
    script: Path
    vmlinux: Path
    base: Path | None = None        # the source tree, stripped from the paths printed
    modules: Path | None = None     # where the kernel's .ko files are (its build folder)
    timeout_s: float = TIMEOUT_S

    def argv(self) -> list[str]:
        """decode_stacktrace.sh vmlinux [base_path] [modules_path], through bash (an unpacked
        tarball may have lost the script's executable bit)."""
        args = ["bash", str(self.script), str(self.vmlinux)]
        if self.base is not None or self.modules is not None:
            args.append(str(self.base) if self.base is not None else "auto")
        if self.modules is not None:
            args.append(str(self.modules))
        return args


@dataclass(frozen=True)
class Decoded:
    """A splat's frames as file:line ("fn (file:line)"), RIP first, or why not."""
    frames: list[str] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict:
        return {"decoded": self.frames} if self.error is None else \
            {"not_decoded": self.error}


def decoder_for(k: BootableKernel) -> Decoder | str:
    """The decoder of a kernel, or why there is none (a Debian kernel, a removed build)."""
    if k.build_dir is None:
        return f"kernel {k.name} was not built by the lab (no vmlinux at hand)"
    vmlinux = k.build_dir / "vmlinux"
    if not vmlinux.is_file():
        return f"no vmlinux in {k.build_dir} (the build folder was removed or is incomplete)"
    if k.config is not None and k.config_option("DEBUG_INFO") != "y":
        return (f"kernel {k.name} was built without debug info (no CONFIG_DEBUG_INFO: add "
                "CONFIG_DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT=y to a config fragment)")
    source = k.source_dir
    if source is None or not (source / SCRIPT).is_file():
        return f"no {SCRIPT} in the kernel's tree ({source or 'unknown'})"
    return Decoder(source / SCRIPT, vmlinux, base=source, modules=k.build_dir)


def script_input(splat: dict) -> list[str]:
    """The lines to decode from a splat's report dict (splats.Splat.as_dict()): the
    kernel-mode RIP, then each reliable call trace frame."""
    rip = splat.get("rip")
    frames = splats.trace_frames(splat.get("text", "").splitlines())[:32]
    return ([f"RIP: 0010:{rip}"] if rip else []) + [f" {f}" for f in frames]


def parse_output(text: str) -> list[str]:
    """Each frame of the script's output: "fn (file:line)" where it decoded, else the frame
    as it was given ("fn+0x3f/0x60")."""
    frames = []
    for line in text.splitlines():
        m = _OUT_FRAME.search(line)
        if m is None or not (m.group("off") or m.group("where") is not None):
            continue
        where = (m.group("where") or "").strip()
        frames.append(f"{m.group('fn')} ({where})" if _LINE.search(where) else
                      f"{m.group('fn')}{m.group('off') or ''}{m.group('mod') or ''}")
    return frames


def decode(splat: dict, decoder: Decoder) -> Decoded:
    """The splat's RIP and call trace through decode_stacktrace.sh; never raises."""
    lines = script_input(splat)
    if not lines:
        return Decoded(error="the splat has no kernel RIP or call trace to decode")
    try:
        proc = subprocess.run(decoder.argv(), input="\n".join(lines) + "\n",
                              capture_output=True, text=True, errors="replace",
                              timeout=decoder.timeout_s)
    except subprocess.TimeoutExpired:
        return Decoded(error=f"{decoder.script.name} took more than {decoder.timeout_s:g} s")
    except OSError as e:
        return Decoded(error=f"cannot run {decoder.script}: {e.strerror or e}")
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return Decoded(error=f"{decoder.script.name} failed: {last[:200]}")
    frames = parse_output(proc.stdout)
    if not any("(" in f for f in frames):
        return Decoded(error=f"addr2line found no line for any frame in {decoder.vmlinux} "
                             "(built without CONFIG_DEBUG_INFO?)")
    return Decoded(frames)


def with_decoded(found: list[dict], decoder: Decoder | str | None, limit: int = 3
                 ) -> list[dict]:
    """Splat report dicts with "decoded" (or "not_decoded": why) added; the first `limit`
    decoded (each decode runs addr2line per frame: a flood of splats would cost minutes).
    decoder None: no kernel known, nothing added; a str: why this kernel cannot be decoded.
    Dicts that say either already are kept as they are (decoding is done once)."""
    out, done = [], 0
    for d in found:
        if "decoded" in d or "not_decoded" in d or decoder is None:
            out.append(d)
        elif isinstance(decoder, str):
            out.append({**d, "not_decoded": decoder})
        else:
            done += 1
            out.append({**d, **(decode(d, decoder).as_dict() if done <= limit else
                                {"not_decoded": f"only the first {limit} splats are decoded"})})
    return out


def top_frame(splat: dict) -> str | None:
    """The first decoded frame of a report dict ("fn (file:line)"), else None."""
    frames = splat.get("decoded") or []
    return frames[0] if frames else None


def render(splat: dict) -> list[str]:
    """A splat for a person (./lab splats): title, RIP, call trace (decoded where it was),
    the modules tainting the kernel."""
    lines = [splat["title"], f"  RIP: {splat.get('rip') or '(none in kernel mode)'}"]
    frames = splat.get("decoded") or splats.trace_frames(splat.get("text", "").splitlines())
    lines.append("  call trace:" if frames else "  call trace: (none)")
    lines += [f"    {f}" for f in frames]
    if splat.get("not_decoded"):
        lines.append(f"  not decoded: {splat['not_decoded']}")
    lines.append(f"  tainting modules: {', '.join(splat.get('tainting_modules') or []) or 'none'}")
    return lines
