"""SSH to a guest with paramiko: the lab's own key, a pinned host key, one reused connection."""
from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import select
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness import cache
from harness.errors import GuestHang, SSHError

if TYPE_CHECKING:  # paramiko (0.1 s of imports) is loaded where SSH is used: a throw-away
    import paramiko  # guest talks to its probe runner through QEMU's forward, never SSH

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClientKey:
    private: Path
    public_line: str  # "ecdsa-sha2-nistp256 AAAA... ringlab"


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_status: int
    stdout: str
    stderr: str
    duration_s: float


def client_key(cache_root: Path) -> ClientKey:
    """The lab's client key, made on first use; private key 0600 in the user's cache, its
    public line beside it (read without loading paramiko), both made under one lock: two labs
    starting on a new cache make one key."""
    path = cache.Layout(cache_root).client_key()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with cache.exclusive(path.with_name(f".{path.name}.lock")):
        if not path.exists():
            import paramiko
            key = paramiko.ECDSAKey.generate(bits=256)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            os.close(fd)  # mkstemp's file is 0600 already
            key.write_private_key_file(tmp)
            os.replace(tmp, path)
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise SSHError(f"{path} is readable by others (mode {mode:o}); ssh refuses such "
                           "keys", hint=f"chmod 600 {path}")
        return ClientKey(private=path, public_line=_public_line(path))


def _public_line(private: Path) -> str:
    """The key's public line, kept in PRIVATE.public with the private key's sha256: a key
    replaced by hand gets its line derived again (paramiko loaded only then)."""
    kept = private.with_name(private.name + ".public")
    digest = hashlib.sha256(private.read_bytes()).hexdigest()
    with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
        known = json.loads(kept.read_text())
        if known["private_sha256"] == digest:
            return str(known["line"])
    import paramiko
    key = paramiko.ECDSAKey.from_private_key_file(str(private))
    line = f"{key.get_name()} {key.get_base64()} ringlab"
    cache.write_atomic(kept, json.dumps({"private_sha256": digest, "line": line}).encode())
    return line


def _host_key(line: str) -> paramiko.PKey:
    import paramiko
    kind, blob = line.split()[:2]
    return paramiko.PKey.from_type_string(kind, base64.b64decode(blob))


