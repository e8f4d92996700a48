"""A failure's shortest sequence as programs a kernel developer runs with no ringlab: a stdlib
Python script and a C file in kselftest style (exit 0 pass, 1 fail, 4 skip; `gcc -o repro
repro.c`). Both make the same calls as the explorer, in order, print each result beside what
the ABI allows (the model's answer, computed here), and fail on the first that differs, on
VmPin, on the end state (the allowance mapped again; the buffer resized and the instance
removed) or on a splat in the kernel log. Run them as root: they set the sysctls the sequence
had, then become a fresh user as the explorer did."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from harness.probe_modules import probe_module

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


def world(path: str) -> Any:
    """The path's world class (probes/explore_*.py): its OPS and its model, on the host."""
    return probe_module("probe_explore").world_of(path)


def steps_of(f: FailureLike) -> list[dict]:
    """The failure's steps with named arguments, whatever format they were kept in."""
    return probe_module("explore_ops").named(world(f.path).OPS, f.steps)


def expectations(f: FailureLike) -> list[dict[str, Any]]:
    """Per step: the results the model allows, the VmPin (kB) it expects after it and, for a
    failure of a check made through a mapping (meta, subbuf, ring, aux, ctl), what that check
    must see after it; the model fed its own first allowed result, as the shrunk sequence ran
    on a good kernel."""
    ops = probe_module("explore_ops")
    model = world(f.path).model(f.path, dict(f.setup, **f.env))
    out = []
    steps = steps_of(f)
    for step, allowed in ops.replay(model, steps):
        seen = model.observe()
        checks = {k: v for k, v in seen.items() if k.partition("@")[0] == f.check and "@" in k}
        out.append({"step": step, "allowed": allowed, "vm_pin_kb": seen.get("vm_pin_kb"),
                    "checks": checks})
    left_out = [s for s in steps if s not in [e["step"] for e in out]]
    if left_out:    # replay() passes over them: a reproducer without them shows nothing
        raise ValueError(f"{f.path}: the model takes no step {left_out[0]['op']} "
                         f"{left_out[0]['args']} (id {left_out[0]['id']}) here: its setup "
                         f"{dict(f.setup, **f.env)} lacks what the step needs")
    return out


def model_end(f: FailureLike) -> dict:
    """What the model says the end checks must see after the failure's steps (a step may
    have changed it: a remote's size taken while unloaded)."""
    ops = probe_module("explore_ops")
    model = world(f.path).model(f.path, dict(f.setup, **f.env))
    for _ in ops.replay(model, steps_of(f)):
        pass
    model.release()
    return dict(model.end())


def check_lines(f: FailureLike, checks: dict[str, dict], language: str) -> list[str]:
    """The lines of a step's observation checks, in Python or C (the world's forms)."""
    w, out = world(f.path), []
    for key, want in checks.items():
        kind, _, sid = key.partition("@")
        out += (w.py_check if language == "py" else w.c_check)(kind, int(sid), want)
    return out


def end_checks(f: FailureLike) -> int:
    """The end checks a reproducer numbers: the path's two (VmPin and the allowance; the
    resize and the rmdir), the test PMU's module references where it has one, the kernel
    log."""
    own = getattr(world(f.path), "END_CHECKS", None)   # a path that frames its own reproducers
    if own is not None:
        return own
    return 3 + int(f.path != "trace-mmap" and bool(f.env.get("has_pmu")))


def plan(exp: list[dict[str, Any]], end_checks: int) -> int:
    """KTAP's plan: a result per step, per observation check and per end check."""
    return sum(1 + len(e.get("checks", {})) for e in exp) + end_checks


def step_record(step: dict, path: str, made: dict[int, tuple[int, bool]] | None = None) -> Any:
    """A step as the operations' reproducer forms read it (explore_ops.Step)."""
    ops = probe_module("explore_ops")
    table = world(path).OPS
    op = table.get(step["op"])
    if op is None:
        raise ValueError(f"no reproducer for the operation {step['op']!r}")
    args = ops.named(table, [step])[0]["args"]
    return ops.Step(op, op.full(args), step["id"], {} if made is None else made)


# --- Python --------------------------------------------------------------------------------

