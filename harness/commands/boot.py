"""`./lab boot`: a guest kept up until Ctrl-C, or with --detach in the background until
`./lab boot --stop`, with what `./lab ssh` needs to reach it."""
from __future__ import annotations

import argparse
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

from harness import cache, config as lab_config
from harness.config import KernelSpec
from harness.commands import options
from harness.runs import run_folder
from harness.errors import LabError
from harness.guest import workdir as guest_folders
from harness.guest.gdb import gdb_help, kaslr_offset
from harness.guest.guest import Guest, free_port
from harness.resources import Lab

log = logging.getLogger("ringlab")
# --stop: how long the lab is given to stop its guest (SIGTERM, its Ctrl-C) before SIGKILL, and
# then its QEMU to go (PR_SET_PDEATHSIG kills it with the lab) before it is killed too.
STOP_S = 60.0
QEMU_GONE_S = 10.0
POLL_S = 0.2


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("boot", help="boot a guest and keep it until Ctrl-C (or, detached, "
                       "until ./lab boot --stop)", description=main.__doc__)
    options.kernel(b)
    b.add_argument("--cpus", type=int, help="vCPUs (default: machine.cpus)")
    b.add_argument("--cmdline", help="extra kernel command line")
    b.add_argument("--refresh", action="store_true", help="look for a newer kernel package")
    b.add_argument("--gdb", action="store_true", help="QEMU's gdbstub on a loopback port; "
                   "prints the gdb command line (with the vmlinux and scripts/gdb of a build "
                   "kernel)")
    b.add_argument("--symbols", action="store_true", help="with --gdb: a Debian kernel's "
                   "vmlinux from its -dbg package (downloaded once, ~300 MB), and the KASLR "
                   "offset it runs at, in the gdb command line")
    b.add_argument("--detach", action="store_true", help="keep the guest in the background: "
                   "return once it is up (a script's exit does not stop it); ./lab ssh reaches "
                   "it, ./lab boot --stop stops it")
    b.add_argument("--stop", action="store_true", help="stop the guest of ./lab boot --detach "
                   "(or of a ./lab boot in another shell), and wait until it is gone")
    # The detached lab itself, started by --detach (never typed).
    b.add_argument("--detached-child", action="store_true", help=argparse.SUPPRESS)
    b.set_defaults(func=main)


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


def gdb_lines(lab: Lab, g: Guest, port: int, symbols: bool) -> str:
    """gdb_help for the guest: with its vmlinux (fetched if asked) moved by its KASLR offset."""
    vmlinux = lab.debug_vmlinux(g.kernel.name) if symbols else (
        g.kernel.build_dir / "vmlinux" if g.kernel.build_dir else None)
    offset = kaslr_offset(g, vmlinux) if vmlinux and vmlinux.exists() else None
    return gdb_help(g.kernel, port, vmlinux if symbols else None, offset)


def state_path(lab: Lab) -> Path:
    """Where the booted guest is described for `./lab ssh` (removed when it stops)."""
    return lab.layout.booted_guest()


def detached_log(lab: Lab) -> Path:
    """What the detached lab prints (its boot's progress, its errors) goes there."""
    return state_path(lab).with_name("booted.log")


def read_state(lab: Lab) -> BootedGuest | None:
    """The guest the state file describes, running or not; None without a readable one."""
    try:
        d = json.loads(state_path(lab).read_text())
        return BootedGuest(**{f.name: d[f.name] for f in dataclasses.fields(BootedGuest)})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def running(lab: Lab) -> BootedGuest | None:
    """The guest of `./lab boot` if its lab still runs (the same process, not its pid's heir)."""
    state = read_state(lab)
    return state if state is not None and state.lab().alive() else None


def ssh_argv(lab: Lab, port: int, key: str, host_key: str) -> list[str]:
    """OpenSSH's command line to the guest on `port`, its host key pinned."""
    known = lab.layout.known_hosts()
    cache.write_atomic(known, f"ringlab-guest {host_key}\n".encode())
    return ["ssh", "-p", str(port), "-i", key, "-o", "IdentitiesOnly=yes",
            "-o", "HostKeyAlias=ringlab-guest", "-o", f"UserKnownHostsFile={known}",
            "-o", "StrictHostKeyChecking=yes", "root@127.0.0.1"]


def main(args: argparse.Namespace) -> int:
    """Boot a guest and keep it until Ctrl-C; `./lab ssh` finds it. With --detach the lab goes
    on in the background once the guest is up, until `./lab boot --stop`."""
    if args.stop and (args.detach or args.gdb or args.kernel or args.cmdline or args.cpus):
        raise LabError("--stop takes no other option: it stops the guest that is up")
    if args.stop:
        return stop(Lab(run_folder.config(args)))
    # Resolved here, once; a kernel name that is wrong is said here, not in a log.
    cfg, spec = options.config_and_kernel(args)
    if args.detach:
        return detach(args, Lab(cfg))
    return keep_up(args, Lab(cfg, refresh=args.refresh), spec, detached=args.detached_child)


