"""A failure's shortest sequence as one C file in kselftest style: builds with `gcc -o repro
repro.c`, exits KSFT_PASS (0), KSFT_FAIL (1) or KSFT_SKIP (4), prints a TAP-like line per
call. The same calls as repro.py (harness/explore/reproducer.py), the same judgement."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

# The instance file a trace-mmap step writes (both reproducers use it).
TRACEFS_FILE = {"resize": "buffer_size_kb", "subbuf": "buffer_subbuf_size_kb",
                "snapshot": "snapshot"}


@dataclass(frozen=True)
class Step:
    """One explorer step as both generators read it: each operation's code is written from
    this alone (plus, in C, the data mappings made so far), so the per-operation functions
    share one way of naming a step's slot, its references and its printed form."""
    op: str
    args: list
    id: int
    trace: bool     # a trace-mmap step: open and mmap are of trace_pipe_raw, not perf

    @classmethod
    def of(cls, step: dict, path: str) -> Step:
        return cls(step["op"], step.get("args", []), step["id"], path == "trace-mmap")

    def ref(self, k: int = 0) -> int:
        """The step id an "@N" argument names (the fd or mapping slot it made)."""
        return int(str(self.args[k])[1:])

    @property
    def what(self) -> str:
        """The step as printed beside its result: "mmap @0 9 rw shared"."""
        return f"{self.op} {' '.join(map(str, self.args))}".strip()

_HEAD = r'''// SPDX-License-Identifier: GPL-2.0
/*
 * %(title)s
 *
 * Found by ringlab's explorer (./lab explore %(path)s). Run as root on the kernel to test:
 *   gcc -Wall -o repro repro.c && ./repro
 * Exit 0 (KSFT_PASS): the kernel kept the ABI; 1 (KSFT_FAIL): it did not; 4: cannot run here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>
#include <linux/perf_event.h>

#define KSFT_PASS 0
#define KSFT_FAIL 1
#define KSFT_SKIP 4

static int failed;
static long page;
static int fd[%(n)d];
static char *addr[%(n)d];
static size_t len[%(n)d];
static int kmsg = -1;

/* fork(): the child exits with how many of the mappings it has (mincore() is ENOMEM where
 * nothing is mapped); "ok" when none, "inherits N" otherwise. */
static __attribute__((unused)) const char *forked(void)
{
	static unsigned char vec[1 << 16];
	static char buf[32];
	int k, n = 0, status;
	pid_t pid = fork();

	if (!pid) {
		for (k = 0; k < %(n)d; k++)
			if (addr[k] && !mincore(addr[k], len[k], vec))
				n++;
		_exit(n);
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status))
		return "child failed";
	if (!WEXITSTATUS(status))
		return "ok";
	snprintf(buf, sizeof(buf), "inherits %%d", WEXITSTATUS(status));
	return buf;
}

static const char *res(int ok)
{
	static char buf[32];

	if (ok)
		return "ok";
	snprintf(buf, sizeof(buf), "%%s", strerrorname_np(errno) ? strerrorname_np(errno) : "?");
	return buf;
}

/* A result and the results the ABI allows, "|"-separated. */
static void step(int n, const char *what, const char *got, const char *allowed)
{
	char list[128], *tok, *save;
	int ok = 0;

	snprintf(list, sizeof(list), "%%s", allowed);
	for (tok = strtok_r(list, "|", &save); tok; tok = strtok_r(NULL, "|", &save))
		ok |= !strcmp(tok, got);
	printf("%%s %%d - %%s -> %%s%%s%%s\n", ok ? "ok" : "not ok", n, what, got,
	       ok ? "" : " # the ABI allows ", ok ? "" : allowed);
	failed |= !ok;
}

static long vm_pin_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmPin:", 6))
			kb = atol(line + 6);
	if (f)
		fclose(f);
	return kb;
}

static void __attribute__((unused)) pin_is(int n, long want)
{
	long got = vm_pin_kb();

	if (got != want) {
		printf("not ok %%d - VmPin %%ld kB, the charge model says %%ld\n", n, got, want);
		failed = 1;
	}
}

static int write_file(const char *path, const char *value)
{
	int f = open(path, O_WRONLY | O_TRUNC), ret = 0;

	if (f < 0)
		return -1;
	if (write(f, value, strlen(value)) < 0)
		ret = -1;
	close(f);
	return ret;
}

static void kmsg_start(void)
{
	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg >= 0)
		lseek(kmsg, 0, SEEK_END);
}

static void kmsg_check(void)
{
	char rec[8192];
	ssize_t n;

	while (kmsg >= 0 && ((n = read(kmsg, rec, sizeof(rec) - 1)) > 0 || errno == EPIPE)) {
		char *text;

		if (n <= 0)
			continue;
		rec[n] = 0;
		text = strchr(rec, ';');
		text = text ? text + 1 : rec;
		text[strcspn(text, "\n")] = 0;
		if (strstr(text, "WARNING:") || strstr(text, "BUG:") || strstr(text, "Oops") ||
		    strstr(text, "refcount_t:") || strstr(text, "UBSAN:")) {
			printf("not ok - kernel log: %%s\n", text);
			failed = 1;
		}
	}
}
'''

