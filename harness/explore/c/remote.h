/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ringlab_remote.h: the trace-remote path's reproducers, after ringlab_repro.h. The test
 * remote (remote_test.ko, CONFIG_TRACE_REMOTE_TEST) off, its event disabled, its buffer
 * emptied and sized; events numbered id=1, 2, ... on CPU 0; the consuming readers' tally (each
 * event once, in order, none skipped that a "CPU:0 [LOST K EVENTS]" line did not count); the
 * end check: off, emptied and with no reader, the buffer is unloaded (trace_remote.c).
 */
#ifndef RINGLAB_REMOTE_H
#define RINGLAB_REMOTE_H
#include <signal.h>
#include <sys/time.h>

#define IDLE_US 150000	/* a consuming read ends after this long with nothing */

static const char *remote = "/sys/kernel/tracing/remotes/test";
static int shown_in_order = 1;
static long long shown_stale;	/* events `trace` showed that a consuming read took */

static struct {
	long long marks, forgot, last, twice, missing, lost;
} tally;

static const char *rw(const char *name, const char *value)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", remote, name);
	return res(write_file(path, value) == 0);
}

static __attribute__((unused)) const char *write_events(int n)
{
	char id[32];
	const char *got;

	for (int i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "%lld\n", tally.marks + 1);
		got = rw("write_event", id);
		if (strcmp(got, "ok"))
			return got;
		tally.marks++;
	}
	return "ok";
}

static __attribute__((unused)) void tally_forget(void)
{
	tally.forgot = tally.marks;
}

static __attribute__((unused)) long long tally_unaccounted(void)
{
	return tally.missing > tally.lost ? tally.missing - tally.lost : 0;
}

/* One line of trace_pipe: "[0]\t  S.U: selftest id=N" or "CPU:0 [LOST K EVENTS]". */
static int tally_line(const char *line)
{
	const char *at = strstr(line, "selftest id=");
	long long n, k;

	if (sscanf(line, "CPU:%*d [LOST %lld EVENTS]", &k) == 1) {
		tally.lost += k;
		return 0;
	}
	if (line[0] != '[' || !at)
		return 0;
	n = atoll(at + 12);
	if (n <= tally.forgot)
		return 1;
	if (n <= tally.last) {
		tally.twice++;
		return 1;
	}
	tally.missing += n - (tally.last > tally.forgot ? tally.last : tally.forgot) - 1;
	tally.last = n;
	return 1;
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* A consuming read until it has had nothing for IDLE_US (the file blocks when empty, and
 * ignores O_NONBLOCK): "ok" if it had an event, else "empty". */
static __attribute__((unused)) const char *read_taking(int f)
{
	static char buf[1 << 20];
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval idle = { .it_value = { 0, IDLE_US } }, off = { { 0, 0 }, { 0, 0 } };
	size_t have = 0;
	int events = 0;
	ssize_t n;

	sigaction(SIGALRM, &sa, NULL);	/* no SA_RESTART: the alarm ends the read with EINTR */
	for (;;) {
		setitimer(ITIMER_REAL, &idle, NULL);
		n = read(f, buf + have, sizeof(buf) - 1 - have);
		setitimer(ITIMER_REAL, &off, NULL);
		if (n <= 0)
			break;
		have += n;
		if (have >= sizeof(buf) - 1)
			break;
	}
	buf[have] = 0;
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
		events += tally_line(line);
	return events ? "ok" : "empty";
}

/* `trace`, not consuming: its events in order, none a consuming read took already. */
static __attribute__((unused)) const char *show(void)
{
	char path[512], line[256];
	long long last = 0, n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/trace", remote);
	f = fopen(path, "r");
	if (!f)
		return res(0);
	shown_in_order = 1;
	shown_stale = 0;
	while (fgets(line, sizeof(line), f)) {
		char *at = strstr(line, "selftest id=");

		if (line[0] != '[' || !at)
			continue;
		n = atoll(at + 12);
		shown_in_order &= n > last;
		shown_stale += n > tally.forgot && n <= tally.last;
		last = n;
	}
	fclose(f);
	return "ok";
}

/* buffer_size_kb as read: "7 (loaded)". */
static int state(long long *kb)
{
	char path[512], line[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/buffer_size_kb", remote);
	f = fopen(path, "r");
	if (!f || !fgets(line, sizeof(line), f)) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	*kb = atoll(line);
	return strstr(line, "(loaded)") != NULL;
}

static __attribute__((unused)) long long state_kb(void)
{
	long long kb = -1;

	state(&kb);
	return kb;
}

static __attribute__((unused)) long long state_loaded(void)
{
	long long kb;

	return state(&kb);
}

static void quiet(void)
{
	rw("tracing_on", "0\n");
	rw("events/test/selftest/enable", "0\n");
	rw("trace", "\n");
}

static void remote_begin(int plan, const char *size_kb)
{
	cpu_set_t cpus;
	char path[512];

	page = sysconf(_SC_PAGESIZE);
	if (geteuid())
		skip_all("run as root");
	if (access(remote, F_OK) && system("modprobe remote_test") == -1)
		skip_all("no tracefs remotes/test (CONFIG_TRACE_REMOTE_TEST)");
	snprintf(path, sizeof(path), "%s/trace", remote);
	if (access(path, F_OK))
		skip_all("no tracefs remotes/test (CONFIG_TRACE_REMOTE_TEST)");
	ktap_begin(plan);
	kmsg_start();
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);
	quiet();
	rw("buffer_size_kb", size_kb);
}

static void remote_end(long long size_kb)
{
	char line[128];
	long long kb = -1;
	int loaded;

	release_all();
	quiet();
	loaded = state(&kb);
	snprintf(line, sizeof(line), "end: off, emptied, no reader -> %lld kB, %s", kb,
		 loaded ? "loaded" : "unloaded");
	result(kb == size_kb && loaded == 0, line);
}
#endif /* RINGLAB_REMOTE_H */