_PY_HEAD = '''#!/usr/bin/env python3
"""{title}

Found by ringlab's explorer (./lab explore {path}); run as root on the kernel to test.
Exit 0: the kernel kept the ABI; 1: it did not (the line marked FAIL); 4: cannot run here."""
import ctypes, errno, fcntl, mmap, os, resource, select, struct, sys

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
passed = []


def res(ok):
    return "ok" if ok else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def echo(path, value):
    """`echo value > path`: "ok" or the errno's name."""
    try:
        f = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(f, f"{{value}}\\n".encode())
        finally:
            os.close(f)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]


def result(ok, what):
    """A KTAP result line, numbered from 1 (kselftest.h)."""
    (passed if ok else failed).append(what)
    print(f"{{'ok' if ok else 'not ok'}} {{len(passed) + len(failed)}} {{what}}", flush=True)


def step(what, got, allowed, pin=None):
    """The result against what the ABI allows, and VmPin against the charge model."""
    ok = got in allowed
    if not ok:
        print(f"# the ABI allows {{'|'.join(allowed)}}")
    if pin is not None and vm_pin_kb() != pin:
        print(f"# VmPin {{vm_pin_kb()}} kB, the charge model says {{pin}}")
        ok = False
    result(ok, f"{{what}} -> {{got}}")


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


BANNERS = {banners!r}  # what a splat's first line holds (ringlab's probes/splat_banners.py)


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
        if any(b in text for b in BANNERS):
            out.append(text)


if os.geteuid() != 0:
    print("TAP version 13\\n1..0 # SKIP run as root")
    sys.exit(4)
print("TAP version 13")
print("1..{plan}")
kmsg = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
os.lseek(kmsg, 0, os.SEEK_END)
'''

_PY_PERF = '''
NR_PERF_EVENT_OPEN = {syscalls!r}[os.uname().machine]
# offsetof(struct perf_event_mmap_page, data_head, data_offset, aux_head) (uapi perf_event.h)
DATA_HEAD, DATA_OFFSET, AUX_HEAD = {data_head}, {data_offset}, {aux_head}


def perf_event_open(type_, config, flags, sample_period=0, sample_type=0, wakeup=0, output=-1):
    """output: an event whose buffer takes this one's records (PERF_FLAG_FD_OUTPUT with
    PERF_FLAG_FD_NO_GROUP, the event as group_fd); every fd PERF_FLAG_FD_CLOEXEC."""
    attr = bytearray(128)
    struct.pack_into("<IIQQQQQI", attr, 0, type_, 128, config, sample_period, sample_type, 0,
                     flags, wakeup)
    buf = (ctypes.c_char * 128).from_buffer(attr)
    fd = libc.syscall(NR_PERF_EVENT_OPEN, buf, 0, -1, output, 8 | (3 if output >= 0 else 0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "perf_event_open")
    return fd


def open_event(kind, wakeup=0, chunk=4096, budget=0, output=-1):
    """wakeup: wakeup_watermark in bytes (attr.watermark set), 0 for the default; chunk and
    budget: the test PMU's bytes a chunk and chunks at the most (0: no end)."""
    if kind == "dummy":   # PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY, disabled, user only
        return perf_event_open(1, 9, 1 | 1 << 5 | 1 << 6, output=output)
    if kind == "tp":      # the getppid tracepoint, a sample per call: IDENTIFIER|TID|TIME
        if TP_ID is None:
            print("# no syscalls:sys_enter_getppid tracepoint")
            sys.exit(4)
        return perf_event_open(2, TP_ID, (1 << 14) if wakeup else 0, 1,
                               1 << 16 | 1 << 1 | 1 << 2, wakeup, output)
    if PMU_TYPE is None:
        print("# the test PMU ringlab_aux is not loaded (ringlab's kernels/modules/ringlab_aux)")
        sys.exit(4)
    return perf_event_open(PMU_TYPE, chunk | budget << {budget_shift}, 1 | 1 << 5 | 1 << 6,
                           output=output)


def aux_run(f, ctl, budget):
    """Enable the test PMU's event and spin (a task's event runs only while the task does)
    until the data ring at ctl holds a PERF_RECORD_AUX per chunk of its budget, or one flagged
    TRUNCATED (PERF_AUX_FLAG_TRUNCATED), 5 s at the most; then disable it."""
    fcntl.ioctl(f, 0x2400)                      # PERF_EVENT_IOC_ENABLE
    t = os.times().elapsed
    while os.times().elapsed - t < 5:
        # data_head, data_tail, data_offset, data_size: struct perf_event_mmap_page
        head, tail, off, size = struct.unpack_from("<4Q", ctypes.string_at(ctl + DATA_HEAD, 32))
        ring = ctypes.string_at(ctl + off, size) * 2
        pos, n, cut = tail, 0, False
        while pos < head:
            kind, _, length = struct.unpack_from("<IHH", ring, pos % size)
            if length == 0:
                break
            if kind == 11:                      # PERF_RECORD_AUX: offset, size, flags
                n += 1
                cut |= bool(struct.unpack_from("<Q", ring, pos % size + 24)[0] & 1)
            pos += length
        if n >= budget or cut:
            break
    fcntl.ioctl(f, 0x2401)                      # PERF_EVENT_IOC_DISABLE


TP = "/sys/kernel/tracing/events/syscalls/sys_enter_getppid/id"
TP_ID = int(open(TP).read()) if os.path.exists(TP) else None   # as root: tracefs is root's
PMU_REFS = "/sys/module/ringlab_aux/refcnt"   # the test PMU module's references
PMU = "/sys/bus/event_source/devices/ringlab_aux/type"   # read before a step unregisters it
PMU_TYPE = int(open(PMU).read()) if os.path.exists(PMU) else None


def pmu_refs():
    return int(open(PMU_REFS).read()) if os.path.exists(PMU_REFS) else 0


pmu_refs_before = pmu_refs()
sysctl("perf_event_mlock_kb", {mlock_kb})
sysctl("perf_event_paranoid", 1)
resource.setrlimit(resource.RLIMIT_MEMLOCK, ({rlimit}, {rlimit}))
os.setgroups([])
os.setresgid({uid}, {uid}, 0)
os.setresuid({uid}, {uid}, 0)   # a fresh user: its perf_mlock starts at 0
{caps}fd, m, mfd, budget = {{}}, {{}}, {{}}, {{}}
# events, mappings, a mapping's (event, writable), an event's test-PMU chunks at the most
'''

