"""Race mutants 063-066 by hand: processes pinned to the two vCPUs on one instance's CPU 1
buffer; the kernel log's WARN/KCSAN/BUG lines and KCSAN's counters after."""
import ctypes, fcntl, mmap, os, subprocess, sys, time
T = "/sys/kernel/tracing"; GET_READER = 0x5220
subprocess.run(["mount", "-t", "debugfs", "none", "/sys/kernel/debug"], capture_output=True)
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
PAGE = os.sysconf("SC_PAGE_SIZE")
def w(p, t):
    with open(p, "w") as f: f.write(t)
def races():
    try:
        for line in open("/sys/kernel/debug/kcsan"):
            if line.startswith("data_races:"): return int(line.split()[1])
    except OSError: return -1
p = f"{T}/instances/rt"
if os.path.isdir(p): os.rmdir(p)
os.mkdir(p); w(f"{p}/buffer_size_kb", "64")
RAW = f"{p}/per_cpu/cpu1/trace_pipe_raw"
def writer(stop):
    fd = os.open(f"{p}/trace_marker", os.O_WRONLY); n = 0
    while time.monotonic() < stop:
        os.write(fd, b"x" * 64); n += 1
    return n
def reader(stop):
    fd = os.open(RAW, os.O_RDONLY | os.O_NONBLOCK); n = 0; m = os.open(f"{p}/trace_marker", os.O_WRONLY)
    while time.monotonic() < stop:
        for _ in range(8): os.write(m, b"y" * 64)
        try: os.read(fd, PAGE); n += 1
        except OSError: pass
    return n
def mapped_get_reader(stop):
    fd = os.open(RAW, os.O_RDONLY | os.O_NONBLOCK)
    a = libc.mmap(None, PAGE, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if a in (None, ctypes.c_void_p(-1).value): return -ctypes.get_errno()
    n = 0
    while time.monotonic() < stop:
        try: fcntl.ioctl(fd, GET_READER); n += 1
        except OSError: pass
    return n
def map_loop(stop):
    n = 0
    while time.monotonic() < stop:
        fd = os.open(RAW, os.O_RDONLY | os.O_NONBLOCK)
        a = libc.mmap(None, PAGE, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if a not in (None, ctypes.c_void_p(-1).value):
            n += 1; libc.munmap(ctypes.c_void_p(a), ctypes.c_size_t(PAGE))
        os.close(fd)
    return n
def resizer(stop):
    n = 0; i = 0
    while time.monotonic() < stop:
        i += 1
        for f, v in (("buffer_size_kb", "64" if i % 2 else "96"), ("buffer_subbuf_size_kb", "4" if i % 2 else "8")):
            try: w(f"{p}/{f}", v); n += 1
            except OSError: pass
    return n
RECIPES = {"getreader": [(0, mapped_get_reader), (1, reader), (1, writer)],
           "mapids": [(0, map_loop), (1, reader), (1, writer)],
           "resize": [(0, map_loop), (1, resizer), (1, writer)]}
name, secs = sys.argv[1], float(sys.argv[2])
w("/sys/kernel/debug/clear_warn_once", "1")
mark = f"ringlab-rt {name} {time.time()}"; w("/dev/kmsg", mark + "\n")
r0 = races(); stop = time.monotonic() + secs; kids = []
rfd, wfd = os.pipe()
for cpu, fn in RECIPES[name]:
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {cpu})
        try: n = fn(stop)
        except Exception as e: n = repr(e)
        os.write(wfd, f"{fn.__name__}@{cpu}={n}\n".encode()); os._exit(0)
    kids.append(pid)
for k in kids: os.waitpid(k, 0)
os.close(wfd); counts = os.read(rfd, 4096).decode().split()
log = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
log = log[log.rfind(mark) + len(mark):]
hits = [l.strip() for l in log.splitlines() if any(k in l for k in ("WARNING", "KCSAN", "BUG", "Oops", "RB_WARN", "race at"))]
print(f"{name} {secs:g}s: {' '.join(counts)}; kcsan data_races +{races() - r0}")
for h in hits[:12]: print("   ", h)
