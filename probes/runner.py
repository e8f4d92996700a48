"""Run probes in the guest: one by hand, or many through a fork server over one SSH channel.

By hand:   python3 runner.py probe_capabilities [ARGS...]
Serving:   python3 runner.py --serve   (JSON lines on stdin/stdout)
Listening: python3 runner.py --listen PORT   (what the harness starts: returns once a daemon
           listens on PORT; each connection, reached straight from the host through QEMU's
           port forward or through SSH's direct-tcpip forwarding, gets its own forked server
           speaking the same JSON lines)

Why a server: under TCG a fresh `python3` with ctypes and json imported, and an SSH exec, cost
far more than a fork of a warm server (docs/guests.md has the figures). Each probe
still runs in its own process (a fork), with its own stdout, stderr, user and time limit.
Why a listening one: it is started before a guest is saved as a snapshot, so every guest
restored from it has its probes loaded and its server up the moment SSH answers, instead of
paying for python3 to start again. Why straight from the host: an SSH handshake costs a
restored guest more than the restore itself under TCG (OpenSSH execs sshd-session and
sshd-auth per connection; docs/results/2026-11-26-speed.md). Who is served: a connection from inside the guest only if its
peer socket is root's (/proc/net/tcp: the guest's `lab` user cannot reach a root server); one
from the host (QEMU's user network, which lets nothing else in) only once its first line is
{"token": T}, T the content of .token beside this file (root's, 0600, written over SSH when
the daemon was started): a host user without the lab's SSH key cannot drive it.

Requests:  {"op": "run", "id": N, "probe": NAME, "args": [...], "user": "root", "timeout": S}
           {"op": "kmsg", "id": N}     kernel log records since the previous kmsg request,
                                       and the kernel's taint mask ("from_boot": true: every
                                       record the kernel still holds, for a guest just booted
                                       again in its QEMU)
           {"op": "ping", "id": N}
           {"op": "exec", "id": N, "command": SH, "timeout": S}   a shell command as root
Responses: {"id": N, "status": "exited"|"signaled"|"timeout", "code": C, "stdout": ..., ...}
           (a timeout also says where each of the probe's threads waited: "stuck")
Stdlib only.
"""
from __future__ import annotations

import fcntl
import faulthandler
import importlib
import json
import os
import pwd
import select
import signal
import socket
import struct
import subprocess
import sys
import time
import traceback
from typing import IO

HERE = os.path.dirname(os.path.abspath(__file__))
# What the harness wrote beside the probes: the digest of the probes it pushed, so that a
# listening server started from older probes is told apart and replaced.
DIGEST_FILE = os.path.join(HERE, ".digest")


def _probe_names() -> list[str]:
    return sorted(f[:-3] for f in os.listdir(HERE) if f.startswith("probe_") and f.endswith(".py"))


def _drop_privileges(user: str) -> None:
    if user == "root":
        return
    pw = pwd.getpwnam(user)
    os.setgroups([])
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)
    os.environ.update(HOME=pw.pw_dir, USER=user, LOGNAME=user)


def _child(probe: str, args: list[str], user: str, out_fd: int, err_fd: int) -> None:
    """In the forked child: become `user`, point fds 1 and 2 at the pipes, run the probe."""
    code = 1
    try:
        os.setpgid(0, 0)
        faulthandler.disable()  # a probe's own crash is reported by its exit signal
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        # Import first: the probe files are root's, the probe may run as another user.
        module = importlib.import_module(probe)
        _drop_privileges(user)
        code = module.main(list(args))
        code = 0 if code is None else code  # as sys.exit(None)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)