# What the explorer observes through a mapping, for a failure of such a check (not formatted).
_PY_CHECK = """

def check(what, observe, want):
    \"\"\"What the kernel shows through a mapping against the model: the failed check.\"\"\"
    try:
        got = observe()
    except KeyError:    # made by a step that failed
        result(False, f"{what}: no such mapping")
        return
    got = {k: got.get(k) for k in want}
    if got != want:
        print(f"# the model says {want}")
    result(got == want, f"{what}: {got}")
"""

_PY_PERF_OBSERVE = _PY_CHECK + """

def records(ctl):
    \"\"\"(type, bytes) of each record in [data_tail, data_head) of the data ring at ctl;
    None when it is torn (more unread than it holds, a size-0 header).\"\"\"
    head, tail, off, size = struct.unpack_from("<4Q", ctypes.string_at(ctl + DATA_HEAD, 32))
    if head - tail > size:
        return None
    ring, out, pos = ctypes.string_at(ctl + off, size) * 2, [], tail
    while pos < head:
        length = struct.unpack_from("<IHH", ring, pos % size)[2]
        if length == 0:
            return None
        out.append((struct.unpack_from("<I", ring, pos % size)[0],
                    ring[pos % size:pos % size + length]))
        pos += length
    return out


def observe_ctl(ctl):      # struct perf_event_mmap_page: data_offset, data_size
    return dict(zip(("data_offset", "data_size"), struct.unpack_from("<2Q", ctypes.string_at(ctl + DATA_OFFSET, 16))))


def observe_ring(ctl):     # PERF_RECORD_SAMPLE (9) records, PERF_RECORD_LOST (2) counts
    head = struct.unpack_from("<Q", ctypes.string_at(ctl + DATA_HEAD, 8))[0]
    recs = records(ctl)
    if recs is None:
        return {"head": head, "error": "torn"}
    return {"head": head, "samples": sum(k == 9 for k, _ in recs),
            "lost": sum(struct.unpack_from("<Q", r, 16)[0] for k, r in recs if k == 2)}


def observe_aux(ctl, aux, length):
    \"\"\"aux_head, whether every u64 the test PMU wrote (the newest area's worth) holds its
    position, and the non-empty PERF_RECORD_AUX (11) records as [size, flags].\"\"\"
    head = struct.unpack_from("<Q", ctypes.string_at(ctl + AUX_HEAD, 8))[0]
    words = ctypes.string_at(aux, length)
    ok = all(struct.unpack_from("<Q", words, p % length)[0] == p
             for p in range(max(0, head - length) & ~7, head - head % 8, 8))
    aux_recs = [list(struct.unpack_from("<2Q", r, 16)) for k, r in records(ctl) or [] if k == 11]
    return {"aux_head": head, "data_ok": ok, "records": [r for r in aux_recs if r[0]]}
"""