class GuestSSH:
    """One SSH connection to a guest's forwarded port, reused for every command."""

    def __init__(self, port: int, key: ClientKey, host_key_line: str, user: str = "root") -> None:
        self.port = port
        self.key = key
        self.host_key_line = host_key_line
        self.user = user
        self._client: paramiko.SSHClient | None = None
        # Called at least once a second while waiting on the guest, with when the wait began;
        # raises if the guest died or the kernel oopsed since (set by guest.py), so a crash is
        # reported at once rather than at the timeout.
        self.watchdog: Callable[[float], None] = lambda since: None
        self.last_answer = time.monotonic()  # when sshd last answered (start_heartbeat)
        self._beating = threading.Event()
        # connect_on_first_use(): (seconds to connect within, the liveness check) until used
        self._lazy: tuple[float, Callable[[], None]] | None = None
        self._connecting = threading.Lock()

    def _connect_once(self, timeout: float) -> paramiko.SSHClient:
        import paramiko
        client = paramiko.SSHClient()
        # Pin the host key made at rootfs build time; refuse anything else.
        client.get_host_keys().add(f"[127.0.0.1]:{self.port}", self.host_key_line.split()[0],
                                   _host_key(self.host_key_line))
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        client.connect("127.0.0.1", self.port, username=self.user,
                       pkey=paramiko.ECDSAKey.from_private_key_file(str(self.key.private)),
                       look_for_keys=False, allow_agent=False, timeout=timeout,
                       banner_timeout=timeout, auth_timeout=timeout)
        return client

    def connect(self, deadline: float, alive: Callable[[], None] = lambda: None) -> None:
        """Connect, retrying until `deadline` (time.monotonic()); `alive()` raises if the guest
        died meanwhile, so a crashed guest is reported as such rather than as an SSH timeout."""
        import paramiko
        last: Exception | None = None
        attempts = 0
        while time.monotonic() < deadline:
            alive()
            attempts += 1
            try:
                self._client = self._connect_once(timeout=min(5.0, max(
                    0.5, deadline - time.monotonic())))
                log.debug("ssh: connected to port %d after %d attempt(s)", self.port, attempts)
                return
            except paramiko.BadHostKeyException as e:
                raise SSHError(
                    f"guest on 127.0.0.1:{self.port} showed host key "
                    f"{e.key.get_name()} {e.key.fingerprint}, not the pinned "
                    f"{e.expected_key.get_name()} {e.expected_key.fingerprint}; refusing it",
                    hint="another process may own the port, or the rootfs cache was changed"
                ) from None
            except paramiko.AuthenticationException as e:
                raise SSHError(f"guest on 127.0.0.1:{self.port} refused the lab's key: {e}"
                               ) from None
            except paramiko.SSHException as e:
                if "not found in known_hosts" in str(e):
                    raise SSHError(f"guest on 127.0.0.1:{self.port} offered no host key of the "
                                   f"pinned type ({self.host_key_line.split()[0]})") from None
                last = e
            except (OSError, EOFError) as e:
                last = e
            time.sleep(0.2)
        if attempts == 0:
            raise SSHError(f"no SSH attempt on the guest at 127.0.0.1:{self.port}: its time was "
                           "up before the first (the boot took it all)")
        raise SSHError(f"no SSH answer from the guest on 127.0.0.1:{self.port} in {attempts} "
                       f"attempt{'s' if attempts > 1 else ''}; the last: {last}")

    def connect_on_first_use(self, within_s: float, alive: Callable[[], None] = lambda: None
                             ) -> None:
        """Connect when the connection is first used, within `within_s` of then: a guest
        reached through its probe runner may never need SSH."""
        self._lazy = (within_s, alive)

    @property
    def connected(self) -> bool:
        return self._client is not None

    @property
    def client(self) -> paramiko.SSHClient:
        if self._client is None and self._lazy is not None:
            with self._connecting:
                if self._client is None and self._lazy is not None:
                    within_s, alive = self._lazy
                    t = time.monotonic()
                    self.connect(t + within_s, alive)
                    self._lazy = None
                    log.debug("ssh: connected on first use in %.2f s", time.monotonic() - t)
                    self.start_heartbeat()
        if self._client is None:
            raise SSHError("not connected to the guest")
        return self._client

    def open_session(self, command: str, timeout: float | None) -> paramiko.Channel:
        transport = self.client.get_transport()
        if transport is None or not transport.is_active():
            raise GuestHang("the SSH connection to the guest is gone")
        chan = transport.open_session(timeout=10)
        chan.settimeout(timeout)
        log.debug("ssh: %s", command)
        chan.exec_command(command)
        return chan

    def open_forward(self, port: int, timeout: float = 10.0) -> paramiko.Channel | None:
        """A channel to 127.0.0.1:`port` inside the guest (SSH's direct-tcpip, made by sshd as
        root); None when nothing listens there."""
        import paramiko
        transport = self.client.get_transport()
        if transport is None or not transport.is_active():
            raise GuestHang("the SSH connection to the guest is gone")
        try:
            return transport.open_channel("direct-tcpip", ("127.0.0.1", port), ("127.0.0.1", 0),
                                          timeout=timeout)
        except paramiko.ChannelException as e:  # sshd: connect() to the port was refused
            log.debug("ssh: no listener on the guest's port %d (%s)", port, e)
            return None

    def run(self, command: str, timeout: float = 60.0, input: bytes | None = None
            ) -> CommandResult:
        """Run `command` in the guest; raise GuestHang if it does not finish within `timeout`."""
        start = time.monotonic()
        chan = self.open_session(command, timeout=timeout)
        out, err = bytearray(), bytearray()
        try:
            if input:
                chan.sendall(input)
            chan.shutdown_write()
            deadline = start + timeout
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise GuestHang(f"command did not finish in {timeout:g} s: {command}")
                if not select.select([chan], [], [], min(remaining, 1.0))[0]:
                    self.watchdog(start)
                    continue
                got = False
                while chan.recv_ready():
                    out += chan.recv(65536)
                    got = True
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                    got = True
                if chan.exit_status_ready() and not chan.recv_ready() and chan.eof_received:
                    break
                if not got and (chan.closed or not chan.get_transport().is_active()):
                    self.watchdog(start)  # a dead guest says so; else the connection itself broke
                    raise GuestHang(f"the SSH connection closed before the command finished: "
                                    f"{command}")
                if not got:
                    time.sleep(0.001)  # readable for EOF alone; wait for the exit status
            status = chan.recv_exit_status()
        except TimeoutError:
            raise GuestHang(f"command did not finish in {timeout:g} s: {command}") from None
        finally:
            chan.close()
        return CommandResult(command, status, out.decode(errors="replace"),
                             err.decode(errors="replace"), time.monotonic() - start)

    def push(self, local: Path, remote: str) -> None:
        """Copy a file or a directory tree (of regular files) into the guest with SFTP."""
        sftp = self.client.open_sftp()
        try:
            if local.is_file():
                sftp.put(str(local), remote)
                sftp.chmod(remote, local.stat().st_mode & 0o777)
                return
            for path in sorted([local, *local.rglob("*")]):
                if "__pycache__" in path.parts:
                    continue
                target = remote + "/" + str(path.relative_to(local)) if path != local else remote
                if path.is_dir():
                    try:
                        sftp.mkdir(target)
                    except OSError:
                        pass  # exists already
                else:
                    sftp.put(str(path), target)
                    sftp.chmod(target, path.stat().st_mode & 0o777)
        finally:
            sftp.close()

    def start_heartbeat(self, period_s: float = 2.0) -> None:
        """Ask sshd for an answer every `period_s` from a daemon thread, noting the time of
        each in `last_answer`: a hung guest then shows as one that stopped answering, however
        long the command it was given may run. The thread ends when the connection closes."""
        transport = self.client.get_transport()
        assert transport is not None
        self.last_answer = time.monotonic()
        self._beating.clear()

        def beat() -> None:
            while not self._beating.is_set():
                # Blocks until sshd answers (OpenSSH refuses this request: that is an answer)
                # or the connection closes.
                transport.global_request("keepalive@openssh.com", wait=True)
                if not transport.is_active():
                    return
                self.last_answer = time.monotonic()
                self._beating.wait(period_s)

        threading.Thread(target=beat, name=f"ssh-heartbeat-{self.port}", daemon=True).start()

    def close(self) -> None:
        self._beating.set()
        self._lazy = None  # never connect after a close
        if self._client is not None:
            self._client.close()
            self._client = None