_PERF = r'''
static int open_event(const char *kind)
{
	struct perf_event_attr a;
	char buf[32] = "";
	FILE *f;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.disabled = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	if (!strcmp(kind, "dummy")) {
		a.type = PERF_TYPE_SOFTWARE;
		a.config = PERF_COUNT_SW_DUMMY;
	} else if (!strcmp(kind, "tp")) {
		f = fopen("/sys/kernel/tracing/events/syscalls/sys_enter_getppid/id", "r");
		if (!f || !fgets(buf, sizeof(buf), f))
			exit(KSFT_SKIP);
		fclose(f);
		a.type = PERF_TYPE_TRACEPOINT;
		a.config = atoi(buf);
		a.sample_period = 1;
		a.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
		a.disabled = a.exclude_kernel = a.exclude_hv = 0;
	} else {
		f = fopen("/sys/bus/event_source/devices/ringlab_aux/type", "r");
		if (!f || !fgets(buf, sizeof(buf), f)) {
			printf("# the test PMU ringlab_aux is not loaded\n");
			exit(KSFT_SKIP);
		}
		fclose(f);
		a.type = atoi(buf);
		a.config = 4096;
	}
	return syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static void set_ipc_lock(int on)
{
	struct { uint32_t version; int pid; } hdr = { 0x20080522, 0 };
	uint32_t data[6] = { on ? 1u << 14 : 0, 1u << 14, 0, 0, 0, 0 };

	syscall(SYS_capset, &hdr, data);
}

int main(void)
{
	struct rlimit rl = { %(rlimit)d, %(rlimit)d };
	char value[32];
	long left;
	char *a, *spot;
	pid_t pid;
	int status, i, j;

	(void)spot; (void)pid; (void)status; (void)a; (void)j;
	page = sysconf(_SC_PAGESIZE);
	if (geteuid()) {
		printf("# run as root: it sets perf sysctls, then becomes user %(uid)d\n");
		return KSFT_SKIP;
	}
	kmsg_start();
	snprintf(value, sizeof(value), "%%d\n", %(mlock_kb)d);
	write_file("/proc/sys/kernel/perf_event_mlock_kb", value);
	write_file("/proc/sys/kernel/perf_event_paranoid", "1\n");
	setrlimit(RLIMIT_MEMLOCK, &rl);
	setgroups(0, NULL);
	setresgid(%(uid)d, %(uid)d, 0);
	setresuid(%(uid)d, %(uid)d, 0);	/* a fresh user: its perf_mlock starts at 0 */
%(caps)s
'''

_PERF_END = r'''
	for (i = 0; i < %(n)d; i++) {
		if (addr[i])
			munmap(addr[i], len[i]);
		if (fd[i] > 0)
			close(fd[i]);
	}
	if (vm_pin_kb()) {
		printf("not ok - end: VmPin %%ld kB with everything unmapped\n", vm_pin_kb());
		failed = 1;
	}
	/* The whole allowance, RLIMIT_MEMLOCK 0, no CAP_IPC_LOCK: it must all fit again. */
	set_ipc_lock(0);
	rl.rlim_cur = rl.rlim_max = 0;
	setrlimit(RLIMIT_MEMLOCK, &rl);
	left = %(mlock_kb)d / (page / 1024) * sysconf(_SC_NPROCESSORS_ONLN);
	while (left > 0) {
		long size = left == 1 ? 1 : 2;
		int f = open_event("dummy");

		while (size > 1 && 1 + 2 * (size - 1) <= left)
			size = 1 + 2 * (size - 1);
		if (mmap(NULL, size * page, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0) == MAP_FAILED) {
			printf("not ok - end: the allowance: %%s mapping %%ld pages\n", res(0), size);
			failed = 1;
			break;
		}
		left -= size;
	}
	if (!failed)
		printf("ok - end: the allowance maps again\n");
'''