_PY_TRACE_OBSERVE = _PY_CHECK + """
META = ("meta_page_size", "meta_struct_len", "subbuf_size", "nr_subbufs", "reader_lost_events",
        "reader_id", "reader_read", "flags", "entries", "overrun", "read")


def observe_events():      # what the readers took so far (take(), read_taking())
    lost = lost_now() - tally["lost_base"]
    got = {"twice": tally["twice"], "unaccounted": max(0, tally["missing"] - lost)}
    if any(got.values()):
        print(f"# {tally['marks']} written, the last taken {tally['last']}, "
              f"{tally['missing']} skipped, {lost} counted lost, before "
              f"{tally['forgot'] + 1} not judged")
    return got


def observe_tracefs(names):    # the instance's files, read back
    return {n: int(open(f"{inst}/{n}").read().split()[0]) for n in names}


def observe_meta(a):       # struct trace_buffer_meta (include/uapi/linux/trace_mmap.h)
    meta = dict(zip(META, struct.unpack_from("<4IQ2I4Q", ctypes.string_at(a, 64))))
    return dict(meta, overran=meta["overrun"] > 0)


def observe_subbuf(a):
    \"\"\"The sub-buffer reader.id names: its commit's size (libtraceevent's COMMIT_MASK)
    is reader.read, and RB_MISSED_EVENTS (bit 31) says events were lost before it.\"\"\"
    meta = observe_meta(a)
    at = a + meta["meta_page_size"] + meta["reader_id"] * meta["subbuf_size"] + 8
    raw = struct.unpack_from("<Q", ctypes.string_at(at, 8))[0]
    return {"reader_commit_is_read": raw & ((1 << 27) - 1) == meta["reader_read"],
            "missed": bool(raw & 1 << 31)}
"""

_PY_PERF_END = '''
for a, n in m.values():
    libc.munmap(a, n)
for f in fd.values():
    os.close(f)
pin = vm_pin_kb()
if pin:
    print(f"# VmPin {{pin}} kB")
result(not pin, "end: VmPin 0 with everything unmapped")
{pmu}# The user's whole allowance, perf_event_mlock_kb x CPUs, mapped with RLIMIT_MEMLOCK 0 and no
# CAP_IPC_LOCK: every page of it must fit in what the sequence gave back.
{drop}resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
left, whole = {mlock_kb} // (PAGE // 1024) * os.sysconf("SC_NPROCESSORS_ONLN"), True
while left > 0:
    size = 1 if left == 1 else 1 + (1 << ((left - 1).bit_length() - 1))
    f = open_event("dummy")
    a = libc.mmap(None, size * PAGE, 3, 1, f, 0)
    if not mapping(a):
        print(f"# {{res(False)}} mapping {{size}} pages of the allowance")
        whole = False
        break
    left -= size
result(whole, "end: the allowance maps again")
'''

# With the test PMU: every event of it freed gave its module reference back.
_PY_PMU_END = '''refs = pmu_refs() - pmu_refs_before
if refs:
    print(f"# ringlab_aux holds {refs} module reference(s) more than before")
result(not refs, "end: the test PMU's module references given back")
'''

_PY_TRACE = '''
GET_READER = {get_reader:#x}     # TRACE_MMAP_IOCTL_GET_READER, _IO('R', 0x20)
root = "/sys/kernel/tracing"
inst = f"{{root}}/instances/ringlab-repro-{{os.getpid()}}"
os.mkdir(inst)


def write(name, value):
    return echo(f"{{inst}}/{{name}}", value)


write("buffer_size_kb", {buffer_kb})
write("buffer_subbuf_size_kb", {subbuf_kb})
os.sched_setaffinity(0, {{0}})
fd, m = {{}}, {{}}
'''

