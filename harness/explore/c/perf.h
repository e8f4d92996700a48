/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ringlab_perf.h: the perf paths' reproducers (perf-ring, perf-aux, pinning), after
 * ringlab_repro.h. The sysctls and user a sequence had, the events it opens, and the end
 * checks: nothing pinned with everything unmapped, the test PMU module's references back,
 * and the user's whole allowance mapping again (what the sequence was charged all came back:
 * perf_mmap_close()).
 */
#ifndef RINGLAB_PERF_H
#define RINGLAB_PERF_H
#include <linux/perf_event.h>
#include <time.h>

#define TRACEPOINT_ID "/sys/kernel/tracing/events/syscalls/sys_enter_getppid/id"
#define TEST_PMU_TYPE "/sys/bus/event_source/devices/ringlab_aux/type"

static int read_int(const char *path, int *value)
{
	char buf[32] = "";
	FILE *f = fopen(path, "r");

	if (!f || !fgets(buf, sizeof(buf), f)) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	*value = atoi(buf);
	return 0;
}

/* An event whose buffer takes the next opened event's records, or -1: PERF_FLAG_FD_OUTPUT
 * with PERF_FLAG_FD_NO_GROUP, that event as group_fd (per thread: an actor's own). */
static __thread int output_fd = -1;

static long open_attr(struct perf_event_attr *a)
{
	unsigned long flags = PERF_FLAG_FD_CLOEXEC;

	if (output_fd >= 0)
		flags |= PERF_FLAG_FD_OUTPUT | PERF_FLAG_FD_NO_GROUP;
	return syscall(SYS_perf_event_open, a, 0, -1, output_fd, flags);
}

/* ringlab's test PMU (kernels/modules/ringlab_aux), which has an AUX area: it writes
 * `chunk`-byte chunks, `budget` of them at the most (0: no end), the budget in attr.config
 * from bit 40 (probes/explore_perf.py PMU_BUDGET_SHIFT). */
static int pmu_type = -1;	/* read by perf_begin(), before a step may unregister it */

static int open_event_aux(unsigned int chunk, unsigned int budget)
{
	struct perf_event_attr a;

	if (pmu_type < 0)
		skip_all("the test PMU ringlab_aux is not loaded");
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = pmu_type;
	a.config = chunk | (__u64)budget << 40;
	a.disabled = a.exclude_kernel = a.exclude_hv = 1;
	return open_attr(&a);
}

static unsigned int __attribute__((unused)) budget[SLOTS];	/* test-PMU chunks at the most */

static void ring_copy(void *to, const char *ring, __u64 size, __u64 pos, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((char *)to)[i] = ring[(pos + i) % size];
}

/* Enable the test PMU's event and spin (a task's event runs only while the task does) until
 * the data ring whose control page is at ctl holds a PERF_RECORD_AUX per chunk of its
 * budget, or one flagged PERF_AUX_FLAG_TRUNCATED, 5 s at the most; then disable it. */
static void __attribute__((unused)) aux_run(int f, const char *ctl, unsigned int n)
{
	const struct perf_event_mmap_page *pg = (const void *)ctl;
	struct timespec t0, t;

	ioctl(f, PERF_EVENT_IOC_ENABLE, 0);
	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t0);
	do {
		__u64 head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
		__u64 pos = pg->data_tail;
		unsigned int records = 0;
		int cut = 0;

		while (pos < head) {
			struct perf_event_header h;
			__u64 flags;

			ring_copy(&h, ctl + pg->data_offset, pg->data_size, pos, sizeof(h));
			if (!h.size)
				break;
			if (h.type == PERF_RECORD_AUX) {
				ring_copy(&flags, ctl + pg->data_offset, pg->data_size,
					  pos + 24, sizeof(flags));
				records++;
				cut |= !!(flags & PERF_AUX_FLAG_TRUNCATED);
			}
			pos += h.size;
		}
		if (records >= n || cut)
			break;
		syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 5);
	ioctl(f, PERF_EVENT_IOC_DISABLE, 0);
}

/* The records in [data_tail, data_head) of the data ring whose control page is at ctl:
 * SAMPLE records, the counts of LOST ones, and the non-empty AUX ones as "size/flags,..."
 * into aux (n bytes). -1 when the ring is torn (more unread than it holds, a size-0 header). */
static int __attribute__((unused)) ring_walk(const char *ctl, long long *samples,
					    long long *lost, char *aux, size_t n)
{
	const struct perf_event_mmap_page *pg = (const void *)ctl;
	__u64 head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	__u64 pos = pg->data_tail;

	*samples = *lost = 0;
	aux[0] = 0;
	if (head - pos > pg->data_size)
		return -1;
	while (pos < head) {
		struct perf_event_header h;
		__u64 v[3];

		ring_copy(&h, ctl + pg->data_offset, pg->data_size, pos, sizeof(h));
		if (!h.size)
			return -1;
		ring_copy(v, ctl + pg->data_offset, pg->data_size, pos + sizeof(h), sizeof(v));
		if (h.type == PERF_RECORD_SAMPLE)
			(*samples)++;
		if (h.type == PERF_RECORD_LOST)
			*lost += v[1];
		if (h.type == PERF_RECORD_AUX && v[1])
			snprintf(aux + strlen(aux), n - strlen(aux), "%s%llu/%llu", aux[0] ? "," : "",
				 (unsigned long long)v[1], (unsigned long long)v[2]);
		pos += h.size;
	}
	return 0;
}

/* Whether every u64 the test PMU wrote (the newest area's worth before aux_head) holds its
 * AUX position (kernels/modules/ringlab_aux). */
