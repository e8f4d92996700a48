// SPDX-License-Identifier: GPL-2.0
/*
 * ringlab_inpage: a test producer for perf_output_begin_forward_in_page() (seed 001, "perf: add
 * perf_output_begin_forward_in_page", ported to 6.12 in kernels/series/inpage). It calls the
 * function directly, so it does not build against a kernel without it: the compile or modpost
 * error naming perf_output_begin_forward_in_page is the lab's signal that the series is not
 * applied (tests/kernel/test_perf_inpage.py skips on it).
 *
 * An event of the PMU "ringlab_inpage", once enabled, writes records into its ordinary perf ring
 * buffer (the mmap of 1 + 2^n pages) from an hrtimer on the event's CPU, as software events do:
 * perf_output_begin_forward_in_page(), perf_output_put()/perf_output_copy(), perf_output_end().
 * The kernel promises (seed changelog): a reservation never crosses a page of the data area;
 * if it does not fit in the rest of the current page, that rest is zero-filled and the record
 * starts on the next page; a request larger than a page is refused.
 *
 * Record layout (every record; sizes are multiples of 8, as perf's are):
 *   struct perf_event_header  type PERF_RECORD_SAMPLE, misc 0, size = the requested size
 *   u64 seq                   records this event wrote before this one: 0, 1, 2, ...
 *   u8  fill[size - 16]       the byte at record offset i (16 <= i < size) is (seq + i) & 0xff
 * PERF_RECORD_SAMPLE because it is the record type a PMU writes; the event must have
 * attr.sample_type 0, so the ABI defines no fields in the body and a reader that honours
 * header.size steps over it. seq counts records written, not requests: a refused or failed
 * request leaves no hole, so any hole in seq is a record the buffer lost after it was written.
 *
 * perf_event_attr:
 *   config  bits  0-23  record size in bytes, header included: a multiple of 8, from 16 to
 *                       65528 (header.size is a u16); sizes above PAGE_SIZE are requested as
 *                       they are, for the kernel to refuse. 0: the built-in cycle below.
 *           bits 32-39  requests per timer tick (0: 1)
 *   config1             stop after this many requests, written or not (0: never)
 *   config2             timer period in microseconds (0: default_period_us; at least 50)
 *
 * The built-in cycle, P = PAGE_SIZE: 16, 24, 1000, 2040, P-8, P, 3000, P-3000, P+8, 40.
 * From an empty 4 KiB-page buffer it makes zero-filled gaps of 1016, 976 and 8 bytes, records
 * that end exactly at a page end, whole-page records, and one oversize request per cycle.
 *
 * Counters, module-wide, read-only in /sys/module/ringlab_inpage/parameters/:
 *   written            records written
 *   refused            requests above PAGE_SIZE the kernel refused (what it must do)
 *   oversize_accepted  requests above PAGE_SIZE the kernel accepted (a bug; written anyway)
 *   failed             requests up to PAGE_SIZE the kernel refused (no room, paused buffer:
 *                      the core counts them as lost)
 *   split              reservations with less room left in their page (handle->size) than
 *                      their size: the record crosses a page (a bug)
 *   last_error         the last error a request got (the seed refuses with -ENOSPC)
 */
#include <linux/atomic.h>
#include <linux/hrtimer.h>
#include <linux/module.h>
#include <linux/perf_event.h>
#include <linux/slab.h>

/*
 * hrtimer_setup() replaced hrtimer_init() + .function (908a1d775422 "hrtimers: Introduce
 * hrtimer_setup() to replace hrtimer_init()", v6.13) and hrtimer_init() is gone since
 * 9779489a31d7 ("hrtimers: Delete hrtimer_init()", v6.15). Kbuild asks the headers built against
 * which one they have (RL_HAVE_HRTIMER_SETUP), not the version number.
 */
static enum hrtimer_restart rl_tick(struct hrtimer *timer);