# The numbered events (probes/explore_trace.py, Tally): every trace_marker write is "ringlab
# N"; a reader must take each one once, in order, and skip none that the kernel does not count
# lost. `forgot`: written before a step that may take or drop events unseen.
_PY_TALLY = '''
tally = {"marks": 0, "forgot": 0, "last": 0, "twice": 0, "missing": 0, "lost_base": 0,
         "read_since": False}


def write_mark():
    tally["marks"] += 1
    return write("trace_marker", f"ringlab {tally['marks']}")


def lost_now():
    """What per_cpu/cpu0/stats counts lost: overrun, commit overrun, dropped events."""
    stats = dict(line.split(":", 1) for line in
                 open(f"{inst}/per_cpu/cpu0/stats").read().splitlines() if ":" in line)
    return sum(int(stats.get(k, 0)) for k in ("overrun", "commit overrun", "dropped events"))


def forget():
    """Judged no more: what was written and skipped so far; losses counted from now on."""
    tally["forgot"], tally["missing"], tally["lost_base"] = tally["marks"], 0, lost_now()


def seen(n, strict):
    t = tally
    if n <= t["forgot"]:
        return
    if n <= t["last"]:
        t["twice"] += strict
        return
    t["missing"] += n - max(t["last"], t["forgot"]) - 1
    t["last"] = n


def took(sb, start, strict):
    """The numbered events of one sub-buffer (u64 time stamp, u64 commit, events) from byte
    start; where they end. An event's u32 header: type_len in the low 5 bits (1-28: 4 x that
    many bytes of data; 0: the length in the next u32; 29: padding, to the end when its time
    delta is 0; 30, 31: a time extend or stamp of 8 bytes) (ring_buffer.c)."""
    end = min(16 + (struct.unpack_from("<Q", sb, 8)[0] & ((1 << 27) - 1)), len(sb))
    pos = 16
    while pos + 4 <= end:
        head = struct.unpack_from("<I", sb, pos)[0]
        kind = head & 31
        if kind == 29 and not head >> 5:
            break
        size = 8 if kind >= 30 else 4 + (struct.unpack_from("<I", sb, pos + 4)[0]
                                        if kind in (0, 29) else 4 * kind)
        if pos + size > end:
            break
        at = sb.find(b"ringlab ", pos + 4, pos + size)
        if kind <= 28 and at >= 0 and pos >= start:
            seen(int(sb[at + 8:pos + size].split(b"\\n")[0]), strict)
        pos += size
    return pos


def read_taking(f):
    """read() of trace_pipe_raw: a sub-buffer, every event of it taken now."""
    data = os.read(f, 1 << 16)
    if data:
        tally["read_since"] = True
        took(data, 16, True)
    return "ok" if data else "eof"


def take(f, a):
    """GET_READER on f, then the reader sub-buffer (meta reader.id) through the whole mapping
    at a: on the same one as before the call, from where the meta page said the reader was
    (a read() since moved it on unsaid: then its events are not strictly new), else all of
    it. Whether it showed anything new."""
    before = struct.unpack_from("<2I", ctypes.string_at(a + 24, 8))
    fcntl.ioctl(f, GET_READER)
    msz, _, sub = struct.unpack_from("<3I", ctypes.string_at(a, 12))
    rid, read = struct.unpack_from("<2I", ctypes.string_at(a + 24, 8))
    start = 16 + (before[1] if rid == before[0] and not tally["read_since"] else 0)
    took(ctypes.string_at(a + msz + rid * sub, sub), start, not tally["read_since"])
    tally["read_since"] = False
    return (rid, read) != before
'''

_PY_TRACE_END = '''
for a, n in m.values():
    libc.munmap(a, n)
for f in fd.values():
    os.close(f)
got = write("buffer_size_kb", {buffer_kb} + 4)
result(got == "ok", f"end: buffer_size_kb with nothing mapped -> {{got}}")
try:
    os.rmdir(inst)
    result(True, "end: rmdir of the instance -> ok")
except OSError as e:
    result(False, f"end: rmdir of the instance -> {{errno.errorcode[e.errno]}}")
'''

