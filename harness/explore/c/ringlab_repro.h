/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ringlab_repro.h: what every reproducer of ringlab's explorer needs, whatever the path.
 * A generated repro.c carries this text (and its path's header) inline, so it builds alone:
 *   gcc -Wall -o repro repro.c && ./repro
 * Output is KTAP as tools/testing/selftests/kselftest.h prints it: the version line, the plan,
 * a numbered result per step and per end check, "# " diagnostics before a result, the totals;
 * exit KSFT_PASS (0), KSFT_FAIL (1) or KSFT_SKIP (4).
 *
 * Before including it, a program defines SLOTS (the highest step id + 2): fd[], addr[] and
 * len[] are indexed by the id of the step that made the object (actor i's ids start at
 * 1000 i: each actor's thread has slots of its own). The static buffers a function returns
 * are per thread, for the same reason.
 */
#ifndef RINGLAB_REPRO_H
#define RINGLAB_REPRO_H
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
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
#include <unistd.h>

#ifndef SLOTS
#define SLOTS 64
#endif

#define KSFT_PASS 0
#define KSFT_FAIL 1
#define KSFT_SKIP 4

static int ksft_pass, ksft_fail, ksft_num;
static long page;
static int fd[SLOTS];
static char *addr[SLOTS];
static size_t len[SLOTS];
static int kmsg = -1;

static void ktap_begin(int plan)
{
	printf("TAP version 13\n1..%d\n", plan);
	fflush(stdout);
}

static void result(int ok, const char *what)
{
	if (ok)
		ksft_pass++;
	else
		ksft_fail++;
	printf("%s %d %s\n", ok ? "ok" : "not ok", ++ksft_num, what);
	fflush(stdout);
}

static int __attribute__((noreturn)) ktap_end(void)
{
	printf("# %s\n", ksft_fail ? "FAIL: the kernel did not keep the ABI" : "PASS");
	printf("# Totals: pass:%d fail:%d xfail:0 xpass:0 skip:0 error:0\n", ksft_pass, ksft_fail);
	exit(ksft_fail ? KSFT_FAIL : KSFT_PASS);
}

static __attribute__((noreturn)) void skip_all(const char *why)
{
	printf("TAP version 13\n1..0 # SKIP %s\n", why);
	exit(KSFT_SKIP);
}

static const char *res(int ok)
{
	static __thread char buf[32];

	if (ok)
		return "ok";
	snprintf(buf, sizeof(buf), "%s", strerrorname_np(errno) ? strerrorname_np(errno) : "?");
	return buf;
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

/*
 * A step's result against the results the ABI allows ("|"-separated) and, when pin >= 0,
 * VmPin against the charge model.
 */
static void __attribute__((unused)) step(const char *what, const char *got, const char *allowed,
					 long pin)
{
	char list[128], line[512], *tok, *save;
	int ok = 0;

	snprintf(list, sizeof(list), "%s", allowed);
	for (tok = strtok_r(list, "|", &save); tok; tok = strtok_r(NULL, "|", &save))
		ok |= !strcmp(tok, got);
	if (!ok)
		printf("# the ABI allows %s\n", allowed);
	if (pin >= 0 && vm_pin_kb() != pin) {
		printf("# VmPin %ld kB, the charge model says %ld\n", vm_pin_kb(), pin);
		ok = 0;
	}
	snprintf(line, sizeof(line), "%s -> %s", what, got);
	result(ok, line);
}

/*
 * A check of what the kernel shows through a mapping (the model's observation of the failed
 * check): each value against the model's, one KTAP result for them all.
 */
static int check_ok;

static void __attribute__((unused)) check_begin(void)
{
	check_ok = 1;
}

static void __attribute__((unused)) want(const char *name, long long got, long long expected)
{
	if (got != expected) {
		printf("# %s: %lld, the model says %lld\n", name, got, expected);
		check_ok = 0;
	}
}

static void __attribute__((unused)) want_str(const char *name, const char *got,
					     const char *expected)
{
	if (strcmp(got, expected)) {
		printf("# %s: %s, the model says %s\n", name, got, expected);
		check_ok = 0;
	}
}

static void __attribute__((unused)) check_end(const char *what)
{
	result(check_ok, what);
}

/* poll() of an fd, without waiting: "err", "hup", "in", "none", or the events in hex. */
static __attribute__((unused)) const char *polled(int f)
{
	static __thread char buf[32];
	struct pollfd p = { f, POLLIN, 0 };

	if (poll(&p, 1, 0) < 0)
		return res(0);
	if (p.revents & POLLERR)
		return "err";
	if (p.revents & POLLHUP)
		return "hup";
	if (p.revents & POLLIN)
		return "in";
	if (!p.revents)
		return "none";
	snprintf(buf, sizeof(buf), "events %#x", p.revents);
	return buf;
}

/* fork(): the child exits with how many of the mappings it has (mincore() is ENOMEM where
 * nothing is mapped); "ok" when none, "inherits N" otherwise. */
static __attribute__((unused)) const char *forked(void)
{
	static unsigned char vec[1 << 16];	/* written by the child only */
	static __thread char buf[32];
	int k, n = 0, status;
	pid_t pid = fork();

	if (!pid) {
		for (k = 0; k < SLOTS; k++)
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

static void release_all(void)
{
	int i;

	for (i = 0; i < SLOTS; i++) {
		if (addr[i])
			munmap(addr[i], len[i]);
		if (fd[i] > 0)
			close(fd[i]);
	}
}

static void kmsg_start(void)
{
	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg >= 0)
		lseek(kmsg, 0, SEEK_END);
}

/* SPLAT_BANNERS: the text a splat's first line holds (probes/splat_banners.py PREFIXES),
 * defined by the generated program before this header. */
static const char *const splat_banners[] = { SPLAT_BANNERS };

static void kmsg_check(void)
{
	char rec[8192];
	ssize_t n;
	size_t b;
	int splats = 0;

	while (kmsg >= 0 && ((n = read(kmsg, rec, sizeof(rec) - 1)) > 0 || errno == EPIPE)) {
		char *text;

		if (n <= 0)
			continue;
		rec[n] = 0;
		text = strchr(rec, ';');
		text = text ? text + 1 : rec;
		text[strcspn(text, "\n")] = 0;
		for (b = 0; b < sizeof(splat_banners) / sizeof(splat_banners[0]); b++) {
			if (strstr(text, splat_banners[b])) {
				printf("# %s\n", text);
				splats++;
				break;
			}
		}
	}
	result(!splats, "kernel log: no splat");
}
#endif /* RINGLAB_REPRO_H */
