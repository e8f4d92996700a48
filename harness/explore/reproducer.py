"""A failure's shortest sequence as programs a kernel developer runs with no ringlab: a stdlib
Python script and a C file in kselftest style (exit 0 pass, 1 fail, 4 skip; `gcc -o repro
repro.c`). Both make the same calls as the explorer, in order, print each result beside what
the ABI allows (the model's answer, computed here), and fail on the first that differs, on
VmPin, on the end state (the allowance mapped again; the buffer resized and the instance
removed) or on a splat in the kernel log. Run them as root: they set the sysctls the sequence
had, then become a fresh user as the explorer did."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Protocol

from harness.explore.c_reproducer import TRACEFS_FILE, Step
from harness.guest.probe_client import PROBES_DIR

UID = 54321   # a user id no account has: its perf_mlock starts at 0


class FailureLike(Protocol):
    path: str
    check: str
    setup: dict
    env: dict
    steps: list[dict]


def replay_json(f: FailureLike) -> str:
    """What `probe_explore.py replay PATH JSON` takes."""
    return json.dumps({"setup": f.setup, "steps": f.steps}, separators=(",", ":"))


def _model_module(path: str) -> ModuleType:
    """The path's model, loaded from probes/ (pure Python, no guest needed)."""
    name = "explore_trace" if path == "trace-mmap" else "explore_perf"
    qualified = f"ringlab_probes_{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, PROBES_DIR / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = mod    # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def expectations(f: FailureLike) -> list[dict[str, Any]]:
    """Per step: the results the model allows and the VmPin (kB) it expects after it; the
    model fed its own first allowed result, as the shrunk sequence ran on a good kernel."""
    mod = _model_module(f.path)
    world = mod.TraceWorld if f.path == "trace-mmap" else mod.PerfWorld
    model = world.model(f.path, dict(f.setup, **f.env))
    out = []
    for step in f.steps:
        if not model.valid(step):
            continue
        allowed = sorted(model.expect(step))
        model.apply(step, "ok" if "ok" in allowed else allowed[0])
        out.append({"step": step, "allowed": allowed,
                    "vm_pin_kb": model.observe().get("vm_pin_kb")})
    return out


# --- Python --------------------------------------------------------------------------------

_PY_HEAD = '''#!/usr/bin/env python3
"""{title}

Found by ringlab's explorer (./lab explore {path}); run as root on the kernel to test.
Exit 0: the kernel kept the ABI; 1: it did not (the line marked FAIL); 4: cannot run here."""
import ctypes, errno, fcntl, mmap, os, resource, struct, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mremap.restype = ctypes.c_void_p
libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int,
                        ctypes.c_void_p]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
libc.read.restype = ctypes.c_ssize_t
libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
PAGE = os.sysconf("SC_PAGE_SIZE")
MAP_FAILED = ctypes.c_void_p(-1).value
failed = []


def res(ok):
    return "ok" if ok else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def step(n, what, got, allowed):
    bad = got not in allowed
    print(f"step {{n}}: {{what}} -> {{got}}" + (f"   FAIL: the ABI allows {{allowed}}" if bad else ""))
    if bad:
        failed.append(n)


def mapping(addr):
    return addr not in (None, MAP_FAILED)


def fork():
    """A child that exits with how many of the mappings it has (mincore(): ENOMEM where
    nothing is mapped): "ok" when none, "inherits N" otherwise."""
    pid = os.fork()
    if pid == 0:
        vec = ctypes.create_string_buffer(1 << 16)
        os._exit(sum(libc.mincore(a, n, vec) == 0 for a, n in m.values()))
    status = os.waitpid(pid, 0)[1]
    if not os.WIFEXITED(status):
        return "child failed"
    return f"inherits {{os.WEXITSTATUS(status)}}" if os.WEXITSTATUS(status) else "ok"


def vm_pin_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmPin:"):
            return int(line.split()[1])
    return -1


def sysctl(name, value):
    with open(f"/proc/sys/kernel/{{name}}", "w") as f:
        f.write(str(value))


kmsg = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
os.lseek(kmsg, 0, os.SEEK_END)


def splats():
    out = []
    while True:
        try:
            rec = os.read(kmsg, 8192).decode(errors="replace")
        except BlockingIOError:
            return out
        except OSError:
            continue
        text = rec.partition(";")[2].split("\\n")[0]
        if any(b in text for b in ("WARNING:", "BUG:", "Oops", "refcount_t:", "UBSAN:")):
            out.append(text)
'''

