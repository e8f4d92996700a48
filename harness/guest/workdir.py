"""A guest's folder (its disk overlay, QMP socket and QEMU pidfile), and the sweep of the folders
that killed labs left behind.

A lab killed with SIGKILL runs no cleanup: its QEMU goes with it (PR_SET_PDEATHSIG), its folder
stays. So each folder says whose it is (the `owner` file: the lab's pid and start time, the
host's boot, the pid namespace), and the next lab that boots a guest, and `./lab gc`, remove the
folders whose lab and QEMU are both gone. A pid is taken as alive only if it is still the same
process (its start time, for the lab; its command line naming the folder, for QEMU): a pid the
kernel handed to another process since keeps nothing.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness import cache

log = logging.getLogger(__name__)

PREFIX = "ringlab-guest-"
OWNER = "owner"
QEMU_PIDFILE = "qemu.pid"  # written by QEMU itself (-pidfile, harness/guest/guest.py _spec)
# A folder without a readable owner file was made by a lab from before owner files, or by
# make() this very instant: it is removed only once this old (and never while its QEMU runs).
UNOWNED_GRACE_S = 600.0


@dataclass(frozen=True)
class Process:
    """A process as /proc names it: its pid and start time (clock ticks after the host's boot),
    so that a recycled pid is not taken for the process that had it."""
    pid: int
    start: int

    @classmethod
    def of(cls, pid: int) -> Process | None:
        """The running process `pid`; None if there is none (a zombie has finished: None)."""
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (OSError, ValueError):
            return None
        # The command name (field 2) may hold spaces and parentheses: fields count from its end.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) < 20 or fields[0] in ("Z", "X", "x"):
            return None
        return cls(pid, int(fields[19]))  # field 22, starttime

    def alive(self) -> bool:
        """Still running, and still this process (not another one that got its pid)."""
        return Process.of(self.pid) == self


def boot_id() -> str:
    """This boot of the host: a folder from before a reboot has no live process, whatever
    its pids say."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def pid_namespace() -> str:
    """Our pid namespace: a lab in another one (a container sharing /tmp) is not in our /proc,
    so its folders are never judged from here."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


@dataclass(frozen=True)
class Owner:
    """Who made a guest folder: what `owner` holds."""
    lab: Process
    boot_id: str
    pid_ns: str

    @classmethod
    def me(cls) -> Owner | None:
        """This process as an owner; None without /proc (then nothing can be judged)."""
        me = Process.of(os.getpid())
        return cls(me, boot_id(), pid_namespace()) if me else None

    def to_json(self) -> str:
        return json.dumps({"pid": self.lab.pid, "start": self.lab.start,
                           "boot_id": self.boot_id, "pid_ns": self.pid_ns}) + "\n"

    @classmethod
    def read(cls, folder: Path) -> Owner | None:
        """The folder's owner; None if it has no owner file or an unreadable one."""
        try:
            d = json.loads((folder / OWNER).read_text())
            return cls(Process(int(d["pid"]), int(d["start"])), str(d["boot_id"]),
                       str(d["pid_ns"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None


def make(root: Path | None = None) -> Path:
    """A new guest folder under `root` (default: the temp dir, $TMPDIR), its owner file
    written before anyone can see it half made (through a temporary name)."""
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))
    try:
        if (me := Owner.me()) is not None:
            cache.write_atomic(folder / OWNER, me.to_json().encode())
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def qemu_of(folder: Path) -> Process | None:
    """The QEMU running for `folder`: the pid in its pidfile, if that process's command line
    names the folder (a recycled pid does not)."""
    try:
        pid = int((folder / QEMU_PIDFILE).read_text().strip())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    if f"/{folder.name}/".encode() not in argv:
        return None
    return Process.of(pid)


@dataclass(frozen=True)
class Orphan:
    """A guest folder nothing uses any more, and why the sweep says so."""
    path: Path
    why: str


def judge(folder: Path, me: Owner, now: float) -> str | None:
    """Why `folder` is an orphan; None while a lab or a QEMU may still use it."""
    owner = Owner.read(folder)
    if owner is not None and owner.pid_ns != me.pid_ns:
        return None  # its processes are not in our /proc: nothing can be told from here
    if owner is not None and owner.boot_id != me.boot_id:
        return "left from before the host's last boot"
    if owner is not None and owner.lab.alive():
        return None
    if qemu_of(folder) is not None:
        return None  # a QEMU outliving its lab is odd, but its folder is still in use
    if owner is not None:
        return f"its lab (pid {owner.lab.pid}) and its QEMU are gone"
    age = now - folder.stat().st_mtime
    if age < UNOWNED_GRACE_S:
        return None
    return f"no owner, no QEMU, untouched for {age / 60:.0f} min"


def find_orphans(root: Path | None = None) -> list[Orphan]:
    """The guest folders under `root` (default: the temp dir) that this user's labs left."""
    base = Path(root or tempfile.gettempdir())
    me, now, uid = Owner.me(), time.time(), os.getuid()
    if me is None:
        return []
    found = []
    try:
        folders = sorted(base.glob(f"{PREFIX}*"))
    except OSError:
        return []
    for folder in folders:
        try:
            st = folder.lstat()
            if not folder.is_dir() or folder.is_symlink() or st.st_uid != uid:
                continue
            why = judge(folder, me, now)
        except OSError as e:  # gone meanwhile, or not ours to read: left alone
            log.debug("guest folder %s not judged: %s", folder, e)
            continue
        if why is not None:
            found.append(Orphan(folder, why))
    return found


def remove(orphans: list[Orphan]) -> list[Path]:
    """Remove the orphans' folders (another sweep may remove one first: fine)."""
    for o in orphans:
        shutil.rmtree(o.path, ignore_errors=True)
    return [o.path for o in orphans if not o.path.exists()]


def sweep_orphans(root: Path | None = None) -> list[Path]:
    """Remove the guest folders killed labs left under `root` (default: the temp dir); cheap
    (one listing, a few small reads), so every boot does it first. The folders removed."""
    orphans = find_orphans(root)
    removed = remove(orphans)
    for o in orphans:
        if o.path in removed:
            log.info("removed the guest folder %s: %s", o.path, o.why)
    return removed
