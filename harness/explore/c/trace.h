/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ringlab_trace.h: the trace-mmap path's reproducers, after ringlab_repro.h. A tracing
 * instance of the sequence's own with its buffer sizes, pinned to CPU 0; the end checks: with
 * nothing mapped the buffer resizes and the instance is removed (tr->mapped and
 * cpu_buffer->mapped back to 0).
 */
#ifndef RINGLAB_TRACE_H
#define RINGLAB_TRACE_H
#if __has_include(<linux/trace_mmap.h>)
#include <linux/trace_mmap.h>
#else	/* uapi headers older than 6.10: the fields a reproducer reads, as trace_mmap.h has them */
#include <linux/types.h>
struct trace_buffer_meta {
	__u32 meta_page_size;
	__u32 meta_struct_len;
	__u32 subbuf_size;
	__u32 nr_subbufs;
	struct {
		__u64 lost_events;
		__u32 id;
		__u32 read;
	} reader;
	__u64 flags;
	__u64 entries;
	__u64 overrun;
	__u64 read;
	__u64 Reserved1;
	__u64 Reserved2;
};
#define TRACE_MMAP_IOCTL_GET_READER _IO('R', 0x20)
#endif

/* The commit word of the sub-buffer the meta page's reader.id names: its size in the low
 * bits (libtraceevent's COMMIT_MASK), RB_MISSED_EVENTS (bit 31) when events were lost before
 * it (kernel/trace/ring_buffer.c; an int constant local_add()ed, so the upper half too). */
#define COMMIT_MASK ((1ULL << 27) - 1)
#define RB_MISSED_EVENTS (1ULL << 31)

static unsigned long long __attribute__((unused)) reader_commit(const char *a)
{
	const struct trace_buffer_meta *mp = (const void *)a;

	return *(const unsigned long long *)(a + mp->meta_page_size +
					     (size_t)mp->reader.id * mp->subbuf_size + 8);
}

static char inst[256];

static const char *tw(const char *name, const char *value)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", inst, name);
	return res(write_file(path, value) == 0);
}

/* The number the instance's file `name` holds (`cat`), -1 where it cannot be read. */
static long long __attribute__((unused)) tr_read_int(const char *name)
{
	char path[512];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", inst, name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * The numbered events (probes/explore_trace.py, Tally): every trace_marker write is "ringlab
 * N"; a reader must take each one once, in order, and skip none that the kernel does not count
 * lost (per_cpu/cpu0/stats). `forgot`: written before a step that may take or drop events
 * unseen (GET_READER with nothing to read them through, a new size, a snapshot). Per thread:
 * actors at once are not judged by it, and must not race on it.
 */
static __thread struct {
	long long marks, forgot, last, twice, missing;
	long long lost_base;	/* what the stats counted lost when the tally last forgot */
	int read_since;		/* read() took events since the last GET_READER */
} tally;

/* What per_cpu/cpu0/stats counts lost: overrun, commit overrun, dropped events. */
static __attribute__((unused)) long long stats_lost(void)
{
	char path[512], line[128];
	long long lost = 0, v;
	FILE *f;

	snprintf(path, sizeof(path), "%s/per_cpu/cpu0/stats", inst);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "overrun: %lld", &v) == 1 ||
		    sscanf(line, "commit overrun: %lld", &v) == 1 ||
		    sscanf(line, "dropped events: %lld", &v) == 1)
			lost += v;
	if (f)
		fclose(f);
	return lost;
}

static const char __attribute__((unused)) *tally_write(void)
{
	char text[32];

	snprintf(text, sizeof(text), "ringlab %lld\n", ++tally.marks);
	return tw("trace_marker", text);
}

static void __attribute__((unused)) tally_forget(void)
{
	tally.forgot = tally.marks;
	tally.missing = 0;
	tally.lost_base = stats_lost();
}

static void tally_seen(long long n, int strict)
{
	if (n <= tally.forgot)
		return;
	if (n <= tally.last) {
		tally.twice += strict;
		return;
	}
	tally.missing += n - (tally.last > tally.forgot ? tally.last : tally.forgot) - 1;
	tally.last = n;
}

/*
 * The numbered events of one sub-buffer (u64 time stamp, u64 commit, events) from byte
 * `start`; returns where they end. An event's u32 header has type_len in its low 5 bits
 * (1-28: 4 x that many bytes of data; 0: the length in the next u32; 29: padding, to the end
 * when its time delta is 0; 30, 31: a time extend or stamp of 8 bytes) (ring_buffer.c).
 */