_PY_PERF = '''
NR_PERF_EVENT_OPEN = {{"x86_64": 298, "aarch64": 241}}[os.uname().machine]


def perf_event_open(type_, config, flags, sample_period=0, sample_type=0):
    attr = bytearray(128)
    struct.pack_into("<IIQQQQQ", attr, 0, type_, 128, config, sample_period, sample_type, 0,
                     flags)
    buf = (ctypes.c_char * 128).from_buffer(attr)
    fd = libc.syscall(NR_PERF_EVENT_OPEN, buf, 0, -1, -1, 8)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "perf_event_open")
    return fd


def open_event(kind):
    if kind == "dummy":   # PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY, disabled, user only
        return perf_event_open(1, 9, 1 | 1 << 5 | 1 << 6)
    if kind == "tp":      # the getppid tracepoint, a sample per call: IDENTIFIER|TID|TIME
        tp = int(open("/sys/kernel/tracing/events/syscalls/sys_enter_getppid/id").read())
        return perf_event_open(2, tp, 0, 1, 1 << 16 | 1 << 1 | 1 << 2)
    if not os.path.exists("/sys/bus/event_source/devices/ringlab_aux"):
        print("the test PMU ringlab_aux is not loaded (ringlab's kernels/modules/ringlab_aux)")
        sys.exit(4)
    pmu = int(open("/sys/bus/event_source/devices/ringlab_aux/type").read())
    return perf_event_open(pmu, 4096, 1 | 1 << 5 | 1 << 6)


if os.geteuid() != 0:
    print("run as root (it sets perf sysctls, then becomes user {uid})")
    sys.exit(4)
sysctl("perf_event_mlock_kb", {mlock_kb})
sysctl("perf_event_paranoid", 1)
resource.setrlimit(resource.RLIMIT_MEMLOCK, ({rlimit}, {rlimit}))
os.setgroups([])
os.setresgid({uid}, {uid}, 0)
os.setresuid({uid}, {uid}, 0)   # a fresh user: its perf_mlock starts at 0
{caps}fd, m, mfd = {{}}, {{}}, {{}}   # events, mappings, mapping: (event, writable)
'''

_PY_PERF_END = '''
for a, n in m.values():
    libc.munmap(a, n)
for f in fd.values():
    os.close(f)
pin = vm_pin_kb()
print(f"end: VmPin {{pin}} kB with everything unmapped" + ("   FAIL" if pin else ""))
if pin:
    failed.append("end")
# The user's whole allowance, perf_event_mlock_kb x CPUs, mapped with RLIMIT_MEMLOCK 0 and no
# CAP_IPC_LOCK: every page of it must fit in what the sequence gave back.
{drop}resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
left = {mlock_kb} // (PAGE // 1024) * os.sysconf("SC_NPROCESSORS_ONLN")
while left > 0:
    size = 1 if left == 1 else 1 + (1 << ((left - 1).bit_length() - 1))
    f = open_event("dummy")
    a = libc.mmap(None, size * PAGE, 3, 1, f, 0)
    if not mapping(a):
        print(f"end: the allowance: {{res(False)}} mapping {{size}} pages   FAIL")
        failed.append("allowance")
        break
    left -= size
if "allowance" not in failed:
    print(f"end: the allowance maps again, VmPin {{vm_pin_kb()}} kB")
'''

_PY_TRACE = '''
GET_READER = 0x5220     # TRACE_MMAP_IOCTL_GET_READER, _IO('R', 0x20)
root = "/sys/kernel/tracing"
inst = f"{{root}}/instances/ringlab-repro-{{os.getpid()}}"
os.mkdir(inst)


def write(name, value):
    try:
        fd_ = os.open(f"{{inst}}/{{name}}", os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd_, f"{{value}}\\n".encode())
        finally:
            os.close(fd_)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]


write("buffer_size_kb", {buffer_kb})
write("buffer_subbuf_size_kb", {subbuf_kb})
os.sched_setaffinity(0, {{0}})
fd, m = {{}}, {{}}
'''

