"""The client of probes/runner.py: running probes in a guest and getting their JSON back.

The probes folder is pushed once per guest and probes/runner.py started there as a daemon
listening on RUNNER_PORT; the harness reaches it straight through QEMU's port forward (a
token proves it is the lab: probes/runner.py says why), or through an SSH forwarded channel
where there is no forward, and it serves requests over that connection (a fork per probe). A
guest saved as a snapshot is saved with that daemon up, so a restored guest's probes are ready
the moment the guest runs: no push, no python3 to start, no SSH handshake. A probe's outcome is a ProbeResult with its parsed
JSON, or a ProbeError saying exactly what went wrong: a crash (with the traceback), a signal,
a timeout, or output that is not one JSON document.
"""
from __future__ import annotations

import hashlib
import json
import logging
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import paths
from harness.errors import GuestHang, ProbeCrashed, ProbeError, ProbeOutputError, ProbeTimeout
from harness.guest.ssh import GuestSSH

if TYPE_CHECKING:
    import paramiko  # an SSH channel's type; paramiko is loaded where SSH is (guest/ssh.py)

log = logging.getLogger(__name__)

PROBES_DIR = paths.PROBES
GUEST_DIR = "/tmp/ringlab/probes"
RUNNER_PORT = 7907  # the runner daemon's port in the guest


def runner_token(private_key: Path) -> str:
    """What the host says to the runner daemon first: derived from the lab's SSH key, so a
    host user who cannot read that key cannot drive the guest's root server either."""
    return hashlib.sha256(b"ringlab-runner\0" + private_key.read_bytes()).hexdigest()[:32]