static size_t tally_took(const unsigned char *sb, size_t len, size_t start, int strict)
{
	unsigned long long commit;
	size_t pos = 16, end;

	memcpy(&commit, sb + 8, sizeof(commit));
	end = 16 + (commit & COMMIT_MASK);
	if (end > len)
		end = len;
	while (pos + 4 <= end) {
		unsigned int head, kind, word = 0;
		const unsigned char *at;
		size_t size;

		memcpy(&head, sb + pos, 4);
		kind = head & 31;
		if (kind == 29 && !(head >> 5))
			break;
		if ((kind == 0 || kind == 29) && pos + 8 <= end)
			memcpy(&word, sb + pos + 4, 4);
		size = kind >= 30 ? 8 : 4 + (kind == 0 || kind == 29 ? word : 4 * kind);
		if (pos + size > end)
			break;
		at = memmem(sb + pos + 4, size - 4, "ringlab ", 8);
		if (kind <= 28 && at && pos >= start)
			tally_seen(strtoll((const char *)at + 8, NULL, 10), strict);
		pos += size;
	}
	return pos;
}

/* read() of trace_pipe_raw: a sub-buffer, every event of it taken now. */
static const char __attribute__((unused)) *tally_read(int fd)
{
	static __thread unsigned char buf[1 << 16];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n > 0) {
		tally.read_since = 1;
		tally_took(buf, n, 16, 1);
	}
	return n > 0 ? "ok" : n == 0 ? "eof" : res(0);
}

/*
 * GET_READER on fd, then the reader sub-buffer (meta reader.id) through the whole mapping at
 * a: on the same one as before the call, from where the meta page said the reader was, else
 * all of it; all of it too after a read(), which swaps reader pages unsaid (the same id may
 * come back as another page), its events then not strictly new.
 * *more: whether it showed anything new.
 */
static const char __attribute__((unused)) *tally_take(int fd, const char *a, int *more)
{
	const struct trace_buffer_meta *mp = (const void *)a;
	unsigned int id, read;
	size_t start = 16;

	*more = 0;
	if (!a)
		return "no such mapping";
	id = mp->reader.id;
	read = mp->reader.read;
	if (ioctl(fd, TRACE_MMAP_IOCTL_GET_READER))
		return res(0);
	if (mp->reader.id == id && !tally.read_since)	/* a read() makes the meta stale */
		start += read;
	tally_took((const unsigned char *)a + mp->meta_page_size +
		   (size_t)mp->reader.id * mp->subbuf_size, mp->subbuf_size, start,
		   !tally.read_since);
	tally.read_since = 0;
	*more = mp->reader.id != id || mp->reader.read != read;
	return "ok";
}

/* Events skipped beyond what per_cpu/cpu0/stats counts lost since the tally last forgot. */
static long long __attribute__((unused)) tally_unaccounted(void)
{
	long long lost = stats_lost() - tally.lost_base, left;

	left = tally.missing - lost;
	if (left > 0)
		printf("# %lld written, the last taken %lld, %lld skipped, %lld counted lost, "
		       "before %lld not judged\n", tally.marks, tally.last, tally.missing, lost,
		       tally.forgot + 1);
	return left > 0 ? left : 0;
}

/* A page of CPU 0's buffer of the boot-time instance `name` mapped and unmapped again: "ok"
 * or the errno's name (probes/explore_trace.py PERSISTENT says the command line it needs). */
static __attribute__((unused)) const char *map_persistent(const char *name, const char *boot)
{
	char path[512];
	const char *got;
	void *a;
	int f;

	snprintf(path, sizeof(path), "/sys/kernel/tracing/instances/%s/per_cpu/cpu0/trace_pipe_raw",
		 name);
	f = open(path, O_RDONLY);
	if (f < 0) {
		printf("# no instance %s: boot with %s\n", name, boot);
		return res(0);
	}
	a = mmap(NULL, page, PROT_READ, MAP_SHARED, f, 0);
	got = res(a != MAP_FAILED);
	if (a != MAP_FAILED)
		munmap(a, page);
	close(f);
	return got;
}

static void trace_begin(int plan, const char *buffer_kb, const char *subbuf_kb)
{
	cpu_set_t cpus;

	page = sysconf(_SC_PAGESIZE);
	if (geteuid())
		skip_all("run as root");
	snprintf(inst, sizeof(inst), "/sys/kernel/tracing/instances/ringlab-repro-%d", getpid());
	if (mkdir(inst, 0755))
		skip_all("no tracefs instances");
	ktap_begin(plan);
	kmsg_start();
	tw("buffer_size_kb", buffer_kb);
	tw("buffer_subbuf_size_kb", subbuf_kb);
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);
}

static void trace_end(const char *resize_kb)
{
	const char *got;
	char line[128];

	release_all();
	got = tw("buffer_size_kb", resize_kb);
	snprintf(line, sizeof(line), "end: buffer_size_kb with nothing mapped -> %s", got);
	result(!strcmp(got, "ok"), line);
	if (rmdir(inst)) {
		snprintf(line, sizeof(line), "end: rmdir of the instance -> %s", res(0));
		result(0, line);
	} else {
		result(1, "end: rmdir of the instance -> ok");
	}
}
#endif /* RINGLAB_TRACE_H */