_PY_TRACE_END = '''
for a, n in m.values():
    libc.munmap(a, n)
for f in fd.values():
    os.close(f)
got = write("buffer_size_kb", {buffer_kb} + 4)
print(f"end: buffer_size_kb with nothing mapped -> {{got}}" + ("" if got == "ok" else "   FAIL"))
try:
    os.rmdir(inst)
    print("end: rmdir of the instance -> ok")
except OSError as e:
    print(f"end: rmdir of the instance -> {{errno.errorcode[e.errno]}}   FAIL")
    failed.append("rmdir")
if got != "ok":
    failed.append("resize")
'''

_PY_TAIL = '''
new = splats()
for line in new:
    print(f"kernel log: {line}   FAIL")
if new:
    failed.append("splat")
print("FAIL: the kernel did not keep the ABI" if failed else "PASS")
sys.exit(1 if failed else 0)
'''


# --- each operation's Python, one function per operation ------------------------------------

_MADVICE = {"dofork": 11, "dontfork": 10, "dontdump": 16, "wipeonfork": 18}


def _open(s: Step) -> list[str]:
    i, a = s.id, s.args
    if not s.trace:
        return [f"fd[{i}] = open_event({a[0]!r})", "got = 'ok'"]
    mode = "os.O_RDWR" if a[1:] == ["rw"] else "os.O_RDONLY"
    return [f"fd[{i}] = os.open(f'{{inst}}/per_cpu/cpu{a[0]}/trace_pipe_raw', "
            f"{mode} | os.O_NONBLOCK)", "got = 'ok'"]


def _pause(s: Step) -> list[str]:
    return [f"fcntl.ioctl(fd[{s.ref()}], 0x40042409, {s.args[1]})  # PAUSE_OUTPUT", "got = 'ok'"]


def _ioctl(s: Step) -> list[str]:
    return [f"fcntl.ioctl(fd[{s.ref()}], 0x5221)  # _IO('R', 0x21): no such ioctl", "got = 'ok'"]


def _poke(s: Step) -> list[str]:
    """A zero byte stored by the kernel: 1 byte or EFAULT, no signal."""
    return ["zero = os.open('/dev/zero', os.O_RDONLY)",
            f"got = res(libc.read(zero, m[{s.ref()}][0] + {s.args[1]} * PAGE + 512, 1) == 1)",
            "os.close(zero)"]


def _mprotect(s: Step) -> list[str]:
    return [f"got = res(libc.mprotect(*m[{s.ref()}], 3) == 0)  # PROT_READ|WRITE"]


def _close(s: Step) -> list[str]:
    return [f"os.close(fd.pop({s.ref()}))", "got = 'ok'"]


def _mmap(s: Step) -> list[str]:
    return _mmap_trace(s) if s.trace else _mmap_perf(s)


def _mmap_perf(s: Step) -> list[str]:
    i, a = s.id, s.args
    prot = 3 if a[2] == "rw" else 1
    flags = 1 if a[3] == "shared" else 2
    return [f"addr = libc.mmap(None, {a[1]} * PAGE, {prot}, {flags}, fd[{s.ref()}], 0)",
            "got = res(mapping(addr))",
            f"if got == 'ok': m[{i}], mfd[{i}] = (addr, {a[1]} * PAGE), "
            f"({s.ref()}, {a[2] == 'rw'})"]


def _mmap_trace(s: Step) -> list[str]:
    a = s.args
    prot = {"rw": 3, "rx": 5}.get(a[2], 1)
    flags = 1 if a[3] == "shared" else 2
    offset = "PAGE" if a[1] == "off" else "0"     # "off": the first sub-buffer's page
    lines = [f"addr = libc.mmap(None, PAGE, {prot}, {flags}, fd[{s.ref()}], {offset})",
             "got = res(mapping(addr))", "length = PAGE"]
    if a[1] in ("all", "past"):
        lines += _whole_trace_buffer(s, prot, flags)
    return lines + [f"if got == 'ok': m[{s.id}] = (addr, length)"]


def _whole_trace_buffer(s: Step, prot: int, flags: int) -> list[str]:
    """meta_page_size + nr_subbufs * subbuf_size (one sub-buffer more for "past"), read from
    the meta page, mapped in its place."""
    more = " + 1" if s.args[1] == "past" else ""
    return ["if got == 'ok':",
            "    msz, _, sub, nsub = struct.unpack_from('<IIII', ctypes.string_at(addr, 16))",
            f"    length = msz + (nsub{more}) * sub",
            f"    new = libc.mmap(None, length, {prot}, {flags}, fd[{s.ref()}], 0)",
            "    libc.munmap(addr, PAGE)",
            "    addr, got = new, res(mapping(new))"]