_TRACE = r'''
#define TRACE_MMAP_IOCTL_GET_READER _IO('R', 0x20)

static char inst[256];

static const char *tw(const char *name, const char *value)
{
	char path[512];

	snprintf(path, sizeof(path), "%%s/%%s", inst, name);
	return res(write_file(path, value) == 0);
}

int main(void)
{
	char path[512], *spot, *a;
	cpu_set_t cpus;
	uint32_t meta[4];
	pid_t pid;
	int status, i, j;
	const char *got = "ok";

	(void)spot; (void)pid; (void)status; (void)meta; (void)j; (void)a;
	page = sysconf(_SC_PAGESIZE);
	if (geteuid()) {
		printf("# run as root\n");
		return KSFT_SKIP;
	}
	kmsg_start();
	snprintf(inst, sizeof(inst), "/sys/kernel/tracing/instances/ringlab-repro-%%d", getpid());
	if (mkdir(inst, 0755)) {
		printf("# no tracefs instances: %%s\n", res(0));
		return KSFT_SKIP;
	}
	tw("buffer_size_kb", "%(buffer_kb)d\n");
	tw("buffer_subbuf_size_kb", "%(subbuf_kb)d\n");
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);
'''

_TRACE_END = r'''
	for (i = 0; i < %(n)d; i++) {
		if (addr[i])
			munmap(addr[i], len[i]);
		if (fd[i] > 0)
			close(fd[i]);
	}
	got = tw("buffer_size_kb", "%(resize)d\n");
	printf("%%s - end: buffer_size_kb with nothing mapped -> %%s\n",
	       strcmp(got, "ok") ? "not ok" : "ok", got);
	failed |= !!strcmp(got, "ok");
	if (rmdir(inst)) {
		printf("not ok - end: rmdir of the instance -> %%s\n", res(0));
		failed = 1;
	} else {
		printf("ok - end: rmdir of the instance\n");
	}
'''

_TAIL = r'''
	kmsg_check();
	printf("# %s\n", failed ? "FAIL: the kernel did not keep the ABI" : "PASS");
	return failed ? KSFT_FAIL : KSFT_PASS;
}
'''


# --- each operation's C, one function per operation -----------------------------------------

# The data mappings made so far: mapping slot -> (its event's slot, writable). An AUX area is
# placed after its event's writable one, so mmap records them as it goes.
Mfd = dict[int, tuple[int, bool]]

_PROT = {"rw": "PROT_READ | PROT_WRITE", "rx": "PROT_READ | PROT_EXEC"}
_MADVICE = {"dofork": "MADV_DOFORK", "dontfork": "MADV_DONTFORK", "dontdump": "MADV_DONTDUMP",
            "wipeonfork": "MADV_WIPEONFORK"}


def _open(s: Step, mfd: Mfd) -> list[str]:
    i, a = s.id, s.args
    if not s.trace:
        return [f'fd[{i}] = open_event("{a[0]}");', f'got = res(fd[{i}] >= 0);']
    mode = "O_RDWR" if a[1:] == ["rw"] else "O_RDONLY"
    return [f'snprintf(path, sizeof(path), "%s/per_cpu/cpu{a[0]}/trace_pipe_raw", inst);',
            f"fd[{i}] = open(path, {mode} | O_NONBLOCK);", f"got = res(fd[{i}] >= 0);"]


def _pause(s: Step, mfd: Mfd) -> list[str]:
    return [f"got = res(ioctl(fd[{s.ref()}], PERF_EVENT_IOC_PAUSE_OUTPUT, {s.args[1]}) == 0);"]