_PY_TAIL = '''
new = splats()
for line in new:
    print(f"# {line}")
result(not new, "kernel log: no splat")
print("# FAIL: the kernel did not keep the ABI" if failed else "# PASS")
print(f"# Totals: pass:{len(passed)} fail:{len(failed)} xfail:0 xpass:0 skip:0 error:0")
sys.exit(1 if failed else 0)
'''


def _py_step(n: int, step: dict, allowed: list[str] | None, pin: int | None, path: str
             ) -> list[str]:
    """A step's lines: the call, its result, and the verdict on it (with `allowed` None, as
    for two actors at once, the result is only said: the end state judges)."""
    s = step_record(step, path)
    lines = _py_guarded(s.op.py(s))
    if allowed is None:
        return lines + [f"print(f'# actor {step.get('actor', 0)} step {n}: {s.what} -> {{got}}')"]
    return lines + _py_verdict(n, s.what, allowed, pin)


def _py_guarded(call: list[str]) -> list[str]:
    """A step's call in a try: an errno becomes its result, and a slot a failed step never
    filled says so, instead of ending the script."""
    return ["try:"] + ["    " + x for x in call] + \
        ["except OSError as e:", "    got = errno.errorcode[e.errno]",
         "except KeyError:   # made by a step that failed", "    got = 'no such object'"]


def _py_verdict(n: int, what: str, allowed: list[str], pin: int | None) -> list[str]:
    """The result judged against what the ABI allows, then VmPin against the charge model."""
    return [f"step({what!r}, got, {allowed!r}" + (f", {pin})" if pin is not None else ")")]


def _control_page_offsets() -> dict[str, int]:
    page = probe_module("perf_abi").PerfEventMmapPage
    return {"data_head": page.data_head.offset, "data_offset": page.data_offset.offset,
            "aux_head": page.aux_head.offset}


def python_script(f: FailureLike, title: str) -> str:
    exp = [] if is_concurrent(f) else expectations(f)
    s = dict(f.setup, **f.env)
    banners = probe_module("splat_banners").PREFIXES
    head = _PY_HEAD.format(title=title, path=f.path, banners=banners,
                           plan=plan(exp, end_checks(f)))
    frame = getattr(world(f.path), "py_frame", None)
    if frame is not None:   # the path's own file frames its reproducers
        own_head, own_end = frame(s, model_end(f))
        head += own_head
    elif f.path == "trace-mmap":
        head += _PY_TRACE_OBSERVE if any(e.get("checks") for e in exp) else ""
        head += _PY_TRACE.format(buffer_kb=s["buffer_kb"], subbuf_kb=s["subbuf_kb"],
                                 get_reader=probe_module("trace_abi").TRACE_MMAP_IOCTL_GET_READER)
        head += _PY_TALLY
    else:
        caps = ""
        if s.get("who") == "user+ipc_lock":
            caps = ("# CAP_IPC_LOCK effective (capset, _LINUX_CAPABILITY_VERSION_3)\n"
                    "hdr = struct.pack('<Ii', 0x20080522, 0)\n"
                    "data = struct.pack('<6I', 1 << 14, 1 << 14, 0, 0, 0, 0)\n"
                    "libc.syscall(126 if os.uname().machine == 'x86_64' else 91, hdr, data)\n")
        head += _PY_PERF.format(mlock_kb=s["mlock_kb"], rlimit=s["rlimit_pages"] * s["page_size"],
                                uid=UID, caps=caps,
                                syscalls=probe_module("perf_abi").SYSCALL_NUMBERS,
                                budget_shift=probe_module("explore_perf").PMU_BUDGET_SHIFT,
                                **_control_page_offsets())
        head += _PY_PERF_OBSERVE if any(e.get("checks") for e in exp) else ""
    body: list[str] = []
    if is_concurrent(f):
        body = _py_actors(f)
    for n, e in enumerate([] if body else exp):
        body += [""] + _py_step(n, e["step"], e["allowed"], e["vm_pin_kb"], f.path)
        body += check_lines(f, e.get("checks", {}), "py")
    if frame is not None:
        end = own_end
    elif f.path == "trace-mmap":
        end = _PY_TRACE_END.format(buffer_kb=s["buffer_kb"])
    else:
        drop = ("libc.syscall(126 if os.uname().machine == 'x86_64' else 91, hdr, "
                "bytes(24))  # CAP_IPC_LOCK off\n" if s.get("who") == "user+ipc_lock" else "")
        end = _PY_PERF_END.format(mlock_kb=s["mlock_kb"], drop=drop,
                                  pmu=_PY_PMU_END if s.get("has_pmu") else "")
    return head + "\n".join(body) + "\n" + end + _PY_TAIL


