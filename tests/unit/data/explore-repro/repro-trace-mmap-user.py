#!/usr/bin/env python3
"""every operation of trace-mmap

Found by ringlab's explorer (./lab explore trace-mmap); run as root on the kernel to test.
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

GET_READER = 0x5220     # TRACE_MMAP_IOCTL_GET_READER, _IO('R', 0x20)
root = "/sys/kernel/tracing"
inst = f"{root}/instances/ringlab-repro-{os.getpid()}"
os.mkdir(inst)


def write(name, value):
    try:
        fd_ = os.open(f"{inst}/{name}", os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd_, f"{value}\n".encode())
        finally:
            os.close(fd_)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]


write("buffer_size_kb", 8)
write("buffer_subbuf_size_kb", 4)
os.sched_setaffinity(0, {0})
fd, m = {}, {}

try:
    fd[0] = os.open(f'{inst}/per_cpu/cpu0/trace_pipe_raw', os.O_RDONLY | os.O_NONBLOCK)
    got = 'ok'
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(0, 'open 0', got, ['ok'])

try:
    fd[1] = os.open(f'{inst}/per_cpu/cpu1/trace_pipe_raw', os.O_RDWR | os.O_NONBLOCK)
    got = 'ok'
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(1, 'open 1 rw', got, ['ok', 'EPERM'])
if vm_pin_kb() != 4:
    print(f'step 1: VmPin {vm_pin_kb()} kB, the charge model says 4   FAIL')
    failed.append(1)

try:
    addr = libc.mmap(None, PAGE, 1, 1, fd[0], 0)
    got = res(mapping(addr))
    length = PAGE
    if got == 'ok': m[2] = (addr, length)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(2, 'mmap @0 meta r shared', got, ['EINVAL', 'ENOMEM', 'ok'])

try:
    addr = libc.mmap(None, PAGE, 3, 2, fd[0], PAGE)
    got = res(mapping(addr))
    length = PAGE
    if got == 'ok': m[3] = (addr, length)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(3, 'mmap @0 off rw private', got, ['ok'])
if vm_pin_kb() != 12:
    print(f'step 3: VmPin {vm_pin_kb()} kB, the charge model says 12   FAIL')
    failed.append(3)

try:
    addr = libc.mmap(None, PAGE, 5, 1, fd[1], 0)
    got = res(mapping(addr))
    length = PAGE
    if got == 'ok':
        msz, _, sub, nsub = struct.unpack_from('<IIII', ctypes.string_at(addr, 16))
        length = msz + (nsub) * sub
        new = libc.mmap(None, length, 5, 1, fd[1], 0)
        libc.munmap(addr, PAGE)
        addr, got = new, res(mapping(new))
    if got == 'ok': m[4] = (addr, length)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(4, 'mmap @1 all rx shared', got, ['ok', 'EPERM'])

try:
    addr = libc.mmap(None, PAGE, 1, 1, fd[1], 0)
    got = res(mapping(addr))
    length = PAGE
    if got == 'ok':
        msz, _, sub, nsub = struct.unpack_from('<IIII', ctypes.string_at(addr, 16))
        length = msz + (nsub + 1) * sub
        new = libc.mmap(None, length, 1, 1, fd[1], 0)
        libc.munmap(addr, PAGE)
        addr, got = new, res(mapping(new))
    if got == 'ok': m[5] = (addr, length)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(5, 'mmap @1 past r shared', got, ['EINVAL', 'ENOMEM', 'ok'])
if vm_pin_kb() != 20:
    print(f'step 5: VmPin {vm_pin_kb()} kB, the charge model says 20   FAIL')
    failed.append(5)

try:
    try:
        fcntl.ioctl(fd[0], GET_READER)
        got = 'ok'
    except OSError as e:
        got = errno.errorcode[e.errno]
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(6, 'get-reader @0', got, ['ok'])

try:
    fcntl.ioctl(fd[0], 0x5221)  # _IO('R', 0x21): no such ioctl
    got = 'ok'
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(7, 'ioctl @0', got, ['ok', 'EPERM'])
if vm_pin_kb() != 28:
    print(f'step 7: VmPin {vm_pin_kb()} kB, the charge model says 28   FAIL')
    failed.append(7)

try:
    for _ in range(10): got = write('trace_marker', 'ringlab')
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(8, 'write 10', got, ['EINVAL', 'ENOMEM', 'ok'])

try:
    got = res(libc.mprotect(*m[2], 3) == 0)  # PROT_READ|WRITE
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(9, 'mprotect @2', got, ['ok'])
if vm_pin_kb() != 36:
    print(f'step 9: VmPin {vm_pin_kb()} kB, the charge model says 36   FAIL')
    failed.append(9)

try:
    got = res(libc.madvise(*m[2], 11) == 0)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(10, 'madvise @2 dofork', got, ['ok', 'EPERM'])

try:
    got = fork()
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(11, 'fork', got, ['EINVAL', 'ENOMEM', 'ok'])
if vm_pin_kb() != 44:
    print(f'step 11: VmPin {vm_pin_kb()} kB, the charge model says 44   FAIL')
    failed.append(11)

try:
    addr, length = m[2]
    spot = libc.mmap(None, length, 0, 0x22, -1, 0)
    new = libc.mremap(addr, length, length, 3, spot)  # MAYMOVE|FIXED
    got = res(mapping(new))
    if got == 'ok': m[2] = (new, length)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(12, 'mremap @2 move', got, ['ok'])

try:
    addr, length = m[4]
    new = libc.mremap(addr, length, length + PAGE, 0, None)
    got = res(mapping(new))
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(13, 'mremap @4 grow', got, ['ok', 'EPERM'])
if vm_pin_kb() != 52:
    print(f'step 13: VmPin {vm_pin_kb()} kB, the charge model says 52   FAIL')
    failed.append(13)

try:
    addr, length = m[4]
    new = libc.mremap(addr, length, length - PAGE, 0, None)
    got = res(mapping(new))
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(14, 'mremap @4 shrink', got, ['EINVAL', 'ENOMEM', 'ok'])

try:
    addr, length = m[4]
    new = libc.mremap(addr, length, length, 5, None)
    got = res(mapping(new))
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(15, 'mremap @4 dontunmap', got, ['ok'])
if vm_pin_kb() != 60:
    print(f'step 15: VmPin {vm_pin_kb()} kB, the charge model says 60   FAIL')
    failed.append(15)

try:
    addr, length = m[4]
    got = res(libc.munmap(addr + length - PAGE, PAGE) == 0)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(16, 'munmap-part @4', got, ['ok', 'EPERM'])

try:
    got = write('buffer_size_kb', 32)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(17, 'resize 32', got, ['EINVAL', 'ENOMEM', 'ok'])
if vm_pin_kb() != 68:
    print(f'step 17: VmPin {vm_pin_kb()} kB, the charge model says 68   FAIL')
    failed.append(17)

try:
    got = write('buffer_subbuf_size_kb', 8)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(18, 'subbuf 8', got, ['ok'])

try:
    got = write('snapshot', 1)
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(19, 'snapshot 1', got, ['ok', 'EPERM'])
if vm_pin_kb() != 76:
    print(f'step 19: VmPin {vm_pin_kb()} kB, the charge model says 76   FAIL')
    failed.append(19)

try:
    got = res(libc.munmap(*m[2]) == 0)
    if got == 'ok': del m[2]
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(20, 'munmap @2', got, ['EINVAL', 'ENOMEM', 'ok'])

try:
    os.close(fd.pop(0))
    got = 'ok'
except OSError as e:
    got = errno.errorcode[e.errno]
except KeyError:   # made by a step that failed
    got = 'no such object'
step(21, 'close @0', got, ['ok'])
if vm_pin_kb() != 84:
    print(f'step 21: VmPin {vm_pin_kb()} kB, the charge model says 84   FAIL')
    failed.append(21)

for a, n in m.values():
    libc.munmap(a, n)
for f in fd.values():
    os.close(f)
got = write("buffer_size_kb", 8 + 4)
print(f"end: buffer_size_kb with nothing mapped -> {got}" + ("" if got == "ok" else "   FAIL"))
try:
    os.rmdir(inst)
    print("end: rmdir of the instance -> ok")
except OSError as e:
    print(f"end: rmdir of the instance -> {errno.errorcode[e.errno]}   FAIL")
    failed.append("rmdir")
if got != "ok":
    failed.append("resize")

new = splats()
for line in new:
    print(f"kernel log: {line}   FAIL")
if new:
    failed.append("splat")
print("FAIL: the kernel did not keep the ABI" if failed else "PASS")
sys.exit(1 if failed else 0)