def _aux(s: Step) -> list[str]:
    d, pages = s.ref(), s.args[1]
    return [f"data = next(m[k] for k, v in mfd.items() if v == ({d}, True) and k in m)",
            "struct.pack_into('<QQ', (ctypes.c_char * 16).from_address(data[0] + 1072), "
            f"0, data[1], {pages} * PAGE)  # aux_offset, aux_size",
            f"addr = libc.mmap(None, {pages} * PAGE, 3, 1, fd[{d}], data[1])",
            "got = res(mapping(addr))",
            f"if got == 'ok': m[{s.id}] = (addr, {pages} * PAGE)"]


def _munmap(s: Step) -> list[str]:
    return [f"got = res(libc.munmap(*m[{s.ref()}]) == 0)", f"if got == 'ok': del m[{s.ref()}]"]


def _munmap_part(s: Step) -> list[str]:
    return [f"addr, length = m[{s.ref()}]",
            "got = res(libc.munmap(addr + length - PAGE, PAGE) == 0)"]


def _mremap(s: Step) -> list[str]:
    how, lines = s.args[1], [f"addr, length = m[{s.ref()}]"]
    if how == "move":
        return lines + ["spot = libc.mmap(None, length, 0, 0x22, -1, 0)",
                        "new = libc.mremap(addr, length, length, 3, spot)  # MAYMOVE|FIXED",
                        "got = res(mapping(new))",
                        f"if got == 'ok': m[{s.ref()}] = (new, length)"]
    size = {"grow": "length + PAGE", "shrink": "length - PAGE", "dontunmap": "length"}[how]
    flags = 5 if how == "dontunmap" else 0
    return lines + [f"new = libc.mremap(addr, length, {size}, {flags}, None)",
                    "got = res(mapping(new))"]


def _madvise(s: Step) -> list[str]:
    return [f"got = res(libc.madvise(*m[{s.ref()}], {_MADVICE[s.args[1]]}) == 0)"]


def _fork(s: Step) -> list[str]:
    return ["got = fork()"]


def _fire(s: Step) -> list[str]:
    return [f"for _ in range({s.args[0]}): os.getppid()", "got = 'ok'"]


def _consume(s: Step) -> list[str]:
    return [f"addr = m[{s.ref()}][0]  # data_tail = data_head",
            "ctypes.c_uint64.from_address(addr + 1032).value = "
            "ctypes.c_uint64.from_address(addr + 1024).value", "got = 'ok'"]


def _get_reader(s: Step) -> list[str]:
    return ["try:", f"    fcntl.ioctl(fd[{s.ref()}], GET_READER)", "    got = 'ok'",
            "except OSError as e:", "    got = errno.errorcode[e.errno]"]


def _write(s: Step) -> list[str]:
    return [f"for _ in range({s.args[0]}): got = write('trace_marker', 'ringlab')"]


def _tracefs(s: Step) -> list[str]:
    return [f"got = write({TRACEFS_FILE[s.op]!r}, {s.args[0]})"]


_PY_OPS: dict[str, Callable[[Step], list[str]]] = {
    "open": _open, "pause": _pause, "ioctl": _ioctl, "poke": _poke, "mprotect": _mprotect,
    "close": _close, "mmap": _mmap, "aux": _aux, "munmap": _munmap,
    "munmap-part": _munmap_part, "mremap": _mremap, "madvise": _madvise, "fork": _fork,
    "fire": _fire, "consume": _consume, "get-reader": _get_reader, "write": _write,
    **{op: _tracefs for op in TRACEFS_FILE}}


def _py_step(n: int, step: dict, allowed: list[str] | None, pin: int | None, path: str
             ) -> list[str]:
    """A step's lines: the call, its result, and the verdict on it (with `allowed` None, as
    for two actors at once, the result is only said: the end state judges)."""
    s = Step.of(step, path)
    if s.op not in _PY_OPS:
        raise ValueError(f"no reproducer for the operation {s.op!r}")
    lines = _py_guarded(_PY_OPS[s.op](s))
    if allowed is None:
        return lines + [f"print(f'actor {step.get('actor', 0)} step {n}: {s.what} -> {{got}}')"]
    return lines + _py_verdict(n, s.what, allowed, pin)