static int __attribute__((unused)) aux_data_ok(const char *ctl, const char *aux, __u64 size)
{
	__u64 head = ((const struct perf_event_mmap_page *)ctl)->aux_head;
	__u64 p = head > size ? (head - size) & ~7ULL : 0;

	for (; p < head - head % 8; p += 8)
		if (*(const __u64 *)(aux + p % size) != p)
			return 0;
	return 1;
}

/* dummy: a software event, disabled, user only; tp: the getppid tracepoint, a sample per
 * call; pmu: the test PMU, 4 KiB chunks without end. */
static int open_event_wakeup(const char *kind, int wakeup);

static int __attribute__((unused)) open_event(const char *kind)
{
	return open_event_wakeup(kind, 0);
}

/* wakeup: wakeup_watermark in bytes (attr.watermark set), 0 for the default (half the
 * buffer: ring_buffer_init()). */
static int tp_id = -1;	/* read as root by perf_begin(): tracefs is root's */
#define PMU_REFS "/sys/module/ringlab_aux/refcnt"	/* the test PMU module's references */
static int pmu_refs_before;

static int open_event_wakeup(const char *kind, int wakeup)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.disabled = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	if (!strcmp(kind, "dummy")) {
		a.type = PERF_TYPE_SOFTWARE;
		a.config = PERF_COUNT_SW_DUMMY;
	} else if (!strcmp(kind, "tp")) {
		if (tp_id < 0)
			skip_all("no syscalls:sys_enter_getppid tracepoint");
		a.type = PERF_TYPE_TRACEPOINT;
		a.config = tp_id;
		a.sample_period = 1;
		a.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
		a.disabled = a.exclude_kernel = a.exclude_hv = 0;
		a.watermark = !!wakeup;
		a.wakeup_watermark = wakeup;
	} else {
		return open_event_aux(4096, 0);
	}
	return open_attr(&a);
}

/* CAP_IPC_LOCK in the effective set, or out of it (capset, _LINUX_CAPABILITY_VERSION_3). */
static void set_ipc_lock(int on)
{
	struct { uint32_t version; int pid; } hdr = { 0x20080522, 0 };
	uint32_t data[6] = { on ? 1u << 14 : 0, 1u << 14, 0, 0, 0, 0 };

	syscall(SYS_capset, &hdr, data);
}

/* The test PMU unregistered as a driver's unbind would (ringlab_aux's `unregister`): by a
 * child as root (the saved uid), so that this process keeps its user and capabilities. */
static __attribute__((unused)) const char *unregister_pmu(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		if (setresuid(0, 0, 0))
			_exit(errno);
		_exit(write_file("/sys/module/ringlab_aux/parameters/unregister", "1") ? errno : 0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return res(0);
	errno = WIFEXITED(status) ? WEXITSTATUS(status) : EIO;
	return res(!errno);
}

/* As root: the sequence's sysctls, then a fresh user (its perf_mlock starts at 0). */
static void perf_begin(int plan, long mlock_kb, long rlimit, int uid, int ipc_lock)
{
	struct rlimit rl = { rlimit, rlimit };
	char value[32];

	page = sysconf(_SC_PAGESIZE);
	if (geteuid())
		skip_all("run as root: it sets perf sysctls, then becomes another user");
	if (read_int(TRACEPOINT_ID, &tp_id))
		tp_id = -1;
	if (read_int(PMU_REFS, &pmu_refs_before))
		pmu_refs_before = 0;
	if (read_int(TEST_PMU_TYPE, &pmu_type))
		pmu_type = -1;
	ktap_begin(plan);
	kmsg_start();
	snprintf(value, sizeof(value), "%ld\n", mlock_kb);
	write_file("/proc/sys/kernel/perf_event_mlock_kb", value);
	write_file("/proc/sys/kernel/perf_event_paranoid", "1\n");
	setrlimit(RLIMIT_MEMLOCK, &rl);
	setgroups(0, NULL);
	setresgid(uid, uid, 0);
	setresuid(uid, uid, 0);
	if (ipc_lock)
		set_ipc_lock(1);
}

/* The end checks: VmPin 0 with everything unmapped; with the test PMU (pmu), its
 * module's references back where they were; the whole allowance, with RLIMIT_MEMLOCK 0 and
 * no CAP_IPC_LOCK, mapped again. */
static void perf_end(long mlock_kb, int pmu)
{
	struct rlimit rl = { 0, 0 };
	long left, pinned;
	char line[128] = "end: the allowance maps again";
	int ok = 1;

	release_all();
	pinned = vm_pin_kb();
	if (pinned)
		printf("# VmPin %ld kB\n", pinned);
	result(!pinned, "end: VmPin 0 with everything unmapped");
	if (pmu) {
		int refs = 0;

		if (read_int(PMU_REFS, &refs))
			refs = 0;
		if (refs != pmu_refs_before)
			printf("# ringlab_aux holds %d module reference(s) more than before\n",
			       refs - pmu_refs_before);
		result(refs == pmu_refs_before, "end: the test PMU's module references given back");
	}
	set_ipc_lock(0);
	setrlimit(RLIMIT_MEMLOCK, &rl);
	left = mlock_kb / (page / 1024) * sysconf(_SC_NPROCESSORS_ONLN);
	while (left > 0) {
		long size = left == 1 ? 1 : 2;
		int f = open_event("dummy");

		while (size > 1 && 1 + 2 * (size - 1) <= left)
			size = 1 + 2 * (size - 1);
		if (mmap(NULL, size * page, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0) == MAP_FAILED) {
			printf("# %s mapping %ld pages of the allowance\n", res(0), size);
			ok = 0;
			break;
		}
		left -= size;
	}
	result(ok, line);
}
#endif /* RINGLAB_PERF_H */
