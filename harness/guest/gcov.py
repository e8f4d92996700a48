"""The gcov counters of a guest (a coverage kernel, harness/kernels/gcov.py): zeroed when it is handed out (what the boot ran is not a
test's), read back before it stops, into a folder per guest beside its console log. A guest
that crashed cannot be read: a `.lost` file says so, and the coverage report counts it."""
from __future__ import annotations

import base64
import io
import logging
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.guest.ssh import CommandResult

log = logging.getLogger(__name__)

GCOV_ROOT = "/sys/kernel/debug/gcov"
FOLDER = "gcov"  # beside the guest's console log, in the run's report folder

_MOUNT = "mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug"
RESET = f"{_MOUNT}; echo 1 > {GCOV_ROOT}/reset"
# The .gcda files under GCOV_ROOT as a tar, base64 on stdout: debugfs files report size 0,
# so tar(1) would store them empty; python3 is on every guest (harness/guest/rootfs.py).
DUMP = _MOUNT + "; python3 -c '" + """
import base64, io, os, sys, tarfile
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as tar:
    for d, _, files in os.walk("%s"):
        for f in files:
            if f.endswith(".gcda"):
                data = open(os.path.join(d, f), "rb").read()
                info = tarfile.TarInfo(os.path.relpath(os.path.join(d, f), "%s"))
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
sys.stdout.write(base64.b64encode(buf.getvalue()).decode())
""".replace("%s", GCOV_ROOT) + "'"


class Shell(Protocol):
    """A guest, as far as this module needs one (harness/guest/guest.py Guest)."""
    def run(self, command: str, timeout: float = 60.0, user: str = "root") -> CommandResult: ...


@dataclass(frozen=True)
class Dump:
    """What one guest's counters were written to: a folder of .gcda files, by their path
    under GCOV_ROOT (the build folder's absolute path, then the object's)."""
    folder: Path
    files: int


def reset(guest: Shell) -> None:
    """Zero every counter: what ran before this is not counted."""
    r = guest.run(RESET, timeout=30)
    if r.exit_status != 0:
        raise OSError(f"gcov reset failed: {r.stderr.strip()[:200]}")


def dump(guest: Shell, into: Path) -> Dump:
    """Read the guest's .gcda files into the new folder `into`, written whole or not at all."""
    r = guest.run(DUMP, timeout=60)
    if r.exit_status != 0:
        raise OSError(f"reading {GCOV_ROOT} failed: {r.stderr.strip()[:200]}")
    return unpack(base64.b64decode(r.stdout), into)


def unpack(tar_gz: bytes, into: Path) -> Dump:
    """The .gcda files of a dump's tar into `into` (made under a temporary name, renamed)."""
    scratch = into.with_name(into.name + ".part")
    scratch.mkdir(parents=True)
    n = 0
    with tarfile.open(fileobj=io.BytesIO(tar_gz), mode="r:gz") as tar:
        for m in tar.getmembers():
            if not m.isfile() or not m.name.endswith(".gcda") or m.name.startswith("/") \
                    or ".." in Path(m.name).parts:
                continue
            f = tar.extractfile(m)
            assert f is not None
            (scratch / m.name).parent.mkdir(parents=True, exist_ok=True)
            (scratch / m.name).write_bytes(f.read())
            n += 1
    scratch.rename(into)
    return Dump(into, n)


def guest_folder(console_log: Path, name: str) -> Path:
    """Where a guest's dump goes: <report folder>/gcov/<time>-<guest>."""
    return console_log.parent / FOLDER / f"{time.strftime('%H%M%S')}-{name}"


def lost(folder: Path, why: str) -> None:
    """Record that a guest's counters could not be read (it crashed, SSH was gone)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.with_name(folder.name + ".lost").write_text(why + "\n")