def probes_digest(folder: Path = PROBES_DIR) -> str:
    """What the pushed probes are: a daemon reporting another digest runs older probes."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*.py")):
        if "__pycache__" not in path.parts:
            h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:20]


# How long past a probe's own timeout the harness waits before calling the guest hung.
GRACE_S = 15.0


@dataclass(frozen=True)
class Deadlines:
    """Each probe call's deadline, sized to its work: a probe that hangs on a broken kernel
    (a kernel under review or bisect often is one) costs a few times its normal run, not a
    blanket minutes-long timeout. probes/deadlines.json holds each call's longest run on good
    kernels and the margin; a guest of a slower arch under TCG scales it."""
    measured_s: dict[str, float]
    margin: float
    floor_s: float
    default_s: float
    arch_slowdown: dict[str, float]

    @classmethod
    def load(cls, path: Path = PROBES_DIR / "deadlines.json") -> Deadlines:
        d = json.loads(path.read_text())
        return cls({k: float(v) for k, v in d["measured_s"].items()}, float(d["margin"]),
                   float(d["floor_s"]), float(d["default_s"]),
                   {k: float(v) for k, v in d["arch_slowdown"].items()})

    def for_call(self, probe: str, args: list[str] | tuple[str, ...], arch: str) -> float:
        """Seconds for `probe args` (keyed by the probe and its first argument, the check)."""
        measured = self.measured_s.get(f"{probe} {args[0]}" if args else probe)
        base = self.default_s if measured is None else self.margin * measured + self.floor_s
        return round(base * self.arch_slowdown.get(arch, 1.0), 1)


@dataclass(frozen=True)
class ProbeResult:
    probe: str
    data: dict[str, Any]
    stderr: str
    duration_s: float
    user: str = "root"
    args: tuple[str, ...] = field(default_factory=tuple)


def interpret(resp: dict[str, Any], user: str = "root", args: tuple[str, ...] = ()
              ) -> ProbeResult:
    """Turn a runner response into a ProbeResult, or raise the ProbeError that explains it."""
    probe = resp.get("probe", "?")
    out, err = resp.get("stdout", ""), resp.get("stderr", "")
    status = resp.get("status")
    if status == "timeout":
        stuck = resp.get("stuck", [])
        last = err.strip().splitlines()[-1:] or [""]
        raise ProbeTimeout(probe, f"no result within its timeout; killed after "
                           f"{resp.get('duration_s', 0):.1f} s{_waiting(stuck)}"
                           + (f"; it said last: {last[0]}" if last[0] else "")
                           + _stacks(stuck) + (f"\nstderr:\n{err.rstrip()}" if err.strip()
                                               else ""), out, err, stuck=stuck)
    if status == "signaled":
        raise ProbeCrashed(probe, f"killed by signal {resp.get('code')}"
                           + (f"; stderr:\n{err.rstrip()}" if err.strip() else ""), out, err)
    if status == "error":
        raise ProbeError(probe, f"the guest runner failed:\n{resp.get('error', '')}")
    if resp.get("code") != 0:
        raise ProbeCrashed(probe, f"exited with status {resp.get('code')}" + _said(err), out, err)
    try:
        data = json.loads(out)
    except json.JSONDecodeError as e:
        shown = out.strip()[:200] or "(nothing)"
        raise ProbeOutputError(probe, f"stdout is not one JSON document ({e.msg} at char "
                               f"{e.pos}); it began: {shown!r}", out, err) from None
    if not isinstance(data, dict):
        raise ProbeOutputError(probe, f"stdout is JSON but not an object: {out.strip()[:200]!r}",
                               out, err)
    return ProbeResult(probe=probe, data=data, stderr=err,
                       duration_s=float(resp.get("duration_s", 0.0)), user=user, args=args)


class ProbeRunner:
    """The guest-side fork server, reached over one connection: straight to `host_port`
    (QEMU's forward of RUNNER_PORT) when given, else an SSH channel."""

    def __init__(self, ssh: GuestSSH, extra_dirs: tuple[Path, ...] = (),
                 host_port: int | None = None) -> None:
        self.ssh = ssh
        self.extra_dirs = extra_dirs
        self.host_port = host_port
        self._chan: paramiko.Channel | socket.socket | None = None
        self._eof = False  # the daemon closed the connection
        self.last_answer = time.monotonic()  # when the daemon last answered (heartbeat)
        self._beating = False
        self._buf = b""
        self._next_id = 1
        self._pushed = False
        self.available: list[str] = []

    def launch(self) -> None:
        """Push the probes and start the runner daemon (replacing one of older probes); returns
        once it listens. A guest about to be saved calls it, so its snapshot holds the daemon."""
        t = time.monotonic()
        digest = probes_digest()
        self.ssh.run(f"mkdir -p {GUEST_DIR}", timeout=30)
        self.ssh.push(PROBES_DIR, GUEST_DIR)
        for extra in self.extra_dirs:
            self.ssh.push(extra, GUEST_DIR)
        self.ssh.run(f"umask 077 && cat > {GUEST_DIR}/.token", timeout=30,
                     input=runner_token(self.ssh.key.private).encode())
        # The digest last: a daemon started from a half-pushed folder never claims these probes.
        r = self.ssh.run(f"cat > {GUEST_DIR}/.digest && {{ pkill -f '^python3 -u "
                         f"{GUEST_DIR}/runner.py --listen' ; python3 -u {GUEST_DIR}/runner.py "
                         f"--listen {RUNNER_PORT}; }}", timeout=60, input=digest.encode())
        said = r.stdout.strip().splitlines()[-1:] or ["(nothing)"]
        if r.exit_status != 0 or '"listening"' not in said[0]:
            raise ProbeError("runner", f"the probe runner did not start in the guest "
                             f"(status {r.exit_status}): {said[0]} {r.stderr.strip()}")
        self._pushed = True
        log.debug("probe runner daemon started in %.2f s", time.monotonic() - t)

    def start(self) -> None:
        """Connect to the guest's runner daemon, launching it first when none runs or it runs
        other probes than these; returns once it says it is ready."""
        t = time.monotonic()
        hello = self._connect()
        if hello is None or hello.get("digest") != probes_digest():
            log.debug("probe runner: %s; launching it", "none listening" if hello is None else
                      f"digest {hello.get('digest')!r} is not this checkout's")
            self.close()
            self.launch()  # pushes the extra folders too
            hello = self._connect()
            if hello is None:
                raise ProbeError("runner", "the probe runner listens but refuses the channel")
        elif self.extra_dirs and not self._pushed:
            # A restored guest's daemon imports each probe in its fork, so probes pushed now
            # are found by the next request.
            for extra in self.extra_dirs:
                self.ssh.push(extra, GUEST_DIR)
            self._pushed = True
        self.available = hello.get("probes", [])
        log.debug("probe runner ready in %.2f s: %s", time.monotonic() - t, self.available)

    def _open(self) -> paramiko.Channel | socket.socket | None:
        """A new connection to the daemon: straight through QEMU's forward (the token said
        first), else an SSH channel; None when nothing listens."""
        if self.host_port is None:
            return self.ssh.open_forward(RUNNER_PORT)
        sock = socket.create_connection(("127.0.0.1", self.host_port), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall((json.dumps({"token": runner_token(self.ssh.key.private)}) + "\n").encode())
        return sock

    def _connect(self) -> dict[str, Any] | None:
        self._chan = self._open()
        if self._chan is None:
            return None
        self._buf, self._eof = b"", False
        try:
            return self._read_line(time.monotonic() + 60)
        except GuestHang:
            if self._chan is None or not self._eof:
                raise  # no answer at all: the guest is hung
            self.close()  # a daemon that closed the connection: not root's, or none listens
            return None

    def refresh(self, epoch_ns: int, entropy: bytes) -> None:
        """A restored guest's clock set to `epoch_ns` and its random pool reseeded with
        `entropy` (probes/runner.py refresh())."""
        resp = self.request({"op": "refresh", "epoch_ns": epoch_ns, "entropy": entropy.hex()},
                            30)
        if resp.get("status") != "ok":
            raise ProbeError("runner", f"could not set the guest's clock and random pool: "
                             f"{resp.get('error', resp)}")

    def _read_line(self, deadline: float) -> dict[str, Any]:
        chan = self._chan
        assert chan is not None
        since = time.monotonic()
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise GuestHang("the guest's probe runner did not answer in time "
                                "(guest hung, or the probe runner is stuck)")
            if not select.select([chan], [], [], min(remaining, 1.0))[0]:
                self.ssh.watchdog(since)
                continue
            try:
                data = chan.recv(65536)
            except ConnectionError:
                data = b""
            if not data:
                self._eof = True
                err = chan.recv_stderr(65536).decode(errors="replace") if \
                    not isinstance(chan, socket.socket) and chan.recv_stderr_ready() else ""
                raise GuestHang("the guest's probe runner went away" +
                                (f": {err.strip()}" if err.strip() else ""))
            self._buf += data
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        if self._chan is None:
            self.start()
        assert self._chan is not None
        req = {**req, "id": self._next_id}
        self._next_id += 1
        self._chan.sendall((json.dumps(req) + "\n").encode())
        resp = self._read_line(time.monotonic() + timeout)
        if resp.get("id") != req["id"]:
            raise ProbeError(req.get("probe", "runner"), f"answer out of order: {resp}")
        return resp

    def run(self, probe: str, args: list[str] | tuple[str, ...] = (), user: str = "root",
            timeout: float = 60.0) -> ProbeResult:
        """Run `probe` (a module name under probes/) as `user`; its JSON comes back parsed."""
        resp = self.request({"op": "run", "probe": probe, "args": list(args), "user": user,
                             "timeout": timeout}, timeout + GRACE_S)
        log.debug("probe %s: %s in %.3f s", probe, resp.get("status"), resp.get("duration_s", 0))
        return interpret(resp, user, tuple(args))

    def exec(self, command: str, timeout: float) -> tuple[int, str, str]:
        """`sh -c command` as root in the guest: (status, stdout, stderr), no SSH needed."""
        resp = self.request({"op": "exec", "command": command, "timeout": timeout},
                            timeout + GRACE_S)
        if resp.get("status") != "ok":
            raise GuestHang(f"command did not finish in {timeout:g} s: {command}"
                            if resp.get("status") == "timeout" else
                            f"the probe runner could not run {command!r}: {resp}")
        return int(resp["code"]), resp.get("stdout", ""), resp.get("stderr", "")

    def start_heartbeat(self, period_s: float = 2.0) -> None:
        """Ping the daemon every `period_s` over a connection of its own, from a daemon
        thread, noting each answer in `last_answer`: a guest reached without SSH still shows
        when it stops answering. The thread ends when the runner is closed."""
        if self.host_port is None or self._beating:
            return
        self._beating = True
        self.last_answer = time.monotonic()

        def beat() -> None:
            try:
                sock = self._open()
                assert isinstance(sock, socket.socket)
                with sock, sock.makefile("r") as f:
                    f.readline()  # the daemon's hello
                    while self._beating:
                        sock.sendall(b'{"op": "ping", "id": 0}\n')
                        if not f.readline():
                            return
                        self.last_answer = time.monotonic()
                        time.sleep(period_s)
            except OSError:
                return
            finally:
                self._beating = False

        threading.Thread(target=beat, name=f"runner-heartbeat-{self.host_port}",
                         daemon=True).start()

    def kmsg(self, from_boot: bool = False) -> tuple[list[str], int]:
        """Kernel log lines since the previous call (from_boot: all the kernel still holds),
        and the taint mask now (-1: unknown)."""
        resp = self.request({"op": "kmsg", **({"from_boot": True} if from_boot else {})}, 30)
        return resp.get("lines", []), int(resp.get("tainted", -1))

    def close(self) -> None:
        self._beating = False
        if self._chan is not None:
            self._chan.close()
            self._chan = None


def _waiting(stuck: list[dict[str, Any]]) -> str:
    """Where a timed-out probe's threads were in the kernel when it was killed (the runner
    reads it first): the message's first line names each one's wait, _stacks() follow."""
    if not stuck:
        return ""
    return "; waiting: " + "; ".join(f"{t['comm']} {t['tid']} {t['state']} in {t['wchan']}"
                                     for t in stuck[:4])


def _stacks(stuck: list[dict[str, Any]]) -> str:
    return "".join(f"\n  {t['comm']} {t['tid']} ({t['state']}, wchan {t['wchan']}): "
                   + (" <- ".join(t["stack"]) or "no stack (not root?)") for t in stuck)


def _said(stderr: str) -> str:
    """The probe's last stderr line on the message's first line (the one summaries show:
    an argparse or Python error ends there), then the whole stderr."""
    lines = stderr.strip().splitlines()
    if not lines:
        return " (no stderr)"
    return f": {lines[-1]}" + (f"\nstderr:\n{stderr.rstrip()}" if len(lines) > 1 else "")
