"""From a runner response to a ProbeResult or a ProbeError; and the guest runner itself,
which is stdlib-only and runs on the host as well."""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from harness.errors import ProbeCrashed, ProbeError, ProbeOutputError, ProbeTimeout
from harness.guest import probe_client
from harness.paths import PROBES

RUNNER = PROBES / "runner.py"


def resp(**kw) -> dict:
    base = {"probe": "p", "status": "exited", "code": 0, "stdout": '{"a": 1}\n', "stderr": "",
            "duration_s": 0.01}
    base.update(kw)
    return base


def test_ok() -> None:
    r = probe_client.interpret(resp())
    assert r.data == {"a": 1} and r.probe == "p"


def test_timeout() -> None:
    with pytest.raises(ProbeTimeout, match="no result within its timeout"):
        probe_client.interpret(resp(status="timeout", code=None, stdout=""))


def test_a_timeout_says_where_each_thread_waited() -> None:
    stuck = [{"pid": 7, "tid": 7, "comm": "python3", "state": "S", "wchan": "perf_poll",
              "stack": ["perf_poll+0x4d/0x100", "do_sys_poll+0x2b1/0x560"]},
             {"pid": 7, "tid": 9, "comm": "python3", "state": "D", "wchan": "mutex_lock",
              "stack": []}]
    with pytest.raises(ProbeTimeout) as e:
        probe_client.interpret(resp(status="timeout", code=None, stdout="", stuck=stuck,
                                    stderr="readers: 3 read, 0 lost, waiting for 5\n"))
    first, *rest = str(e.value).splitlines()
    assert "python3 7 S in perf_poll; python3 9 D in mutex_lock" in first, first
    assert "waiting for 5" in first, first  # the probe's own last words: what it waited for
    assert "perf_poll+0x4d/0x100 <- do_sys_poll+0x2b1/0x560" in "\n".join(rest)


def test_crash_carries_traceback() -> None:
    tb = 'Traceback (most recent call last):\n  File "p.py"\nZeroDivisionError: division by zero\n'
    with pytest.raises(ProbeCrashed) as e:
        probe_client.interpret(resp(code=1, stdout="", stderr=tb))
    assert "ZeroDivisionError" in str(e.value) and e.value.stderr == tb


def test_a_crash_names_its_last_stderr_line_on_the_first_line() -> None:
    # Summaries show a failure's first line: the error a probe died of must be on it.
    usage = "usage: p.py [-h] {a,b}\np.py: error: argument check: invalid choice: 'c'\n"
    with pytest.raises(ProbeCrashed) as e:
        probe_client.interpret(resp(code=2, stdout="", stderr=usage))
    first = str(e.value).splitlines()[0]
    assert "status 2" in first and "invalid choice: 'c'" in first, first


def test_signal() -> None:
    with pytest.raises(ProbeCrashed, match="killed by signal 7"):
        probe_client.interpret(resp(status="signaled", code=7))


def test_not_json() -> None:
    with pytest.raises(ProbeOutputError, match="not one JSON document.*hello"):
        probe_client.interpret(resp(stdout="hello world\n"))


def test_json_but_not_an_object() -> None:
    with pytest.raises(ProbeOutputError, match="not an object"):
        probe_client.interpret(resp(stdout="[1, 2]"))