def _ioctl(s: Step, mfd: Mfd) -> list[str]:
    return [f"got = res(ioctl(fd[{s.ref()}], _IO('R', 0x21)) == 0);\t/* no such ioctl */"]


def _poke(s: Step, mfd: Mfd) -> list[str]:
    return ['j = open("/dev/zero", O_RDONLY);\t/* a zero byte stored by the kernel */',
            f"got = res(read(j, addr[{s.ref()}] + {s.args[1]} * page + 512, 1) == 1);",
            "close(j);"]


def _mprotect(s: Step, mfd: Mfd) -> list[str]:
    r = s.ref()
    return [f"got = res(mprotect(addr[{r}], len[{r}], PROT_READ | PROT_WRITE) == 0);"]


def _close(s: Step, mfd: Mfd) -> list[str]:
    return [f"close(fd[{s.ref()}]);", f"fd[{s.ref()}] = 0;", 'got = "ok";']


def _mmap(s: Step, mfd: Mfd) -> list[str]:
    i, a = s.id, s.args
    prot = _PROT.get(a[2], "PROT_READ")
    flags = "MAP_SHARED" if a[3] == "shared" else "MAP_PRIVATE"
    size = f"{a[1]} * page" if not s.trace else "page"
    offset = "page" if s.trace and a[1] == "off" else "0"
    lines = [f"a = mmap(NULL, {size}, {prot}, {flags}, fd[{s.ref()}], {offset});",
             "got = res(a != MAP_FAILED);",
             f"if (a != MAP_FAILED) {{ addr[{i}] = a; len[{i}] = {size}; }}"]
    if s.trace and a[1] in ("all", "past"):
        lines += _whole_trace_buffer(s, prot, flags)
    if not s.trace:
        mfd[i] = (s.ref(), a[2] == "rw")
    return lines


def _whole_trace_buffer(s: Step, prot: str, flags: str) -> list[str]:
    """The meta page read for the buffer's size, then the whole buffer (one sub-buffer past
    it for "past") mapped in its place."""
    i, more = s.id, " + 1" if s.args[1] == "past" else ""
    return ["if (a != MAP_FAILED) {",
            "\tmemcpy(meta, a, sizeof(meta));\t/* meta_page_size, -, subbuf_size, "
            "nr_subbufs */",
            f"\tlen[{i}] = meta[0] + (size_t)(meta[3]{more}) * meta[2];",
            f"\taddr[{i}] = mmap(NULL, len[{i}], {prot}, {flags}, fd[{s.ref()}], 0);",
            "\tmunmap(a, page);",
            f"\tgot = res(addr[{i}] != MAP_FAILED);",
            f"\tif (addr[{i}] == MAP_FAILED) addr[{i}] = NULL;", "}"]


def _aux(s: Step, mfd: Mfd) -> list[str]:
    i, d, pages = s.id, s.ref(), s.args[1]
    data = next(k for k, v in mfd.items() if v == (d, True))
    return [f"((struct perf_event_mmap_page *)addr[{data}])->aux_offset = len[{data}];",
            f"((struct perf_event_mmap_page *)addr[{data}])->aux_size = {pages} * page;",
            f"a = mmap(NULL, {pages} * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd[{d}], "
            f"len[{data}]);", "got = res(a != MAP_FAILED);",
            f"if (a != MAP_FAILED) {{ addr[{i}] = a; len[{i}] = {pages} * page; }}"]


def _munmap(s: Step, mfd: Mfd) -> list[str]:
    r = s.ref()
    return [f"got = res(munmap(addr[{r}], len[{r}]) == 0);",
            f'if (!strcmp(got, "ok")) addr[{r}] = NULL;']


def _munmap_part(s: Step, mfd: Mfd) -> list[str]:
    r = s.ref()
    return [f"got = res(munmap(addr[{r}] + len[{r}] - page, page) == 0);"]


def _mremap(s: Step, mfd: Mfd) -> list[str]:
    r, how = s.ref(), s.args[1]
    if how == "move":
        return [f"spot = mmap(NULL, len[{r}], PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);",
                f"a = mremap(addr[{r}], len[{r}], len[{r}], MREMAP_MAYMOVE | MREMAP_FIXED, "
                "spot);", "got = res(a != MAP_FAILED);",
                f"if (a != MAP_FAILED) addr[{r}] = a;"]
    size = {"grow": f"len[{r}] + page", "shrink": f"len[{r}] - page",
            "dontunmap": f"len[{r}]"}[how]
    flags = "MREMAP_MAYMOVE | MREMAP_DONTUNMAP" if how == "dontunmap" else "0"
    return [f"a = mremap(addr[{r}], len[{r}], {size}, {flags});", "got = res(a != MAP_FAILED);"]