static void rl_timer_setup(struct hrtimer *timer)
{
#ifdef RL_HAVE_HRTIMER_SETUP
	hrtimer_setup(timer, rl_tick, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED_HARD);
#else
	hrtimer_init(timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED_HARD);
	timer->function = rl_tick;
#endif
}

#define RL_SIZE_MASK		0xffffffULL
#define RL_BURST_SHIFT		32
#define RL_BURST_MASK		0xffULL
#define RL_CONFIG_MASK		(RL_SIZE_MASK | (RL_BURST_MASK << RL_BURST_SHIFT))
#define RL_MIN_SIZE		16	/* header + seq */
#define RL_MAX_SIZE		0xfff8	/* the largest multiple of 8 a u16 header.size holds */
#define RL_MIN_PERIOD_US	50

static unsigned int default_period_us = 1000;
module_param(default_period_us, uint, 0644);
MODULE_PARM_DESC(default_period_us, "timer period when attr.config2 is 0");

static atomic_long_t rl_written, rl_refused, rl_oversize_accepted, rl_failed, rl_split;
static atomic_t rl_last_error;

static int rl_get_long(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%ld\n", atomic_long_read(kp->arg));
}

static int rl_get_int(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%d\n", atomic_read(kp->arg));
}

static const struct kernel_param_ops rl_long_ops = { .get = rl_get_long };
static const struct kernel_param_ops rl_int_ops = { .get = rl_get_int };

module_param_cb(written, &rl_long_ops, &rl_written, 0444);
MODULE_PARM_DESC(written, "records written");
module_param_cb(refused, &rl_long_ops, &rl_refused, 0444);
MODULE_PARM_DESC(refused, "requests above PAGE_SIZE the kernel refused");
module_param_cb(oversize_accepted, &rl_long_ops, &rl_oversize_accepted, 0444);
MODULE_PARM_DESC(oversize_accepted, "requests above PAGE_SIZE the kernel accepted (a bug)");
module_param_cb(failed, &rl_long_ops, &rl_failed, 0444);
MODULE_PARM_DESC(failed, "requests up to PAGE_SIZE the kernel refused (no room)");
module_param_cb(split, &rl_long_ops, &rl_split, 0444);
MODULE_PARM_DESC(split, "reservations that cross a page (a bug)");
module_param_cb(last_error, &rl_int_ops, &rl_last_error, 0444);
MODULE_PARM_DESC(last_error, "the last error a request got");

struct rl_event {
	struct hrtimer timer;
	struct perf_event *event;
	u64 period_ns;
	u64 max_requests;
	u64 requests;
	u64 seq;
	u32 size;		/* 0: the built-in cycle */
	u32 burst;
};

static struct pmu rl_pmu;

static u32 rl_cycle_size(u64 request)
{
	const u32 p = PAGE_SIZE;
	const u32 cycle[] = { 16, 24, 1000, 2040, p - 8, p, 3000, p - 3000, p + 8, 40 };

	return cycle[request % ARRAY_SIZE(cycle)];
}

/* One request of `size` bytes: a record written, or the kernel's refusal counted. */
static void rl_emit(struct rl_event *s, u32 size)
{
	struct perf_output_handle handle;
	struct perf_sample_data data;
	struct perf_event_header header = {
		.type = PERF_RECORD_SAMPLE,
		.misc = 0,
		.size = size,
	};
	u8 fill[64];
	u32 off, n, i;
	int ret;

	perf_sample_data_init(&data, 0, 0);
	ret = perf_output_begin_forward_in_page(&handle, &data, s->event, size);
	if (ret) {
		atomic_set(&rl_last_error, ret);
		atomic_long_inc(size > PAGE_SIZE ? &rl_refused : &rl_failed);
		return;
	}
	if (size > PAGE_SIZE)
		atomic_long_inc(&rl_oversize_accepted);
	/* handle.size: the bytes from the record's start to the end of its page. */
	if (handle.size < size)
		atomic_long_inc(&rl_split);

	perf_output_put(&handle, header);
	perf_output_put(&handle, s->seq);
	for (off = RL_MIN_SIZE; off < size; off += n) {
		n = min_t(u32, sizeof(fill), size - off);
		for (i = 0; i < n; i++)
			fill[i] = (u8)(s->seq + off + i);
		perf_output_copy(&handle, fill, n);
	}
	perf_output_end(&handle);
	s->seq++;
	atomic_long_inc(&rl_written);
}

