"""The guest `./lab boot` keeps up, for `./lab ssh` and `./lab boot --stop` to find: its state
file (written once the guest is up, removed when it goes), the lab process keeping it up
(in this process, or detached in a session of its own), and stopping it from another shell.

Everything here works from the cache's layout, not a Lab: the guest layer may not reach up
for one, and a state file needs nothing more (harness/runs/interactive.py boots the guest)."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness import cache
from harness.errors import LabError
from harness.guest import workdir as guest_folders
from harness.guest.guest import Guest

log = logging.getLogger("ringlab")
# --stop: how long the lab is given to stop its guest (SIGTERM, its Ctrl-C) before SIGKILL, and
# then its QEMU to go (PR_SET_PDEATHSIG kills it with the lab) before it is killed too.
STOP_S = 60.0
QEMU_GONE_S = 10.0
POLL_S = 0.2


@dataclass(frozen=True)
class BootedGuest:
    """The guest `./lab boot` keeps up, as its state file says: how `./lab ssh` reaches it and
    what `./lab boot --stop` stops (the lab, its QEMU, its folder)."""
    pid: int  # the lab keeping the guest up
    start: int  # its start time (guest_folders.Process): a recycled pid is not taken for it
    port: int
    key: str
    host_key: str
    kernel: str
    release: str
    workdir: str
    qemu_pid: int | None
    qemu_start: int | None
    detached: bool
    ssh: str  # the OpenSSH command line
    banner: str  # what the lab printed once the guest was up

    def lab(self) -> guest_folders.Process:
        return guest_folders.Process(self.pid, self.start)

    def qemu(self) -> guest_folders.Process | None:
        if self.qemu_pid is None or self.qemu_start is None:
            return None
        return guest_folders.Process(self.qemu_pid, self.qemu_start)


@dataclass(frozen=True)
class BootOptions:
    """What `./lab boot` was typed with that its detached lab must be given again."""
    kernel: str | None = None
    cpus: int | None = None
    cmdline: str | None = None
    refresh: bool = False
    gdb: bool = False
    symbols: bool = False
    lab_config: str | None = None
    verbose: bool = False

    def detached_argv(self) -> list[str]:
        """The command line of the detached lab: these options, and --detached-child."""
        argv = [sys.executable, "-m", "harness.cli"] + (["-v"] if self.verbose else [])
        if self.lab_config:
            argv.append(f"--lab-config={self.lab_config}")
        argv += ["boot", "--detached-child"]
        argv += [f"--{name}={value}" for name, value in (
            ("kernel", self.kernel), ("cpus", self.cpus), ("cmdline", self.cmdline))
            if value is not None]
        return argv + [f"--{name}" for name in ("refresh", "gdb", "symbols")
                       if getattr(self, name)]


def state_path(layout: cache.Layout) -> Path:
    """Where the booted guest is described for `./lab ssh` (removed when it stops)."""
    return layout.booted_guest()


def detached_log(layout: cache.Layout) -> Path:
    """What the detached lab prints (its boot's progress, its errors) goes there."""
    return state_path(layout).with_name("booted.log")


def read_state(layout: cache.Layout) -> BootedGuest | None:
    """The guest the state file describes, running or not; None without a readable one."""
    try:
        d = json.loads(state_path(layout).read_text())
        return BootedGuest(**{f.name: d[f.name] for f in dataclasses.fields(BootedGuest)})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def running(layout: cache.Layout) -> BootedGuest | None:
    """The guest of `./lab boot` if its lab still runs (the same process, not its pid's heir)."""
    state = read_state(layout)
    return state if state is not None and state.lab().alive() else None


def ssh_argv(layout: cache.Layout, port: int, key: str, host_key: str) -> list[str]:
    """OpenSSH's command line to the guest on `port`, its host key pinned."""
    known = layout.known_hosts()
    cache.write_atomic(known, f"ringlab-guest {host_key}\n".encode())
    return ["ssh", "-p", str(port), "-i", key, "-o", "IdentitiesOnly=yes",
            "-o", "HostKeyAlias=ringlab-guest", "-o", f"UserKnownHostsFile={known}",
            "-o", "StrictHostKeyChecking=yes", "root@127.0.0.1"]


def keep(layout: cache.Layout, g: Guest, kernel: str, console_log: Path, gdb: str = "",
         detached: bool = False) -> int:
    """Keep the booted guest `g` until it dies (1) or Ctrl-C, SIGTERM or SIGHUP (0), described
    in the state file meanwhile unless another `./lab boot`'s guest is (the state then goes
    with the guest). `gdb`: the lines saying how to attach gdb, if asked."""
    other = running(layout)
    # Ctrl-C from here on is the way to stop: it may come while "Ctrl-C stops it" is still
    # being printed (a script that waits for that line signals at once), so the print is
    # inside the try too, not before it.
    try:
        ssh = " ".join(ssh_argv(layout, g.record.ssh_port, str(g.plan.key.private),
                                g.plan.rootfs.host_key))
        how_to_stop = (f"  stop:  ./lab boot --stop   (the lab runs detached, pid "
                       f"{os.getpid()}; its log: {detached_log(layout)})" if detached
                       else "Ctrl-C stops it.")
        banner = (f"guest {kernel} ({g.kernel.release}) up in {g.record.boot_s:.1f} s, "
                  f"accel {g.plan.accel}; console log: {console_log}\n"
                  f"  shell: ./lab ssh     (or: {ssh})\n" + gdb + how_to_stop)
        if other is None or detached:
            me = guest_folders.Process.of(os.getpid())
            qemu = guest_folders.Process.of(g.vm.pid) if g.vm.pid else None
            assert me is not None
            state = BootedGuest(
                pid=me.pid, start=me.start, port=g.record.ssh_port,
                key=str(g.plan.key.private), host_key=g.plan.rootfs.host_key,
                kernel=kernel, release=g.kernel.release, workdir=str(g.workdir),
                qemu_pid=qemu.pid if qemu else None, qemu_start=qemu.start if qemu else None,
                detached=detached, ssh=ssh, banner=banner)
            cache.write_atomic(state_path(layout), json.dumps(dataclasses.asdict(state)).encode())
        else:
            log.warning("the guest of another ./lab boot runs (lab pid %d): ./lab ssh and "
                        "./lab boot --stop reach that one, not this one", other.pid)
        if not detached:  # the detached lab's caller prints the banner from the state
            print(banner, flush=True)
        while g.health() is None:
            time.sleep(1)
        log.error("guest died: %s", g.health())
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        if (mine := read_state(layout)) is not None and mine.pid == os.getpid():
            state_path(layout).unlink(missing_ok=True)


def detach(layout: cache.Layout, argv: list[str]) -> int:
    """Start the detached lab (`argv`: BootOptions.detached_argv) in a session of its own (no
    terminal: no SIGHUP when the caller's script or shell exits), show its progress, and
    return once its guest is up."""
    if (other := running(layout)) is not None:
        raise LabError(f"a guest of ./lab boot is up already ({other.kernel}, lab pid "
                       f"{other.pid})", hint="./lab ssh reaches it; ./lab boot --stop stops it")
    out = detached_log(layout)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as f:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    shown = 0
    try:
        while True:
            shown = _show_progress(out, shown)
            if (state := read_state(layout)) is not None and state.pid == child.pid:
                _show_progress(out, shown)
                print(state.banner, flush=True)
                return 0
            if (status := child.poll()) is not None:
                _show_progress(out, shown)
                raise LabError(f"the detached guest did not come up: "
                               f"{_failure(out, status)}", hint=f"its lab's log: {out}")
            time.sleep(POLL_S)
    except KeyboardInterrupt:  # the caller gave up waiting: no guest is left behind
        child.terminate()
        try:
            child.wait(STOP_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        raise


def _show_progress(log_file: Path, shown: int) -> int:
    """What the detached lab printed since `shown` bytes, on our stderr; the new offset."""
    try:
        with log_file.open("rb") as f:
            f.seek(shown)
            data = f.read()
    except OSError:
        return shown
    if data:
        sys.stderr.write(data.decode("utf-8", "replace"))
        sys.stderr.flush()
    return shown + len(data)


def _failure(log_file: Path, status: int) -> str:
    """Why the detached lab ended: its `lab: error:` line, else its last line, else its status."""
    try:
        lines = [ln.strip() for ln in log_file.read_text(errors="replace").splitlines()]
    except OSError:
        lines = []
    errors = [ln.removeprefix("lab: error:").strip() for ln in lines
              if ln.startswith("lab: error:")]
    if errors:
        return errors[-1]
    last = next((ln for ln in reversed(lines) if ln), "")
    return f"its lab exited with status {status}" + (f": {last}" if last else "")


def stop(layout: cache.Layout) -> int:
    """Stop the guest of `./lab boot` (detached or in another shell): SIGTERM to its lab, which
    stops QEMU and removes the guest's folder; what is left after STOP_S is killed and removed
    here. An error if none is up."""
    state = read_state(layout)
    if state is None or not state.lab().alive():
        if state is not None:  # a lab killed with SIGKILL: its state and folder go now
            state_path(layout).unlink(missing_ok=True)
            guest_folders.sweep_orphans(Path(state.workdir).parent)
        raise LabError("no guest of ./lab boot is up",
                       hint="./lab boot --detach starts one in the background")
    _signal(state.lab(), signal.SIGTERM)
    if not _wait_gone(state.lab(), STOP_S):
        log.warning("the lab (pid %d) did not stop its guest within %.0f s; killing it",
                    state.pid, STOP_S)
        _signal(state.lab(), signal.SIGKILL)
        _wait_gone(state.lab(), QEMU_GONE_S)
    if (qemu := state.qemu()) is not None and not _wait_gone(qemu, QEMU_GONE_S):
        log.warning("QEMU (pid %d) outlived its lab; killing it", qemu.pid)
        _signal(qemu, signal.SIGKILL)
        _wait_gone(qemu, QEMU_GONE_S)
    shutil.rmtree(state.workdir, ignore_errors=True)
    if (now := read_state(layout)) is not None and now.pid == state.pid:
        state_path(layout).unlink(missing_ok=True)
    print(f"stopped the guest {state.kernel} ({state.release}) of ./lab boot (lab pid "
          f"{state.pid})")
    return 0


def _signal(p: guest_folders.Process, signum: int) -> None:
    """Send `signum` to `p` if it is still that process (it may end meanwhile: fine)."""
    if p.alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signum)


def _wait_gone(p: guest_folders.Process, seconds: float) -> bool:
    """Wait up to `seconds` for `p` to end; whether it did."""
    deadline = time.monotonic() + seconds
    while p.alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S / 2)
    return True