def _madvise(s: Step, mfd: Mfd) -> list[str]:
    r = s.ref()
    return [f"got = res(madvise(addr[{r}], len[{r}], {_MADVICE[s.args[1]]}) == 0);"]


def _fork(s: Step, mfd: Mfd) -> list[str]:
    return ["got = forked();"]


def _fire(s: Step, mfd: Mfd) -> list[str]:
    return [f"for (i = 0; i < {s.args[0]}; i++) getppid();", 'got = "ok";']


def _consume(s: Step, mfd: Mfd) -> list[str]:
    r = s.ref()
    return [f"((struct perf_event_mmap_page *)addr[{r}])->data_tail = "
            f"((struct perf_event_mmap_page *)addr[{r}])->data_head;", 'got = "ok";']


def _get_reader(s: Step, mfd: Mfd) -> list[str]:
    return [f"got = res(ioctl(fd[{s.ref()}], TRACE_MMAP_IOCTL_GET_READER) == 0);"]


def _write(s: Step, mfd: Mfd) -> list[str]:
    return [f'for (j = 0; j < {s.args[0]}; j++) got = tw("trace_marker", "ringlab\\n");']


def _tracefs(s: Step, mfd: Mfd) -> list[str]:
    return [f'got = tw("{TRACEFS_FILE[s.op]}", "{s.args[0]}\\n");']


_C_OPS: dict[str, Callable[[Step, Mfd], list[str]]] = {
    "open": _open, "pause": _pause, "ioctl": _ioctl, "poke": _poke, "mprotect": _mprotect,
    "close": _close, "mmap": _mmap, "aux": _aux, "munmap": _munmap,
    "munmap-part": _munmap_part, "mremap": _mremap, "madvise": _madvise, "fork": _fork,
    "fire": _fire, "consume": _consume, "get-reader": _get_reader, "write": _write,
    **{op: _tracefs for op in TRACEFS_FILE}}


def _c_step(n: int, step: dict, allowed: list[str], pin: int | None, path: str,
            mfd: Mfd) -> list[str]:
    """A step's statements: its operation's calls, then the verdict on the result (and on
    VmPin when the model says what it must be)."""
    s = Step.of(step, path)
    if s.op not in _C_OPS:
        raise ValueError(f"no C reproducer for the operation {s.op!r}")
    lines = _C_OPS[s.op](s, mfd) + [f'step({n}, "{s.what}", got, "{"|".join(allowed)}");']
    return lines + ([f"pin_is({n}, {pin});"] if pin is not None else [])


def program(f: Any, title: str, expectations: list[dict]) -> str:
    s = dict(f.setup, **f.env)
    n = max([e["step"]["id"] for e in expectations] + [0]) + 2
    head = _HEAD % {"title": title.replace("*/", "* /"), "path": f.path, "n": n}
    mfd: Mfd = {}
    body: list[str] = []
    for k, e in enumerate(expectations):
        body += [""] + _c_step(k, e["step"], e["allowed"], e["vm_pin_kb"], f.path, mfd)
    if f.path == "trace-mmap":
        head += _TRACE % {"buffer_kb": s["buffer_kb"], "subbuf_kb": s["subbuf_kb"]}
        end = _TRACE_END % {"n": n, "resize": s["buffer_kb"] + 4}
        decl = ""
    else:
        caps = "\tset_ipc_lock(1);\n" if s.get("who") == "user+ipc_lock" else ""
        head += _PERF % {"rlimit": s["rlimit_pages"] * s["page_size"], "uid": 54321,
                         "mlock_kb": s["mlock_kb"], "caps": caps}
        end = _PERF_END % {"n": n, "mlock_kb": s["mlock_kb"]}
        decl = '\tconst char *got = "ok";\n'
    return head + decl + "\n".join("\t" + line if line else "" for line in body) + "\n" + \
        end + _TAIL