def is_concurrent(f: FailureLike) -> bool:
    """Found by two actors at once (`--actors 2`): its steps carry their actor."""
    return any("actor" in s for s in f.steps)


def _py_actors(f: FailureLike) -> list[str]:
    """Each actor's steps as a function, all run at once in threads of one process (as the
    explorer ran them), beside the setup's loads in processes of their own: no step is
    judged, the end state and the kernel log are; the interleaving is the scheduler's, so a
    run may need repeating to fail."""
    actors = sorted({s.get("actor", 0) for s in steps_of(f)} | {0})
    loads = _py_loads(f)
    body = ["import threading"] + loads
    for i in actors:
        lines: list[str] = []
        for n, step in enumerate(s for s in steps_of(f) if s.get("actor", 0) == i):
            lines += _py_step(n, step, None, None, f.path)
        body += ["", "", f"def actor{i}():"] + ["    " + x for x in lines] + ["    pass"]
    names = ", ".join(f"actor{i}" for i in actors) + ("," if len(actors) == 1 else "")
    if f.setup.get("actors_as") == "process":   # an mm each, as the explorer ran them
        return body + ["", "", "pids = []", f"for a in ({names}):", "    pid = os.fork()",
                       "    if pid == 0:", "        a()", "        os._exit(0)",
                       "    pids.append(pid)", "for pid in pids:", "    os.waitpid(pid, 0)",
                       *(["stop_loads()"] if loads else [])]
    return body + ["", "", f"threads = [threading.Thread(target=a) for a in ({names})]",
                   "for t in threads:", "    t.start()", "for t in threads:", "    t.join()",
                   *(["stop_loads()"] if loads else [])]


def _py_loads(f: FailureLike) -> list[str]:
    """The setup's loads (probes/explore_load.py), each a child process pinned to its CPU,
    killed by stop_loads() once the actors are done; a load with no Python form of its own
    is named for the user to run beside."""
    loads = [tuple(x) for x in f.setup.get("load", [])]
    if not loads:
        return []
    lines = ["import signal, time", "", "", "load_pids = []", "", "",
             "def stop_loads():", "    for pid in load_pids:",
             "        os.kill(pid, signal.SIGKILL)", "        os.waitpid(pid, 0)"]
    known = probe_module("explore_load").LOADS
    for name, cpu in loads:
        load = known[name]
        if not load.py_round or f.path not in load.py_paths:
            lines += ["", f"# load {name} on CPU {cpu}: run `python3 explore_load.py {name} "
                      f"--cpu {cpu} --seconds 60` (probes/) beside this script"]
            continue
        lines += ["", "", "pid = os.fork()", "if pid == 0:",
                  f"    os.sched_setaffinity(0, {{{cpu}}})  # load {name}: {load.doc}",
                  "    n = 0",
                  *("    " + x for x in load.py_start), "    while True:", "        n += 1",
                  "        try:", *("            " + x for x in load.py_round),
                  "        except OSError:", "            pass",
                  "load_pids.append(pid)"]
    return lines


def write(folder: Path, f: FailureLike, title: str) -> list[Path]:
    """repro.py and repro.c for a failure, in `folder`. Actors at once (steps that carry their
    actor) get both in threads (repro.c: pthreads, `gcc -pthread`), their steps said and not
    judged, since the interleaving is the scheduler's; the loads run beside them (repro.c:
    probes/explore_load.py if it is beside the program, which write() does not put there)."""
    folder.mkdir(parents=True, exist_ok=True)
    py = folder / "repro.py"
    py.write_text(python_script(f, title))
    py.chmod(0o755)
    c = folder / "repro.c"
    from harness.explore import c_reproducer
    c.write_text(c_reproducer.actors_program(f, title) if is_concurrent(f) else
                 c_reproducer.program(f, title, expectations(f)))
    return [py, c]
