// SPDX-License-Identifier: GPL-2.0
/*
 * every operation of pinning
 *
 * Found by ringlab's explorer (./lab explore pinning). Run as root on the kernel to test:
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
static int fd[25];
static char *addr[25];
static size_t len[25];
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
		for (k = 0; k < 25; k++)
			if (addr[k] && !mincore(addr[k], len[k], vec))
				n++;
		_exit(n);
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status))
		return "child failed";
	if (!WEXITSTATUS(status))
		return "ok";
	snprintf(buf, sizeof(buf), "inherits %d", WEXITSTATUS(status));
	return buf;
}

static const char *res(int ok)
{
	static char buf[32];

	if (ok)
		return "ok";
	snprintf(buf, sizeof(buf), "%s", strerrorname_np(errno) ? strerrorname_np(errno) : "?");
	return buf;
}

/* A result and the results the ABI allows, "|"-separated. */
static void step(int n, const char *what, const char *got, const char *allowed)
{
	char list[128], *tok, *save;
	int ok = 0;

	snprintf(list, sizeof(list), "%s", allowed);
	for (tok = strtok_r(list, "|", &save); tok; tok = strtok_r(NULL, "|", &save))
		ok |= !strcmp(tok, got);
	printf("%s %d - %s -> %s%s%s\n", ok ? "ok" : "not ok", n, what, got,
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
		printf("not ok %d - VmPin %ld kB, the charge model says %ld\n", n, got, want);
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
			printf("not ok - kernel log: %s\n", text);
			failed = 1;
		}
	}
}

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
	struct rlimit rl = { 32768, 32768 };
	char value[32];
	long left;
	char *a, *spot;
	pid_t pid;
	int status, i, j;

	(void)spot; (void)pid; (void)status; (void)a; (void)j;
	page = sysconf(_SC_PAGESIZE);
	if (geteuid()) {
		printf("# run as root: it sets perf sysctls, then becomes user 54321\n");
		return KSFT_SKIP;
	}
	kmsg_start();
	snprintf(value, sizeof(value), "%d\n", 36);
	write_file("/proc/sys/kernel/perf_event_mlock_kb", value);
	write_file("/proc/sys/kernel/perf_event_paranoid", "1\n");
	setrlimit(RLIMIT_MEMLOCK, &rl);
	setgroups(0, NULL);
	setresgid(54321, 54321, 0);
	setresuid(54321, 54321, 0);	/* a fresh user: its perf_mlock starts at 0 */
	set_ipc_lock(1);

	const char *got = "ok";

	fd[0] = open_event("dummy");
	got = res(fd[0] >= 0);
	step(0, "open dummy", got, "ok");

	fd[1] = open_event("tp");
	got = res(fd[1] >= 0);
	step(1, "open tp", got, "ok|EPERM");
	pin_is(1, 4);

	fd[2] = open_event("pmu");
	got = res(fd[2] >= 0);
	step(2, "open pmu", got, "EINVAL|ENOMEM|ok");

	a = mmap(NULL, 9 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd[0], 0);
	got = res(a != MAP_FAILED);
	if (a != MAP_FAILED) { addr[3] = a; len[3] = 9 * page; }
	step(3, "mmap @0 9 rw shared", got, "ok");
	pin_is(3, 12);

	a = mmap(NULL, 3 * page, PROT_READ, MAP_PRIVATE, fd[0], 0);
	got = res(a != MAP_FAILED);
	if (a != MAP_FAILED) { addr[4] = a; len[4] = 3 * page; }
	step(4, "mmap @0 3 r private", got, "ok|EPERM");

	a = mmap(NULL, 5 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd[2], 0);
	got = res(a != MAP_FAILED);
	if (a != MAP_FAILED) { addr[5] = a; len[5] = 5 * page; }
	step(5, "mmap @2 5 rw shared", got, "EINVAL|ENOMEM|ok");
	pin_is(5, 20);

	((struct perf_event_mmap_page *)addr[5])->aux_offset = len[5];
	((struct perf_event_mmap_page *)addr[5])->aux_size = 4 * page;
	a = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd[2], len[5]);
	got = res(a != MAP_FAILED);
	if (a != MAP_FAILED) { addr[6] = a; len[6] = 4 * page; }
	step(6, "aux @2 4", got, "ok");

	got = res(ioctl(fd[1], PERF_EVENT_IOC_PAUSE_OUTPUT, 1) == 0);
	step(7, "pause @1 1", got, "ok|EPERM");
	pin_is(7, 28);

	got = res(ioctl(fd[1], PERF_EVENT_IOC_PAUSE_OUTPUT, 0) == 0);
	step(8, "pause @1 0", got, "EINVAL|ENOMEM|ok");

	for (i = 0; i < 3; i++) getppid();
	got = "ok";
	step(9, "fire 3", got, "ok");
	pin_is(9, 36);

	((struct perf_event_mmap_page *)addr[3])->data_tail = ((struct perf_event_mmap_page *)addr[3])->data_head;
	got = "ok";
	step(10, "consume @3", got, "ok|EPERM");

	j = open("/dev/zero", O_RDONLY);	/* a zero byte stored by the kernel */
	got = res(read(j, addr[3] + 2 * page + 512, 1) == 1);
	close(j);
	step(11, "poke @3 2", got, "EINVAL|ENOMEM|ok");
	pin_is(11, 44);

	got = res(madvise(addr[3], len[3], MADV_DOFORK) == 0);
	step(12, "madvise @3 dofork", got, "ok");

	got = res(madvise(addr[3], len[3], MADV_DONTFORK) == 0);
	step(13, "madvise @3 dontfork", got, "ok|EPERM");
	pin_is(13, 52);

	got = res(madvise(addr[4], len[4], MADV_DONTDUMP) == 0);
	step(14, "madvise @4 dontdump", got, "EINVAL|ENOMEM|ok");

	got = res(madvise(addr[4], len[4], MADV_WIPEONFORK) == 0);
	step(15, "madvise @4 wipeonfork", got, "ok");
	pin_is(15, 60);

	got = forked();
	step(16, "fork", got, "ok|EPERM");

	spot = mmap(NULL, len[3], PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	a = mremap(addr[3], len[3], len[3], MREMAP_MAYMOVE | MREMAP_FIXED, spot);
	got = res(a != MAP_FAILED);
	if (a != MAP_FAILED) addr[3] = a;
	step(17, "mremap @3 move", got, "EINVAL|ENOMEM|ok");
	pin_is(17, 68);

	a = mremap(addr[3], len[3], len[3] + page, 0);
	got = res(a != MAP_FAILED);
	step(18, "mremap @3 grow", got, "ok");

	a = mremap(addr[4], len[4], len[4] - page, 0);
	got = res(a != MAP_FAILED);
	step(19, "mremap @4 shrink", got, "ok|EPERM");
	pin_is(19, 76);

	a = mremap(addr[4], len[4], len[4], MREMAP_MAYMOVE | MREMAP_DONTUNMAP);
	got = res(a != MAP_FAILED);
	step(20, "mremap @4 dontunmap", got, "EINVAL|ENOMEM|ok");

	got = res(munmap(addr[5] + len[5] - page, page) == 0);
	step(21, "munmap-part @5", got, "ok");
	pin_is(21, 84);

	got = res(munmap(addr[3], len[3]) == 0);
	if (!strcmp(got, "ok")) addr[3] = NULL;
	step(22, "munmap @3", got, "ok|EPERM");

	close(fd[0]);
	fd[0] = 0;
	got = "ok";
	step(23, "close @0", got, "EINVAL|ENOMEM|ok");
	pin_is(23, 92);

	for (i = 0; i < 25; i++) {
		if (addr[i])
			munmap(addr[i], len[i]);
		if (fd[i] > 0)
			close(fd[i]);
	}
	if (vm_pin_kb()) {
		printf("not ok - end: VmPin %ld kB with everything unmapped\n", vm_pin_kb());
		failed = 1;
	}
	/* The whole allowance, RLIMIT_MEMLOCK 0, no CAP_IPC_LOCK: it must all fit again. */
	set_ipc_lock(0);
	rl.rlim_cur = rl.rlim_max = 0;
	setrlimit(RLIMIT_MEMLOCK, &rl);
	left = 36 / (page / 1024) * sysconf(_SC_NPROCESSORS_ONLN);
	while (left > 0) {
		long size = left == 1 ? 1 : 2;
		int f = open_event("dummy");

		while (size > 1 && 1 + 2 * (size - 1) <= left)
			size = 1 + 2 * (size - 1);
		if (mmap(NULL, size * page, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0) == MAP_FAILED) {
			printf("not ok - end: the allowance: %s mapping %ld pages\n", res(0), size);
			failed = 1;
			break;
		}
		left -= size;
	}
	if (!failed)
		printf("ok - end: the allowance maps again\n");

	kmsg_check();
	printf("# %s\n", failed ? "FAIL: the kernel did not keep the ABI" : "PASS");
	return failed ? KSFT_FAIL : KSFT_PASS;
}