def test_runner_error() -> None:
    with pytest.raises(ProbeError, match="guest runner failed"):
        probe_client.interpret(resp(status="error", error="boom"))


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The guest runner module, loaded from a copy beside test probes of our own."""
    (tmp_path / "runner.py").write_text(RUNNER.read_text())
    (tmp_path / "probe_ok.py").write_text(
        "import json\ndef main(argv):\n    print(json.dumps({'argv': argv}))\n    return 0\n")
    (tmp_path / "probe_hang.py").write_text("import time\ndef main(argv):\n    time.sleep(60)\n")
    (tmp_path / "probe_boom.py").write_text("def main(argv):\n    return 1 // 0\n")
    (tmp_path / "probe_segv.py").write_text(
        "import os, signal\ndef main(argv):\n    os.kill(os.getpid(), signal.SIGSEGV)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = importlib.util.spec_from_file_location("ringlab_runner", tmp_path / "runner.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_runner_runs_a_probe(runner) -> None:
    r = probe_client.interpret(runner.run_probe("probe_ok", ["x", "y"]))
    assert r.data == {"argv": ["x", "y"]}


def test_runner_kills_a_hanging_probe(runner) -> None:
    out = runner.run_probe("probe_hang", [], timeout=0.5)
    assert out["status"] == "timeout" and out["duration_s"] < 5
    # Read before the kill: the sleeping probe, asleep in the kernel, and where.
    [task] = out["stuck"]
    assert task["state"] == "S" and task["wchan"] not in ("", "0"), task
    with pytest.raises(ProbeTimeout):
        probe_client.interpret(out)


def test_runner_reports_a_crash_with_traceback(runner) -> None:
    with pytest.raises(ProbeCrashed, match="ZeroDivisionError"):
        probe_client.interpret(runner.run_probe("probe_boom", []))


def test_runner_reports_a_signal(runner) -> None:
    out = runner.run_probe("probe_segv", [])
    assert out["status"] == "signaled" and out["code"] == 11


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")
def test_runner_drops_privileges(runner, tmp_path: Path) -> None:
    (tmp_path / "probe_whoami.py").write_text(
        "import json, os\ndef main(argv):\n    print(json.dumps({'euid': os.geteuid()}))\n")
    os.chmod(tmp_path, 0o755)
    out = runner.run_probe("probe_whoami", [], user="nobody")
    assert probe_client.interpret(out).data["euid"] != 0


def test_runner_serves_json_lines(tmp_path: Path, runner) -> None:
    import subprocess
    reqs = "\n".join(json.dumps(r) for r in (
        {"op": "ping", "id": 1}, {"op": "run", "id": 2, "probe": "probe_ok", "args": ["a"]},
        {"op": "nope", "id": 3})) + "\n"
    proc = subprocess.run([sys.executable, str(tmp_path / "runner.py"), "--serve"], input=reqs,
                          capture_output=True, text=True, timeout=60)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines[0]["status"] == "ready" and "probe_ok" in lines[0]["probes"]
    assert lines[1] == {"id": 1, "status": "ok"}
    assert json.loads(lines[2]["stdout"]) == {"argv": ["a"]}
    assert lines[3]["status"] == "error" and "unknown op" in lines[3]["error"]


def test_every_probe_has_help() -> None:
    import subprocess
    folder = RUNNER.parent
    for p in sorted(folder.glob("probe_*.py")):
        proc = subprocess.run([sys.executable, str(p), "--help"], capture_output=True, text=True,
                              timeout=60, cwd=folder)
        assert proc.returncode == 0 and "usage:" in proc.stdout, p.name


def test_runner_refresh_sets_the_clock_and_credits_the_entropy(runner, monkeypatch) -> None:
    """A restored guest's clock and pool (RNDADDENTROPY then RNDRESEEDCRNG), without setting
    the host's clock."""
    calls: list = []
    monkeypatch.setattr(runner.time, "clock_settime_ns", lambda clk, ns: calls.append((clk, ns)))
    monkeypatch.setattr(runner.fcntl, "ioctl", lambda fd, req, arg=0: calls.append((req, arg)))
    runner.refresh(1_700_000_000_123_456_789, b"\x01\xff")
    import struct
    import time as host_time
    assert calls == [(host_time.CLOCK_REALTIME, 1_700_000_000_123_456_789),
                     (0x40085203, struct.pack("ii", 16, 2) + b"\x01\xff"), (0x5207, 0)]


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_runner_daemon_serves_each_root_connection_and_refuses_others(tmp_path: Path,
                                                                      runner) -> None:
    """--listen returns once the daemon listens; a connection gets the ready line with the
    pushed probes' digest, then answers requests; a second connection is served by a fork of
    its own; a connection from another uid is closed unanswered."""
    import os
    import socket
    import subprocess
    (tmp_path / ".digest").write_text("abc123\n")
    port = _free_port()
    p = subprocess.run([sys.executable, "-u", str(tmp_path / "runner.py"), "--listen", str(port)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and json.loads(p.stdout)["status"] == "listening", p
    daemon = None
    try:
        def session() -> tuple[dict, dict]:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
                f = c.makefile("rw")
                hello = json.loads(f.readline())
                f.write(json.dumps({"op": "run", "id": 1, "probe": "probe_ok",
                                    "args": ["z"]}) + "\n")
                f.flush()
                return hello, json.loads(f.readline())
        hello, resp = session()
        daemon = hello["pid"]
        assert hello["status"] == "ready" and hello["digest"] == "abc123"
        assert "probe_ok" in hello["probes"] and json.loads(resp["stdout"]) == {"argv": ["z"]}
        again, _ = session()
        assert again["pid"] != daemon, "each connection is served by a fork of its own"
        if os.geteuid() != 0:
            return
        # Another uid: the daemon's fork checks the peer socket's owner and says nothing.
        other = subprocess.run(
            [sys.executable, "-c", "import encodings.idna,os,socket,sys; os.setgid(65534); os.setuid(65534); "
             "c=socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=20); "
             "print(repr(c.recv(100)))", str(port)], capture_output=True, text=True, timeout=30)
        assert other.returncode == 0 and other.stdout.strip() == "b''", other
    finally:
        subprocess.run(["pkill", "-f", f"runner.py --listen {port}$"], check=False)
        if daemon:
            for _ in range(50):
                try:
                    os.kill(daemon, 0)
                except ProcessLookupError:
                    break
                import time
                time.sleep(0.1)


def test_peer_uid_reads_the_owner_of_the_other_end(tmp_path: Path, runner) -> None:
    """/proc/net/tcp lists the peer's socket as local=their end, remote=ours, uid column 8."""
    class Conn:
        def getpeername(self):
            return ("127.0.0.1", 40000)

        def getsockname(self):
            return ("127.0.0.1", 7907)
    table = tmp_path / "tcp"
    table.write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100007F:1EE3 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0 "
        "       0 100 1 0 100 0 0 10 0\n"
        "   1: 0100007F:9C40 0100007F:1EE3 01 00000000:00000000 00:00000000 00000000  1000 "
        "       0 101 1 0 20 4 30 10 -1\n")
    import sys as _sys
    if _sys.byteorder == "little":
        assert runner.peer_uid(Conn(), str(table)) == 1000
    assert runner.peer_uid(type("C", (), {"getpeername": lambda s: ("127.0.0.1", 1),
                                           "getsockname": Conn.getsockname})(), str(table)) is None


def test_a_deadline_is_sized_to_the_checks_own_work() -> None:
    d = probe_client.Deadlines({"probe_a check": 2.0, "probe_b": 0.5}, margin=6, floor_s=15,
                               default_s=60, arch_slowdown={"arm64": 6})
    assert d.for_call("probe_a", ["check", "3"], "x86_64") == 27.0  # 6 x 2 s + 15 s
    assert d.for_call("probe_b", [], "x86_64") == 18.0
    assert d.for_call("probe_a", ["other"], "x86_64") == 60.0  # not measured: the default
    assert d.for_call("probe_a", ["check"], "arm64") == 162.0  # arm64 TCG: 4-6x slower


def test_the_checked_in_deadlines_cover_the_suites_probes() -> None:
    d = probe_client.Deadlines.load()
    assert d.margin >= 2 and d.floor_s >= 5 and d.default_s >= 30
    for name in ("probe_perf_ring concurrency", "probe_pinning stress", "probe_perf_aux datapath"):
        assert name in d.measured_s, name
    assert all(0 < s < 60 for s in d.measured_s.values()), d.measured_s
