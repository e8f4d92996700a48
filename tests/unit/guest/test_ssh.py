"""harness/guest/ssh.py: SSH to a guest. The lab's key is made once and refused when others can
read it, its public line kept beside it; connecting retries while sshd starts but stops at
once, with the reason, on a wrong host key or a refused key; paramiko is not loaded until SSH
is used; a lazy connection connects on first use and never after a close; a command's output
and status are collected, and a hang or a dropped connection is a GuestHang naming the
command; push copies a tree without __pycache__. paramiko's transport is faked."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import paramiko
import pytest

from harness.errors import GuestHang, SSHError
from harness.guest import ssh


@pytest.fixture
def key(tmp_path: Path) -> ssh.ClientKey:
    return ssh.client_key(tmp_path)


def test_the_client_key_is_made_once_private_and_kept(tmp_path: Path,
                                                      key: ssh.ClientKey) -> None:
    assert oct(key.private.stat().st_mode & 0o777) == "0o600"
    kind, blob, comment = key.public_line.split()
    assert (kind, comment) == ("ecdsa-sha2-nistp256", "ringlab") and blob.startswith("AAAA")
    assert ssh.client_key(tmp_path) == key


def test_a_key_made_before_its_public_line_was_kept_gets_it_from_the_private_key(
        tmp_path: Path, key: ssh.ClientKey) -> None:
    """Caches from before id_ecdsa.public: the public line is derived once from the key."""
    kept = key.private.with_name(key.private.name + ".public")
    kept.unlink()
    assert ssh.client_key(tmp_path) == key and key.public_line in kept.read_text()


def test_a_key_replaced_by_hand_gets_its_own_public_line(tmp_path: Path,
                                                         key: ssh.ClientKey) -> None:
    other = ssh.client_key(tmp_path / "other")
    key.private.write_bytes(other.private.read_bytes())
    assert ssh.client_key(tmp_path).public_line == other.public_line != key.public_line


def test_a_throw_away_guest_command_does_not_load_paramiko() -> None:
    """`./lab ssh -- true` reaches a restored guest through its probe runner: paramiko's 0.1 s
    of imports is paid only where SSH is used (issue 44.3)."""
    code = "import sys, harness.commands.ssh; print('paramiko' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[3]).stdout
    assert out.strip() == "False"


def test_a_client_key_others_can_read_is_refused_naming_it(tmp_path: Path,
                                                           key: ssh.ClientKey) -> None:
    os.chmod(key.private, 0o644)
    with pytest.raises(SSHError, match=f"{key.private} is readable by others \\(mode 644\\)") as e:
        ssh.client_key(tmp_path)
    assert e.value.hint == f"chmod 600 {key.private}"


def test_a_host_key_line_is_read_as_its_key(key: ssh.ClientKey) -> None:
    k = ssh._host_key(key.public_line)
    assert k.get_name() == "ecdsa-sha2-nistp256" and k.get_base64() == key.public_line.split()[1]


def _guest(key: ssh.ClientKey, monkeypatch: pytest.MonkeyPatch, *outcomes: Any
           ) -> ssh.GuestSSH:
    """A GuestSSH whose connection attempts end as `outcomes` say (an exception, or a client)."""
    g = ssh.GuestSSH(2222, key, key.public_line)
    left = list(outcomes)

    def once(timeout: float) -> Any:
        got = left.pop(0)
        if isinstance(got, BaseException):
            raise got
        return got
    monkeypatch.setattr(g, "_connect_once", once)
    return g


def test_connect_retries_while_sshd_starts(key: ssh.ClientKey,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    client = object()
    g = _guest(key, monkeypatch, ConnectionRefusedError(), EOFError(), client)
    monkeypatch.setattr(ssh.time, "sleep", lambda s: None)
    checked = []
    g.connect(time.monotonic() + 60, alive=lambda: checked.append(1))
    assert g.connected and g.client is client and len(checked) == 3


def test_a_guest_that_died_while_connecting_says_so(key: ssh.ClientKey,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    g = _guest(key, monkeypatch, ConnectionRefusedError())

    def dead() -> None:
        raise GuestHang("QEMU exited")
    with pytest.raises(GuestHang, match="QEMU exited"):
        g.connect(time.monotonic() + 60, alive=dead)


def test_no_answer_by_the_deadline_names_the_port_and_the_last_error(
        key: ssh.ClientKey, monkeypatch: pytest.MonkeyPatch) -> None:
    g = _guest(key, monkeypatch, *[ConnectionRefusedError("refused")] * 1000)
    monkeypatch.setattr(ssh.time, "sleep", lambda s: None)
    ticks = iter(range(10**6))
    monkeypatch.setattr(ssh.time, "monotonic", lambda: float(next(ticks)))
    with pytest.raises(SSHError, match="no SSH answer from the guest on 127.0.0.1:2222 in "
                                       r"\d+ attempts; the last: refused"):
        g.connect(5.0)


def test_a_deadline_gone_before_a_first_attempt_says_so(
        key: ssh.ClientKey, monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 44: it said "after 0 attempt(s): None".
    g = _guest(key, monkeypatch, object())
    with pytest.raises(SSHError, match=r"no SSH attempt on the guest at 127.0.0.1:2222: its "
                                       r"time was up before the first \(the boot took it all\)"):
        g.connect(time.monotonic() - 1)


def test_a_wrong_host_key_is_refused_at_once(key: ssh.ClientKey,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    other = paramiko.ECDSAKey.generate(bits=256)
    pinned = ssh._host_key(key.public_line)
    g = _guest(key, monkeypatch, paramiko.BadHostKeyException("h", other, pinned), object())
    with pytest.raises(SSHError) as e:
        g.connect(time.monotonic() + 60)
    assert (f"showed host key ecdsa-sha2-nistp256 {other.fingerprint}, not the pinned "
            f"ecdsa-sha2-nistp256 {pinned.fingerprint}; refusing it") in e.value.message
    assert "another process may own the port" in (e.value.hint or "")
    assert not g.connected


def test_a_refused_key_and_a_missing_host_key_type_are_said(
        key: ssh.ClientKey, monkeypatch: pytest.MonkeyPatch) -> None:
    g = _guest(key, monkeypatch, paramiko.AuthenticationException("denied"))
    with pytest.raises(SSHError, match="refused the lab's key: denied"):
        g.connect(time.monotonic() + 60)
    g = _guest(key, monkeypatch,
               paramiko.SSHException("Server '[127.0.0.1]:2222' not found in known_hosts"))
    with pytest.raises(SSHError, match=r"no host key of the pinned type \(ecdsa-sha2-nistp256\)"):
        g.connect(time.monotonic() + 60)


def test_a_lazy_connection_connects_on_first_use_and_never_after_a_close(
        key: ssh.ClientKey, monkeypatch: pytest.MonkeyPatch) -> None:
    client = SimpleNamespace(close=lambda: None)
    g = _guest(key, monkeypatch, client, client)
    beats = []
    monkeypatch.setattr(g, "start_heartbeat", lambda: beats.append(1))
    g.connect_on_first_use(30.0)
    assert not g.connected
    assert g.client is client and beats == [1]
    g.close()
    g.connect_on_first_use(30.0)
    g.close()
    with pytest.raises(SSHError, match="not connected to the guest"):
        g.client


class _Chan:
    """A session channel: `chunks` of (stdout, stderr) come one per select; then the exit."""

    def __init__(self, chunks: list[tuple[bytes, bytes]], status: int | None,
                 closed: bool = False) -> None:
        self.chunks = chunks
        self.status = status
        self.closed = closed
        self.sent = b""
        self.eof_received = False
        self._out, self._err = b"", b""

    def settimeout(self, t: float | None) -> None: ...

    def exec_command(self, command: str) -> None:
        self.command = command

    def sendall(self, data: bytes) -> None:
        self.sent += data

    def shutdown_write(self) -> None: ...

    def _next(self) -> None:
        if not self._out and not self._err and self.chunks:
            self._out, self._err = self.chunks.pop(0)
        if not self.chunks and not self._out and not self._err and self.status is not None:
            self.eof_received = True

    def recv_ready(self) -> bool:
        self._next()
        return bool(self._out)

    def recv(self, n: int) -> bytes:
        out, self._out = self._out, b""
        return out

    def recv_stderr_ready(self) -> bool:
        return bool(self._err)

    def recv_stderr(self, n: int) -> bytes:
        err, self._err = self._err, b""
        return err

    def exit_status_ready(self) -> bool:
        return self.status is not None and not self.chunks

    def recv_exit_status(self) -> int:
        assert self.status is not None
        return self.status

    def get_transport(self) -> Any:
        return SimpleNamespace(is_active=lambda: True)

    def close(self) -> None:
        self.closed = True


def _connected(key: ssh.ClientKey, monkeypatch: pytest.MonkeyPatch, chan: _Chan | None,
               active: bool = True) -> ssh.GuestSSH:
    transport = SimpleNamespace(is_active=lambda: active,
                                open_session=lambda timeout: chan)
    g = ssh.GuestSSH(2222, key, key.public_line)
    g._client = SimpleNamespace(get_transport=lambda: transport)  # type: ignore[assignment]
    monkeypatch.setattr(ssh.select, "select", lambda r, w, x, t: (r, [], []))
    return g


def test_a_commands_output_and_status_are_collected(key: ssh.ClientKey,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    chan = _Chan([(b"one\n", b""), (b"two\n", b"warn\n")], status=3)
    r = _connected(key, monkeypatch, chan).run("cat f", input=b"in")
    assert (r.command, r.exit_status, r.stdout, r.stderr) == ("cat f", 3, "one\ntwo\n", "warn\n")
    assert chan.command == "cat f" and chan.sent == b"in" and chan.closed


def test_a_connection_that_drops_mid_command_is_a_hang_naming_it(
        key: ssh.ClientKey, monkeypatch: pytest.MonkeyPatch) -> None:
    chan = _Chan([], status=None, closed=True)
    g = _connected(key, monkeypatch, chan)
    asked = []
    g.watchdog = lambda since: asked.append(since)
    with pytest.raises(GuestHang, match="closed before the command finished: sleep 9"):
        g.run("sleep 9")
    assert len(asked) == 1  # a dead guest would have said so first


def test_a_command_that_outlives_its_timeout_is_a_hang(key: ssh.ClientKey,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    g = _connected(key, monkeypatch, _Chan([], status=None))
    with pytest.raises(GuestHang, match="command did not finish in 0 s: sleep 9"):
        g.run("sleep 9", timeout=0)


def test_a_gone_transport_is_a_hang(key: ssh.ClientKey, monkeypatch: pytest.MonkeyPatch) -> None:
    g = _connected(key, monkeypatch, None, active=False)
    with pytest.raises(GuestHang, match="the SSH connection to the guest is gone"):
        g.run("true")
    with pytest.raises(GuestHang, match="is gone"):
        g.open_forward(80)


def test_a_port_nobody_listens_on_is_no_forward(key: ssh.ClientKey,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    g = _connected(key, monkeypatch, None)

    def refuse(*a: Any, **kw: Any) -> None:
        raise paramiko.ChannelException(2, "Connect failed")
    g.client.get_transport().open_channel = refuse  # type: ignore[union-attr]
    assert g.open_forward(8080) is None


class _SFTP:
    def __init__(self) -> None:
        self.puts: list[tuple[str, str]] = []
        self.dirs: list[str] = []
        self.modes: dict[str, int] = {}
        self.closed = False

    def put(self, local: str, remote: str) -> None:
        self.puts.append((local, remote))

    def mkdir(self, path: str) -> None:
        self.dirs.append(path)

    def chmod(self, path: str, mode: int) -> None:
        self.modes[path] = mode

    def close(self) -> None:
        self.closed = True


def test_push_copies_a_tree_without_pycache_keeping_modes(tmp_path: Path,
                                                          key: ssh.ClientKey) -> None:
    src = tmp_path / "probes"
    (src / "sub").mkdir(parents=True)
    (src / "__pycache__").mkdir()
    (src / "run.py").write_text("")
    os.chmod(src / "run.py", 0o755)
    (src / "sub" / "lib.py").write_text("")
    (src / "__pycache__" / "run.cpython-311.pyc").write_text("")
    sftp = _SFTP()
    g = ssh.GuestSSH(2222, key, key.public_line)
    g._client = SimpleNamespace(open_sftp=lambda: sftp)  # type: ignore[assignment]
    g.push(src, "/opt/p")
    assert sftp.dirs == ["/opt/p", "/opt/p/sub"]
    assert sorted(t for _, t in sftp.puts) == ["/opt/p/run.py", "/opt/p/sub/lib.py"]
    assert sftp.modes["/opt/p/run.py"] == 0o755 and sftp.closed


def test_push_of_a_file_puts_it_where_asked(tmp_path: Path, key: ssh.ClientKey) -> None:
    f = tmp_path / "repro"
    f.write_text("")
    os.chmod(f, 0o700)
    sftp = _SFTP()
    g = ssh.GuestSSH(2222, key, key.public_line)
    g._client = SimpleNamespace(open_sftp=lambda: sftp)  # type: ignore[assignment]
    g.push(f, "/tmp/repro")
    assert sftp.puts == [(str(f), "/tmp/repro")] and sftp.modes == {"/tmp/repro": 0o700}
