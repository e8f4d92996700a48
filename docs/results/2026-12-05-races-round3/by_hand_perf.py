"""Race mutants 068 and 070 by hand (perf_abi.py beside it)."""
import ctypes, fcntl, mmap, os, struct, subprocess, sys, time
sys.path.insert(0, "/tmp")
import perf_abi as A
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
PAGE = os.sysconf("SC_PAGE_SIZE")
subprocess.run(["mount", "-t", "debugfs", "none", "/sys/kernel/debug"], capture_output=True)
def races():
    try:
        for line in open("/sys/kernel/debug/kcsan"):
            if line.startswith("data_races:"): return int(line.split()[1])
    except OSError: return -1
def open_event(pid, sw, period=0, flags=0):
    a = A.PerfEventAttr(type=A.PERF_TYPE_SOFTWARE, size=ctypes.sizeof(A.PerfEventAttr), config=sw,
                        sample_period=period, sample_type=A.PERF_SAMPLE_IP | A.PERF_SAMPLE_TID,
                        flags=A.ATTR_EXCLUDE_KERNEL | A.ATTR_EXCLUDE_HV | flags)
    fd = libc.syscall(A.SYS_PERF_EVENT_OPEN, ctypes.byref(a), pid, -1, -1, 0)
    if fd < 0: raise OSError(ctypes.get_errno(), "perf_event_open")
    return fd
def detach(secs):
    """068: the last munmap on CPU 0 against SET_OUTPUT(-1) from a forked child on CPU 1."""
    fd = open_event(0, A.PERF_COUNT_SW_DUMMY); stop = time.monotonic() + secs
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {1}); n = 0
        while time.monotonic() < stop:
            try: fcntl.ioctl(fd, A.PERF_EVENT_IOC_SET_OUTPUT, -1); n += 1
            except OSError: pass
        os._exit(min(n // 1000, 255))
    os.sched_setaffinity(0, {0}); n = 0
    while time.monotonic() < stop:
        try: m = mmap.mmap(fd, 2 * PAGE, mmap.MAP_SHARED, mmap.PROT_READ); m.close(); n += 1
        except OSError: pass
    _, st = os.waitpid(pid, 0)
    return f"maps {n}, set-output ~{os.waitstatus_to_exitcode(st)}k"
def forkmap(secs):
    """068, second variant: parent on CPU 0 and child on CPU 1 both mmap/munmap one event."""
    fd = open_event(0, A.PERF_COUNT_SW_DUMMY); stop = time.monotonic() + secs
    pid = os.fork()
    cpu = 1 if pid == 0 else 0
    os.sched_setaffinity(0, {cpu}); n = e = 0
    while time.monotonic() < stop:
        try: m = mmap.mmap(fd, 2 * PAGE, mmap.MAP_SHARED, mmap.PROT_READ); m.close(); n += 1
        except OSError: e += 1
    if pid == 0: os._exit(min(n // 1000, 255))
    _, st = os.waitpid(pid, 0)
    return f"parent maps {n} (refused {e}), child ~{os.waitstatus_to_exitcode(st)}k"
def tail(secs):
    """070: samples of a busy child on CPU 0 while the parent on CPU 1 moves data_tail."""
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {0}); stop = time.monotonic() + secs + 1
        while time.monotonic() < stop: pass
        os._exit(0)
    os.sched_setaffinity(0, {1})
    fd = open_event(pid, A.PERF_COUNT_SW_CPU_CLOCK, period=20000)
    m = mmap.mmap(fd, 9 * PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    head_off, tail_off = A.PerfEventMmapPage.data_head.offset, A.PerfEventMmapPage.data_tail.offset
    n = 0; stop = time.monotonic() + secs
    while time.monotonic() < stop:
        head = struct.unpack_from("Q", m, head_off)[0]
        struct.pack_into("Q", m, tail_off, head); n += 1
    os.waitpid(pid, 0)
    return f"tail moves {n}, head {struct.unpack_from('Q', m, head_off)[0]}"
name, secs = sys.argv[1], float(sys.argv[2])
with open("/sys/kernel/debug/clear_warn_once", "w") as f: f.write("1")
mark = f"ringlab-rp {name} {time.time()}"
with open("/dev/kmsg", "w") as f: f.write(mark + "\n")
r0 = races(); said = globals()[name](secs)
log = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
log = log[log.rfind(mark) + len(mark):]
hits = [l.strip() for l in log.splitlines() if any(k in l for k in ("WARNING", "KCSAN", "BUG", "Oops", "refcount_t", "general protection", "race at"))]
print(f"{name} {secs:g}s: {said}; kcsan data_races +{races() - r0}")
for h in hits[:10]: print("   ", h)