def _py_guarded(call: list[str]) -> list[str]:
    """A step's call in a try: an errno becomes its result, and a slot a failed step never
    filled says so, instead of ending the script."""
    return ["try:"] + ["    " + x for x in call] + \
        ["except OSError as e:", "    got = errno.errorcode[e.errno]",
         "except KeyError:   # made by a step that failed", "    got = 'no such object'"]


def _py_verdict(n: int, what: str, allowed: list[str], pin: int | None) -> list[str]:
    """The result judged against what the ABI allows, then VmPin against the charge model."""
    lines = [f"step({n}, {what!r}, got, {allowed!r})"]
    if pin is not None:
        lines += [f"if vm_pin_kb() != {pin}:",
                  f"    print(f'step {n}: VmPin {{vm_pin_kb()}} kB, the charge model says {pin}"
                  f"   FAIL')", f"    failed.append({n})"]
    return lines


def python_script(f: FailureLike, title: str) -> str:
    exp = [] if is_concurrent(f) else expectations(f)
    s = dict(f.setup, **f.env)
    head = _PY_HEAD.format(title=title, path=f.path)
    if f.path == "trace-mmap":
        head += _PY_TRACE.format(buffer_kb=s["buffer_kb"], subbuf_kb=s["subbuf_kb"])
    else:
        caps = ""
        if s.get("who") == "user+ipc_lock":
            caps = ("# CAP_IPC_LOCK effective (capset, _LINUX_CAPABILITY_VERSION_3)\n"
                    "hdr = struct.pack('<Ii', 0x20080522, 0)\n"
                    "data = struct.pack('<6I', 1 << 14, 1 << 14, 0, 0, 0, 0)\n"
                    "libc.syscall(126 if os.uname().machine == 'x86_64' else 91, hdr, data)\n")
        head += _PY_PERF.format(mlock_kb=s["mlock_kb"], rlimit=s["rlimit_pages"] * s["page_size"],
                                uid=UID, caps=caps)
    body: list[str] = []
    if is_concurrent(f):
        body = _py_actors(f)
    for n, e in enumerate([] if body else exp):
        body += [""] + _py_step(n, e["step"], e["allowed"], e["vm_pin_kb"], f.path)
    if f.path == "trace-mmap":
        end = _PY_TRACE_END.format(buffer_kb=s["buffer_kb"])
    else:
        drop = ("libc.syscall(126 if os.uname().machine == 'x86_64' else 91, hdr, "
                "bytes(24))  # CAP_IPC_LOCK off\n" if s.get("who") == "user+ipc_lock" else "")
        end = _PY_PERF_END.format(mlock_kb=s["mlock_kb"], drop=drop)
    return head + "\n".join(body) + "\n" + end + _PY_TAIL


def is_concurrent(f: FailureLike) -> bool:
    """Found by two actors at once (`--actors 2`): its steps carry their actor."""
    return any("actor" in s for s in f.steps)


def _py_actors(f: FailureLike) -> list[str]:
    """Each actor's steps as a function, both run at once in threads of one process (as the
    explorer ran them): no step is judged, the end state and the kernel log are; the
    interleaving is the scheduler's, so a run may need repeating to fail."""
    body = ["import threading"]
    for i in (0, 1):
        lines: list[str] = []
        for n, step in enumerate(s for s in f.steps if s.get("actor", 0) == i):
            lines += _py_step(n, step, None, None, f.path)
        body += ["", "", f"def actor{i}():"] + ["    " + x for x in lines] + ["    pass"]
    return body + ["", "", "threads = [threading.Thread(target=a) for a in (actor0, actor1)]",
                   "for t in threads:", "    t.start()", "for t in threads:", "    t.join()"]


def write(folder: Path, f: FailureLike, title: str) -> list[Path]:
    """repro.py and repro.c for a failure, in `folder` (two actors at once: repro.py only,
    two threads)."""
    folder.mkdir(parents=True, exist_ok=True)
    py = folder / "repro.py"
    py.write_text(python_script(f, title))
    py.chmod(0o755)
    if is_concurrent(f):
        return [py]
    c = folder / "repro.c"
    from harness.explore import c_reproducer
    c.write_text(c_reproducer.program(f, title, expectations(f)))
    return [py, c]