def run_probe(probe: str, args: list[str], user: str = "root", timeout: float = 60.0) -> dict:
    """Fork, run `probe` in the child, collect its output within `timeout` seconds."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    start = time.monotonic()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        _child(probe, args, user, out_w, err_w)
    os.close(out_w)
    os.close(err_w)
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    open_fds = [out_r, err_r]
    deadline = start + timeout
    timed_out = False
    while open_fds:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        ready, _, _ = select.select(open_fds, [], [], remaining)
        for fd in ready:
            data = os.read(fd, 65536)
            if data:
                chunks[fd].append(data)
            else:
                open_fds.remove(fd)
    stuck: list[dict] = []
    if timed_out:
        stuck = stuck_tasks(pid)  # before the kill: where the kernel holds them
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    os.close(out_r)
    os.close(err_r)
    result = {"probe": probe, "duration_s": time.monotonic() - start,
              "stdout": b"".join(chunks[out_r]).decode("utf-8", "replace"),
              "stderr": b"".join(chunks[err_r]).decode("utf-8", "replace")}
    if timed_out:
        result.update(status="timeout", code=None, stuck=stuck)
    elif os.WIFSIGNALED(status):
        result.update(status="signaled", code=os.WTERMSIG(status))
    else:
        result.update(status="exited", code=os.WEXITSTATUS(status))
    return result


STACK_FRAMES = 12  # of a stuck task's kernel stack: where it waits, not the whole syscall


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def stuck_tasks(pgid: int) -> list[dict]:
    """What every thread of a probe's process group is doing in the kernel, read before the
    probe is killed for its deadline: state, wchan and kernel stack (/proc/PID/task/TID/stack
    needs root, which the runner is). A probe that hangs on a broken kernel then says what it
    waited for instead of only 'killed'."""
    tasks = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.getpgid(int(name)) != pgid:
                continue
            tids = os.listdir(f"/proc/{name}/task")
        except OSError:
            continue
        for tid in tids:
            base = f"/proc/{name}/task/{tid}"
            stat = _read(f"{base}/stat")
            state = stat[stat.rfind(")") + 2:].split(" ", 1)[0] if ")" in stat else "?"
            stack = [line.split("] ", 1)[-1] for line in _read(f"{base}/stack").splitlines()]
            tasks.append({"pid": int(name), "tid": int(tid), "comm": _read(f"{base}/comm").strip(),
                          "state": state, "wchan": _read(f"{base}/wchan").strip() or "0",
                          "stack": stack[:STACK_FRAMES]})
    return tasks


class Kmsg:
    """Reads /dev/kmsg without blocking: each call returns the records written since the last."""

    def __init__(self) -> None:
        try:
            self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)
        except OSError:
            self.fd = -1

    def rewind(self) -> None:
        """The next drain() starts at the oldest record the kernel still holds."""
        if self.fd >= 0:
            os.lseek(self.fd, 0, os.SEEK_SET)

    def drain(self) -> list[str]:
        lines = []
        while self.fd >= 0:
            try:
                record = os.read(self.fd, 8192).decode("utf-8", "replace")
            except BlockingIOError:
                break
            except OSError:  # EPIPE: records were overwritten before we read them
                lines.append("[ringlab: kernel log records were lost before they were read]")
                continue
            # "prio,seq,usec,flags;message\n continuation lines"
            head, _, msg = record.partition(";")
            fields = head.split(",")
            usec = int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else 0
            text = msg.split("\n")[0]
            lines.append(f"[{usec // 1000000:5d}.{usec % 1000000:06d}] {text}")
        return lines


def _preload() -> None:
    sys.path.insert(0, HERE)
    for name in _probe_names():  # preload, so each fork starts warm
        try:
            importlib.import_module(name)
        except Exception:  # a broken probe reports its error when it is run
            pass


def _digest() -> str:
    try:
        with open(DIGEST_FILE) as f:
            return f.read().strip()
    except OSError:
        return ""


def refresh(epoch_ns: int, entropy: bytes) -> None:
    """Make a guest restored from a snapshot its own: the clock stepped to the host's (it
    resumes where it was saved), and the random pool reseeded (every restore would otherwise
    draw the same /dev/urandom bytes until the kernel's next scheduled reseed): the host's
    bytes credited with RNDADDENTROPY, then RNDRESEEDCRNG to use them at once."""
    time.clock_settime_ns(time.CLOCK_REALTIME, epoch_ns)
    fd = os.open("/dev/urandom", os.O_WRONLY)
    try:
        fcntl.ioctl(fd, 0x40085203, struct.pack("ii", len(entropy) * 8, len(entropy)) + entropy)
        fcntl.ioctl(fd, 0x5207)
    finally:
        os.close(fd)


def run_command(command: str, timeout: float) -> dict:
    """`sh -c command` as root, its output and status (what `./lab ssh -- CMD` runs)."""
    try:
        r = subprocess.run(["sh", "-c", command], capture_output=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "stdout": "", "stderr": ""}
    return {"status": "ok", "code": r.returncode, "stdout": r.stdout.decode(errors="replace"),
            "stderr": r.stderr.decode(errors="replace")}


def serve(rfile: IO[str] | None = None, wfile: IO[str] | None = None,
          preloaded: bool = False) -> int:
    """Answer JSON-line requests from `rfile` on `wfile` (stdin and stdout by default)."""
    rfile, wfile = rfile or sys.stdin, wfile or sys.stdout
    if not preloaded:
        _preload()
    kmsg = Kmsg()

    def say(doc: dict) -> None:
        wfile.write(json.dumps(doc) + "\n")
        wfile.flush()

    say({"id": 0, "status": "ready", "probes": _probe_names(), "digest": _digest(),
         "pid": os.getpid()})
    for line in rfile:
        try:
            req = json.loads(line)
            op = req.get("op")
            if op == "run":
                resp = run_probe(req["probe"], req.get("args", []), req.get("user", "root"),
                                 float(req.get("timeout", 60)))
            elif op == "kmsg":
                if req.get("from_boot"):
                    kmsg.rewind()
                resp = {"status": "ok", "lines": kmsg.drain(), "tainted": _tainted()}
            elif op == "refresh":
                refresh(int(req["epoch_ns"]), bytes.fromhex(req["entropy"]))
                resp = {"status": "ok"}
            elif op == "ping":
                resp = {"status": "ok"}
            elif op == "exec":
                resp = run_command(req["command"], float(req.get("timeout", 60)))
            else:
                resp = {"status": "error", "error": f"unknown op {op!r}"}
        except Exception:
            resp = {"status": "error", "error": traceback.format_exc()}
            req = req if isinstance(req, dict) else {}
        resp["id"] = req.get("id")
        say(resp)
    return 0


# What a connection from the host must say first (written by the harness when it started the
# daemon: harness/guest/probe_client.py runner_token()).
TOKEN_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".token")


def admitted(conn: socket.socket, f: IO[str]) -> bool:
    """Whether to serve this connection (the module's docstring says who is)."""
    uid = peer_uid(conn)
    if uid is not None:  # from inside the guest
        return uid == os.geteuid()
    try:
        with open(TOKEN_FILE) as t:
            token = t.read().strip()
        conn.settimeout(10)
        said = json.loads(f.readline() or "{}")
        conn.settimeout(None)
    except (OSError, ValueError):
        return False
    return bool(token) and isinstance(said, dict) and said.get("token") == token


def peer_uid(conn: socket.socket, tcp_table: str = "/proc/net/tcp") -> int | None:
    """The uid owning the other end of a loopback TCP connection, from the kernel's socket
    table (its `uid` column); None if the socket is not listed. TCP has no SO_PEERCRED."""
    def endpoint(addr: tuple[str, int]) -> str:
        return f"{socket.htonl(int.from_bytes(socket.inet_aton(addr[0]), 'big')):08X}:" \
               f"{addr[1]:04X}"
    theirs, ours = endpoint(conn.getpeername()), endpoint(conn.getsockname())
    with open(tcp_table) as f:
        for row in f.read().splitlines()[1:]:
            cols = row.split()
            if len(cols) > 7 and cols[1] == theirs and cols[2] == ours:
                return int(cols[7])
    return None


def listen(port: int) -> int:
    """Bind 127.0.0.1:`port`, then become a daemon: print one JSON line once listening (so the
    SSH command that started it returns) and serve each connection of its own user (root, in a
    guest) in a fork of its own."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    deadline = time.monotonic() + 5  # a daemon just told to stop may still hold the port
    while True:
        try:
            sock.bind(("0.0.0.0", port))
            break
        except OSError as e:
            if time.monotonic() > deadline:
                print(json.dumps({"status": "error", "error": f"port {port}: {e.strerror}"}))
                return 1
            time.sleep(0.05)
    sock.listen(8)
    _preload()
    if os.fork():
        print(json.dumps({"status": "listening", "port": port, "digest": _digest()}), flush=True)
        os._exit(0)
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    while True:
        if select.select([sock], [], [], 1.0)[0]:
            conn, _ = sock.accept()
            if os.fork() == 0:
                sock.close()
                f = conn.makefile("rw", encoding="utf-8", newline="\n")
                if not admitted(conn, f):
                    os._exit(1)
                os._exit(serve(f, f, preloaded=True))
            conn.close()
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass


def _tainted() -> int:
    """/proc/sys/kernel/tainted: the taint flags as a bit mask (kernel/panic.c)."""
    try:
        with open("/proc/sys/kernel/tainted") as f:
            return int(f.read())
    except (OSError, ValueError):
        return -1


def main(argv: list[str]) -> int:
    if argv[:1] == ["--serve"]:
        return serve()
    if argv[:1] == ["--listen"] and len(argv) == 2 and argv[1].isdigit():
        return listen(int(argv[1]))
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        print("\nprobes here: " + ", ".join(_probe_names()))
        return 0
    sys.path.insert(0, HERE)
    module = importlib.import_module(argv[0])
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
