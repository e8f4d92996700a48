"""probes/runner.py serves the host straight through QEMU's forward (issue 31 §2): who it
admits, and the `exec` op `./lab ssh -- CMD` uses."""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

import runner

from harness.guest.probe_client import runner_token


@pytest.fixture
def pair() -> tuple[socket.socket, socket.socket]:
    srv = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(srv.getsockname())
    conn, _ = srv.accept()
    srv.close()
    yield client, conn
    client.close()
    conn.close()


def _admit(conn: socket.socket) -> bool:
    with conn.makefile("rw", encoding="utf-8", newline="\n") as f:
        return runner.admitted(conn, f)


def test_a_local_connection_of_the_daemons_own_user_is_admitted_without_a_token(pair) -> None:
    client, conn = pair
    assert _admit(conn)


@pytest.mark.parametrize("said, admitted", [({"token": "s3cret"}, True),
                                            ({"token": "guess"}, False), ({}, False)])
def test_a_host_connection_is_admitted_only_with_the_token(pair, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           said: dict, admitted: bool) -> None:
    client, conn = pair
    (tmp_path / ".token").write_text("s3cret")
    monkeypatch.setattr(runner, "TOKEN_FILE", str(tmp_path / ".token"))
    monkeypatch.setattr(runner, "peer_uid", lambda conn: None)  # not a socket of this guest
    client.sendall((json.dumps(said) + "\n").encode())
    assert _admit(conn) is admitted


def test_no_token_file_admits_no_host_connection(pair, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    client, conn = pair
    monkeypatch.setattr(runner, "TOKEN_FILE", str(tmp_path / "absent"))
    monkeypatch.setattr(runner, "peer_uid", lambda conn: None)
    client.sendall(b'{"token": ""}\n')
    assert not _admit(conn)


def test_the_token_comes_from_the_labs_key_and_is_not_the_key(tmp_path: Path) -> None:
    key = tmp_path / "id"
    key.write_bytes(b"-----BEGIN PRIVATE KEY-----\nabc\n")
    token = runner_token(key)
    assert len(token) == 32 and token == runner_token(key) and "abc" not in token
    key.write_bytes(b"other")
    assert runner_token(key) != token


def test_exec_runs_a_shell_command_and_says_its_status_and_output() -> None:
    r = runner.run_command("echo out; echo err >&2; exit 3", 10)
    assert (r["status"], r["code"], r["stdout"], r["stderr"]) == ("ok", 3, "out\n", "err\n")
    assert runner.run_command("sleep 5", 0.2)["status"] == "timeout"
