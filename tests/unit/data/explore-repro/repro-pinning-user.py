#!/usr/bin/env python3
"""every operation of pinning

Found by ringlab's explorer (./lab explore pinning); run as root on the kernel to test.
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
    print(f"step {n}: {what} -> {got}" + (f"   FAIL: the ABI allows {allowed}" if bad else ""))
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
    return f"inherits {os.WEXITSTATUS(status)}" if os.WEXITSTATUS(status) else "ok"


def vm_pin_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmPin:"):
            return int(line.split()[1])
    return -1


def sysctl(name, value):
    with open(f"/proc/sys/kernel/{name}", "w") as f:
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
        text = rec.partition(";")[2].split("\n")[0]
        if any(b in text for b in ("WARNING:", "BUG:", "Oops", "refcount_t:", "UBSAN:")):
            out.append(text)

NR_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}[os.uname().machine]


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
    print("run as root (it sets perf sysctls, then becomes user 54321)")
    sys.exit(4)
sysctl("perf_event_mlock_kb", 36)
sysctl("perf_event_paranoid", 1)
resource.setrlimit(resource.RLIMIT_MEMLOCK, (32768, 32768))
os.setgroups([])
os.setresgid(54321, 54321, 0)
os.setresuid(54321, 54321, 0)   # a fresh user: its perf_mlock starts at 0
fd, m, mfd = {}, {}, {}   # events, mappings, mapping: (event, writable)

try:
    fd[0] = open_event('dummy')
    got = 'ok'
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(0, 'open dummy', got, ['ok'])

try:
    fd[1] = open_event('tp')
    got = 'ok'
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(1, 'open tp', got, ['ok', 'EPERM'])
if vm_pin_kb() != 4:
    print(f'step 1: VmPin {vm_pin_kb()} kB, the charge model says 4   FAIL')
    failed.append(1)

try:
    fd[2] = open_event('pmu')
    got = 'ok'
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(2, 'open pmu', got, ['EINVAL', 'ENOMEM', 'ok'])

try:
    addr = libc.mmap(None, 9 * PAGE, 3, 1, fd[0], 0)
    got = res(mapping(addr))
    if got == 'ok': m[3], mfd[3] = (addr, 9 * PAGE), (0, True)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(3, 'mmap @0 9 rw shared', got, ['ok'])
if vm_pin_kb() != 12:
    print(f'step 3: VmPin {vm_pin_kb()} kB, the charge model says 12   FAIL')
    failed.append(3)

try:
    addr = libc.mmap(None, 3 * PAGE, 1, 2, fd[0], 0)
    got = res(mapping(addr))
    if got == 'ok': m[4], mfd[4] = (addr, 3 * PAGE), (0, False)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(4, 'mmap @0 3 r private', got, ['ok', 'EPERM'])

try:
    addr = libc.mmap(None, 5 * PAGE, 3, 1, fd[2], 0)
    got = res(mapping(addr))
    if got == 'ok': m[5], mfd[5] = (addr, 5 * PAGE), (2, True)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(5, 'mmap @2 5 rw shared', got, ['EINVAL', 'ENOMEM', 'ok'])
if vm_pin_kb() != 20:
    print(f'step 5: VmPin {vm_pin_kb()} kB, the charge model says 20   FAIL')
    failed.append(5)

try:
    data = next(m[k] for k, v in mfd.items() if v == (2, True) and k in m)
    struct.pack_into('<QQ', (ctypes.c_char * 16).from_address(data[0] + 1072), 0, data[1], 4 * PAGE)  # aux_offset, aux_size
    addr = libc.mmap(None, 4 * PAGE, 3, 1, fd[2], data[1])
    got = res(mapping(addr))
    if got == 'ok': m[6] = (addr, 4 * PAGE)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(6, 'aux @2 4', got, ['ok'])

try:
    fcntl.ioctl(fd[1], 0x40042409, 1)  # PAUSE_OUTPUT
    got = 'ok'
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(7, 'pause @1 1', got, ['ok', 'EPERM'])
if vm_pin_kb() != 28:
    print(f'step 7: VmPin {vm_pin_kb()} kB, the charge model says 28   FAIL')
    failed.append(7)

try:
    fcntl.ioctl(fd[1], 0x40042409, 0)  # PAUSE_OUTPUT
    got = 'ok'
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(8, 'pause @1 0', got, ['EINVAL', 'ENOMEM', 'ok'])

try:
    for _ in range(3): os.getppid()
    got = 'ok'
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(9, 'fire 3', got, ['ok'])
if vm_pin_kb() != 36:
    print(f'step 9: VmPin {vm_pin_kb()} kB, the charge model says 36   FAIL')
    failed.append(9)

try:
    addr = m[3][0]  # data_tail = data_head
    ctypes.c_uint64.from_address(addr + 1032).value = ctypes.c_uint64.from_address(addr + 1024).value
    got = 'ok'
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(10, 'consume @3', got, ['ok', 'EPERM'])

try:
    zero = os.open('/dev/zero', os.O_RDONLY)
    got = res(libc.read(zero, m[3][0] + 2 * PAGE + 512, 1) == 1)
    os.close(zero)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(11, 'poke @3 2', got, ['EINVAL', 'ENOMEM', 'ok'])
if vm_pin_kb() != 44:
    print(f'step 11: VmPin {vm_pin_kb()} kB, the charge model says 44   FAIL')
    failed.append(11)

try:
    got = res(libc.madvise(*m[3], 11) == 0)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(12, 'madvise @3 dofork', got, ['ok'])

try:
    got = res(libc.madvise(*m[3], 10) == 0)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(13, 'madvise @3 dontfork', got, ['ok', 'EPERM'])
if vm_pin_kb() != 52:
    print(f'step 13: VmPin {vm_pin_kb()} kB, the charge model says 52   FAIL')
    failed.append(13)

try:
    got = res(libc.madvise(*m[4], 16) == 0)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(14, 'madvise @4 dontdump', got, ['EINVAL', 'ENOMEM', 'ok'])

try:
    got = res(libc.madvise(*m[4], 18) == 0)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(15, 'madvise @4 wipeonfork', got, ['ok'])
if vm_pin_kb() != 60:
    print(f'step 15: VmPin {vm_pin_kb()} kB, the charge model says 60   FAIL')
    failed.append(15)

try:
    got = fork()
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(16, 'fork', got, ['ok', 'EPERM'])

try:
    addr, length = m[3]
    spot = libc.mmap(None, length, 0, 0x22, -1, 0)
    new = libc.mremap(addr, length, length, 3, spot)  # MAYMOVE|FIXED
    got = res(mapping(new))
    if got == 'ok': m[3] = (new, length)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(17, 'mremap @3 move', got, ['EINVAL', 'ENOMEM', 'ok'])
if vm_pin_kb() != 68:
    print(f'step 17: VmPin {vm_pin_kb()} kB, the charge model says 68   FAIL')
    failed.append(17)

try:
    addr, length = m[3]
    new = libc.mremap(addr, length, length + PAGE, 0, None)
    got = res(mapping(new))
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(18, 'mremap @3 grow', got, ['ok'])

try:
    addr, length = m[4]
    new = libc.mremap(addr, length, length - PAGE, 0, None)
    got = res(mapping(new))
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(19, 'mremap @4 shrink', got, ['ok', 'EPERM'])
if vm_pin_kb() != 76:
    print(f'step 19: VmPin {vm_pin_kb()} kB, the charge model says 76   FAIL')
    failed.append(19)

try:
    addr, length = m[4]
    new = libc.mremap(addr, length, length, 5, None)
    got = res(mapping(new))
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(20, 'mremap @4 dontunmap', got, ['EINVAL', 'ENOMEM', 'ok'])

try:
    addr, length = m[5]
    got = res(libc.munmap(addr + length - PAGE, PAGE) == 0)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(21, 'munmap-part @5', got, ['ok'])
if vm_pin_kb() != 84:
    print(f'step 21: VmPin {vm_pin_kb()} kB, the charge model says 84   FAIL')
    failed.append(21)

try:
    got = res(libc.munmap(*m[3]) == 0)
    if got == 'ok': del m[3]
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(22, 'munmap @3', got, ['ok', 'EPERM'])

try:
    os.close(fd.pop(0))
    got = 'ok'
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(23, 'close @0', got, ['EINVAL', 'ENOMEM', 'ok'])
if vm_pin_kb() != 92:
    print(f'step 23: VmPin {vm_pin_kb()} kB, the charge model says 92   FAIL')
    failed.append(23)

for a, n in m.values():
    libc.munmap(a, n)
for f in fd.values():
    os.close(f)
pin = vm_pin_kb()
print(f"end: VmPin {pin} kB with everything unmapped" + ("   FAIL" if pin else ""))
if pin:
    failed.append("end")
# The user's whole allowance, perf_event_mlock_kb x CPUs, mapped with RLIMIT_MEMLOCK 0 and no
# CAP_IPC_LOCK: every page of it must fit in what the sequence gave back.
resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
left = 36 // (PAGE // 1024) * os.sysconf("SC_NPROCESSORS_ONLN")
while left > 0:
    size = 1 if left == 1 else 1 + (1 << ((left - 1).bit_length() - 1))
    f = open_event("dummy")
    a = libc.mmap(None, size * PAGE, 3, 1, f, 0)
    if not mapping(a):
        print(f"end: the allowance: {res(False)} mapping {size} pages   FAIL")
        failed.append("allowance")
        break
    left -= size
if "allowance" not in failed:
    print(f"end: the allowance maps again, VmPin {vm_pin_kb()} kB")

new = splats()
for line in new:
    print(f"kernel log: {line}   FAIL")
if new:
    failed.append("splat")
print("FAIL: the kernel did not keep the ABI" if failed else "PASS")
sys.exit(1 if failed else 0)