static enum hrtimer_restart rl_tick(struct hrtimer *timer)
{
	struct rl_event *s = container_of(timer, struct rl_event, timer);
	u32 i;

	for (i = 0; i < s->burst; i++) {
		if (s->max_requests && s->requests >= s->max_requests)
			return HRTIMER_NORESTART;
		rl_emit(s, s->size ?: rl_cycle_size(s->requests));
		s->requests++;
	}
	hrtimer_forward_now(timer, ns_to_ktime(s->period_ns));
	return HRTIMER_RESTART;
}

static void rl_start(struct perf_event *event, int flags)
{
	struct rl_event *s = event->pmu_private;

	event->hw.state = 0;
	hrtimer_start(&s->timer, ns_to_ktime(s->period_ns), HRTIMER_MODE_REL_PINNED_HARD);
}

static void rl_stop(struct perf_event *event, int flags)
{
	struct rl_event *s = event->pmu_private;

	hrtimer_cancel(&s->timer);
	event->hw.state |= PERF_HES_STOPPED | PERF_HES_UPTODATE;
}

static int rl_add(struct perf_event *event, int flags)
{
	event->hw.state = PERF_HES_STOPPED | PERF_HES_UPTODATE;
	if (flags & PERF_EF_START)
		rl_start(event, 0);
	return 0;
}

static void rl_del(struct perf_event *event, int flags)
{
	rl_stop(event, PERF_EF_UPDATE);
}

static void rl_read(struct perf_event *event)
{
}

static void rl_destroy(struct perf_event *event)
{
	kfree(event->pmu_private);
	event->pmu_private = NULL;
}

static int rl_event_init(struct perf_event *event)
{
	u64 config = event->attr.config;
	u64 period_us = event->attr.config2 ?: default_period_us;
	u32 size = config & RL_SIZE_MASK;
	struct rl_event *s;

	if (event->attr.type != rl_pmu.type)
		return -ENOENT;
	/* The records' body is not sample fields: see the layout above. */
	if ((config & ~RL_CONFIG_MASK) || event->attr.sample_type)
		return -EINVAL;
	if (size && (size % 8 || size < RL_MIN_SIZE || size > RL_MAX_SIZE))
		return -EINVAL;
	if (period_us < RL_MIN_PERIOD_US)
		return -EINVAL;

	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	rl_timer_setup(&s->timer);
	s->event = event;
	s->size = size;
	s->burst = (config >> RL_BURST_SHIFT) & RL_BURST_MASK ?: 1;
	s->max_requests = event->attr.config1;
	s->period_ns = period_us * NSEC_PER_USEC;
	event->pmu_private = s;
	event->destroy = rl_destroy;
	return 0;
}

static struct pmu rl_pmu = {
	.module		= THIS_MODULE,
	.task_ctx_nr	= perf_hw_context,
	.event_init	= rl_event_init,
	.add		= rl_add,
	.del		= rl_del,
	.start		= rl_start,
	.stop		= rl_stop,
	.read		= rl_read,
};

static int __init rl_init(void)
{
	/* The cycle's P + 8 must fit header.size (a u16): 4 KiB and 16 KiB pages do. */
	if (PAGE_SIZE + 8 > RL_MAX_SIZE) {
		pr_err("ringlab_inpage: record sizes are for pages up to 32 KiB\n");
		return -EOPNOTSUPP;
	}
	return perf_pmu_register(&rl_pmu, "ringlab_inpage", -1);
}

static void __exit rl_exit(void)
{
	perf_pmu_unregister(&rl_pmu);
}

module_init(rl_init);
module_exit(rl_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("ringlab test producer for perf_output_begin_forward_in_page()");
