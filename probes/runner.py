"""Run probes in the guest: one by hand, or many through a fork server over one SSH channel.

By hand:   python3 runner.py probe_capabilities [ARGS...]
Serving:   python3 runner.py --serve   (the harness does this; JSON lines on stdin/stdout)

Why a server: under TCG a fresh `python3` with ctypes and json imported costs ~400 ms and an
SSH exec ~125 ms; a warm server that forks per request answers in a few tens of ms. Each probe
still runs in its own process (a fork), with its own stdout, stderr, user and time limit.

Requests:  {"op": "run", "id": N, "probe": NAME, "args": [...], "user": "root", "timeout": S}
           {"op": "kmsg", "id": N}     kernel log records since the previous kmsg request,
                                       and the kernel's taint mask
           {"op": "ping", "id": N}
Responses: {"id": N, "status": "exited"|"signaled"|"timeout", "code": C, "stdout": ..., ...}
Stdlib only.
"""
from __future__ import annotations

import faulthandler
import importlib
import json
import os
import pwd
import select
import signal
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


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
    if timed_out:
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
        result.update(status="timeout", code=None)
    elif os.WIFSIGNALED(status):
        result.update(status="signaled", code=os.WTERMSIG(status))
    else:
        result.update(status="exited", code=os.WEXITSTATUS(status))
    return result


class Kmsg:
    """Reads /dev/kmsg without blocking: each call returns the records written since the last."""

    def __init__(self) -> None:
        try:
            self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)
        except OSError:
            self.fd = -1

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


def serve() -> int:
    sys.path.insert(0, HERE)
    for name in _probe_names():  # preload, so each fork starts warm
        try:
            importlib.import_module(name)
        except Exception:  # a broken probe reports its error when it is run
            pass
    kmsg = Kmsg()
    print(json.dumps({"id": 0, "status": "ready", "probes": _probe_names()}), flush=True)
    for line in sys.stdin:
        try:
            req = json.loads(line)
            op = req.get("op")
            if op == "run":
                resp = run_probe(req["probe"], req.get("args", []), req.get("user", "root"),
                                 float(req.get("timeout", 60)))
            elif op == "kmsg":
                resp = {"status": "ok", "lines": kmsg.drain(), "tainted": _tainted()}
            elif op == "ping":
                resp = {"status": "ok"}
            else:
                resp = {"status": "error", "error": f"unknown op {op!r}"}
        except Exception:
            resp = {"status": "error", "error": traceback.format_exc()}
            req = req if isinstance(req, dict) else {}
        resp["id"] = req.get("id")
        print(json.dumps(resp), flush=True)
    return 0


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
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        print("\nprobes here: " + ", ".join(_probe_names()))
        return 0
    sys.path.insert(0, HERE)
    module = importlib.import_module(argv[0])
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