def keep_up(args: argparse.Namespace, lab: Lab, k: KernelSpec, detached: bool) -> int:
    """Boot the guest and keep it until Ctrl-C, SIGTERM (what --stop sends) or SIGHUP (the
    terminal closed), each of which stops it cleanly: QEMU stopped, its folder removed. (Not
    SIG_IGN for SIGHUP, even detached: QEMU would inherit it, and it is stopped with SIGHUP.)"""
    signal.signal(signal.SIGHUP, signal.default_int_handler)
    console_log = lab.config.reports_dir / f"boot-{lab_config.file_safe(k.name)}-console.log"
    gdb_port = free_port() if args.gdb else None
    other = running(lab)
    with lab.boot(k.name, console_log, cpus=args.cpus, cmdline=args.cmdline or "",
                  gdb_port=gdb_port) as g:
        # Ctrl-C from here on is the way to stop: it may come while "Ctrl-C stops it" is still
        # being printed (a script that waits for that line signals at once), so the print is
        # inside the try too, not before it.
        try:
            ssh = " ".join(ssh_argv(lab, g.record.ssh_port, str(g.plan.key.private),
                                    g.plan.rootfs.host_key))
            how_to_stop = (f"  stop:  ./lab boot --stop   (the lab runs detached, pid "
                           f"{os.getpid()}; its log: {detached_log(lab)})" if detached
                           else "Ctrl-C stops it.")
            banner = (f"guest {k.name} ({g.kernel.release}) up in {g.record.boot_s:.1f} s, "
                      f"accel {g.plan.accel}; console log: {console_log}\n"
                      f"  shell: ./lab ssh     (or: {ssh})\n"
                      + (gdb_lines(lab, g, gdb_port, args.symbols) if gdb_port else "")
                      + how_to_stop)
            if other is None or detached:
                me = guest_folders.Process.of(os.getpid())
                qemu = guest_folders.Process.of(g.vm.pid) if g.vm.pid else None
                assert me is not None
                state = BootedGuest(
                    pid=me.pid, start=me.start, port=g.record.ssh_port,
                    key=str(g.plan.key.private), host_key=g.plan.rootfs.host_key,
                    kernel=k.name, release=g.kernel.release, workdir=str(g.workdir),
                    qemu_pid=qemu.pid if qemu else None, qemu_start=qemu.start if qemu else None,
                    detached=detached, ssh=ssh, banner=banner)
                cache.write_atomic(state_path(lab), json.dumps(dataclasses.asdict(state)).encode())
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
            if (mine := read_state(lab)) is not None and mine.pid == os.getpid():
                state_path(lab).unlink(missing_ok=True)


def child_command(args: argparse.Namespace) -> list[str]:
    """The command line of the detached lab: this one's options, and --detached-child."""
    argv = [sys.executable, "-m", "harness.cli"]
    if getattr(args, "verbose", False):
        argv.append("-v")
    if getattr(args, "lab_config", None):
        argv.append(f"--lab-config={args.lab_config}")
    argv += ["boot", "--detached-child"]
    for name in ("kernel", "cpus", "cmdline"):
        if getattr(args, name) is not None:
            argv.append(f"--{name}={getattr(args, name)}")
    argv += [f"--{name}" for name in ("refresh", "gdb", "symbols") if getattr(args, name)]
    return argv


def detach(args: argparse.Namespace, lab: Lab) -> int:
    """Start the lab again in a session of its own (no terminal: no SIGHUP when the caller's
    script or shell exits), show its progress, and return once its guest is up."""
    if (other := running(lab)) is not None:
        raise LabError(f"a guest of ./lab boot is up already ({other.kernel}, lab pid "
                       f"{other.pid})", hint="./lab ssh reaches it; ./lab boot --stop stops it")
    out = detached_log(lab)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as f:
        child = subprocess.Popen(child_command(args), stdin=subprocess.DEVNULL, stdout=f,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    shown = 0
    try:
        while True:
            shown = _show_progress(out, shown)
            if (state := read_state(lab)) is not None and state.pid == child.pid:
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


def stop(lab: Lab) -> int:
    """Stop the guest of `./lab boot` (detached or in another shell): SIGTERM to its lab, which
    stops QEMU and removes the guest's folder; what is left after STOP_S is killed and removed
    here. An error if none is up."""
    state = read_state(lab)
    if state is None or not state.lab().alive():
        if state is not None:  # a lab killed with SIGKILL: its state and folder go now
            state_path(lab).unlink(missing_ok=True)
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
    if (now := read_state(lab)) is not None and now.pid == state.pid:
        state_path(lab).unlink(missing_ok=True)
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
