// SPDX-License-Identifier: GPL-2.0
/*
 * every operation of trace-mmap
 *
 * Found by ringlab's explorer (./lab explore trace-mmap). Run as root on the kernel to test:
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
static int fd[23];
static char *addr[23];
static size_t len[23];
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
		for (k = 0; k < 23; k++)
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

#define TRACE_MMAP_IOCTL_GET_READER _IO('R', 0x20)

static char inst[256];

static const char *tw(const char *name, const char *value)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", inst, name);
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
	snprintf(inst, sizeof(inst), "/sys/kernel/tracing/instances/ringlab-repro-%d", getpid());
	if (mkdir(inst, 0755)) {
		printf("# no tracefs instances: %s\n", res(0));
		return KSFT_SKIP;
	}
	tw("buffer_size_kb", "8\n");
	tw("buffer_subbuf_size_kb", "4\n");
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);

	snprintf(path, sizeof(path), "%s/per_cpu/cpu0/trace_pipe_raw", inst);
	fd[0] = open(path, O_RDONLY | O_NONBLOCK);
	got = res(fd[0] >= 0);
	step(0, "open 0", got, "ok");

	snprintf(path, sizeof(path), "%s/per_cpu/cpu1/trace_pipe_raw", inst);
	fd[1] = open(path, O_RDWR | O_NONBLOCK);
	got = res(fd[1] >= 0);
	step(1, "open 1 rw", got, "ok|EPERM");
	pin_is(1, 4);

	a = mmap(NULL, page, PROT_READ, MAP_SHARED, fd[0], 0);
	got = res(a != MAP_FAILED);
	if (a != MAP_FAILED) { addr[2] = a; len[2] = page; }
	step(2, "mmap @0 meta r shared", got, "EINVAL|ENOMEM|ok");

	a = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd[0], page);
	got = res(a != MAP_FAILED);
	if (a != MAP_FAILED) { addr[3] = a; len[3] = page; }
	step(3, "mmap @0 off rw private", got, "ok");
	pin_is(3, 12);

	a = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_SHARED, fd[1], 0);
	got = res(a != MAP_FAILED);
	if (a != MAP_FAILED) { addr[4] = a; len[4] = page; }
	if (a != MAP_FAILED) {
		memcpy(meta, a, sizeof(meta));	/* meta_page_size, -, subbuf_size, nr_subbufs */
		len[4] = meta[0] + (size_t)(meta[3]) * meta[2];
		addr[4] = mmap(NULL, len[4], PROT_READ | PROT_EXEC, MAP_SHARED, fd[1], 0);
		munmap(a, page);
		got = res(addr[4] != MAP_FAILED);
		if (addr[4] == MAP_FAILED) addr[4] = NULL;
	}
	step(4, "mmap @1 all rx shared", got, "ok|EPERM");

	a = mmap(NULL, page, PROT_READ, MAP_SHARED, fd[1], 0);
	got = res(a != MAP_FAILED);
	if (a != MAP_FAILED) { addr[5] = a; len[5] = page; }
	if (a != MAP_FAILED) {
		memcpy(meta, a, sizeof(meta));	/* meta_page_size, -, subbuf_size, nr_subbufs */
		len[5] = meta[0] + (size_t)(meta[3] + 1) * meta[2];
		addr[5] = mmap(NULL, len[5], PROT_READ, MAP_SHARED, fd[1], 0);
		munmap(a, page);
		got = res(addr[5] != MAP_FAILED);
		if (addr[5] == MAP_FAILED) addr[5] = NULL;
	}
	step(5, "mmap @1 past r shared", got, "EINVAL|ENOMEM|ok");
	pin_is(5, 20);

	got = res(ioctl(fd[0], TRACE_MMAP_IOCTL_GET_READER) == 0);
	step(6, "get-reader @0", got, "ok");

	got = res(ioctl(fd[0], _IO('R', 0x21)) == 0);	/* no such ioctl */
	step(7, "ioctl @0", got, "ok|EPERM");
	pin_is(7, 28);

	for (j = 0; j < 10; j++) got = tw("trace_marker", "ringlab\n");
	step(8, "write 10", got, "EINVAL|ENOMEM|ok");

	got = res(mprotect(addr[2], len[2], PROT_READ | PROT_WRITE) == 0);
	step(9, "mprotect @2", got, "ok");
	pin_is(9, 36);

	got = res(madvise(addr[2], len[2], MADV_DOFORK) == 0);
	step(10, "madvise @2 dofork", got, "ok|EPERM");

	got = forked();
	step(11, "fork", got, "EINVAL|ENOMEM|ok");
	pin_is(11, 44);

	spot = mmap(NULL, len[2], PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	a = mremap(addr[2], len[2], len[2], MREMAP_MAYMOVE | MREMAP_FIXED, spot);
	got = res(a != MAP_FAILED);
	if (a != MAP_FAILED) addr[2] = a;
	step(12, "mremap @2 move", got, "ok");

	a = mremap(addr[4], len[4], len[4] + page, 0);
	got = res(a != MAP_FAILED);
	step(13, "mremap @4 grow", got, "ok|EPERM");
	pin_is(13, 52);

	a = mremap(addr[4], len[4], len[4] - page, 0);
	got = res(a != MAP_FAILED);
	step(14, "mremap @4 shrink", got, "EINVAL|ENOMEM|ok");

	a = mremap(addr[4], len[4], len[4], MREMAP_MAYMOVE | MREMAP_DONTUNMAP);
	got = res(a != MAP_FAILED);
	step(15, "mremap @4 dontunmap", got, "ok");
	pin_is(15, 60);

	got = res(munmap(addr[4] + len[4] - page, page) == 0);
	step(16, "munmap-part @4", got, "ok|EPERM");

	got = tw("buffer_size_kb", "32\n");
	step(17, "resize 32", got, "EINVAL|ENOMEM|ok");
	pin_is(17, 68);

	got = tw("buffer_subbuf_size_kb", "8\n");
	step(18, "subbuf 8", got, "ok");

	got = tw("snapshot", "1\n");
	step(19, "snapshot 1", got, "ok|EPERM");
	pin_is(19, 76);

	got = res(munmap(addr[2], len[2]) == 0);
	if (!strcmp(got, "ok")) addr[2] = NULL;
	step(20, "munmap @2", got, "EINVAL|ENOMEM|ok");

	close(fd[0]);
	fd[0] = 0;
	got = "ok";
	step(21, "close @0", got, "ok");
	pin_is(21, 84);

	for (i = 0; i < 23; i++) {
		if (addr[i])
			munmap(addr[i], len[i]);
		if (fd[i] > 0)
			close(fd[i]);
	}
	got = tw("buffer_size_kb", "12\n");
	printf("%s - end: buffer_size_kb with nothing mapped -> %s\n",
	       strcmp(got, "ok") ? "not ok" : "ok", got);
	failed |= !!strcmp(got, "ok");
	if (rmdir(inst)) {
		printf("not ok - end: rmdir of the instance -> %s\n", res(0));
		failed = 1;
	} else {
		printf("ok - end: rmdir of the instance\n");
	}

	kmsg_check();
	printf("# %s\n", failed ? "FAIL: the kernel did not keep the ABI" : "PASS");
	return failed ? KSFT_FAIL : KSFT_PASS;
}
