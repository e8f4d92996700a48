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
};
#define TRACE_MMAP_IOCTL_GET_READER _IO('R', 0x20)
#endif

static char inst[256];

static const char *tw(const char *name, const char *value)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", inst, name);
	return res(write_file(path, value) == 0);
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
