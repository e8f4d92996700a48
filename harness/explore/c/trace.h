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
