// SPDX-License-Identifier: GPL-2.0
/*
 * ringlab_aux: a test PMU with an AUX area, so the perf AUX data path runs where there is no
 * Intel PT, SPE or CoreSight (a QEMU guest).
 *
 * From an hrtimer on the event's CPU it writes chunks into the AUX area with
 * perf_aux_output_begin()/perf_aux_output_end(), as a tracing PMU's interrupt handler does.
 * The data is checkable: the u64 at absolute AUX position p (bytes since the buffer was
 * created, before wrapping) holds p. A chunk that does not fit the free space is cut to it and
 * flagged PERF_AUX_FLAG_TRUNCATED (the core then disables the event); PARTIAL and COLLISION
 * are set on request. A read-only AUX mapping is overwrite (snapshot) mode: the driver keeps
 * its own head and the buffer holds the newest data.
 *
 * perf_event_attr:
 *   config  bits  0-23  chunk size in bytes, a multiple of 8 (0: 4096)
 *           bit     32  set PERF_AUX_FLAG_PARTIAL on every record
 *           bit     33  set PERF_AUX_FLAG_COLLISION on every record
 *           bits 40-55  stop after this many chunks (0: never)
 *           bits 56-63  hold each transaction open this many times 10 us between
 *                       perf_aux_output_begin() and perf_aux_output_end(), as a slow
 *                       PMU's handler does (less than the period): a race with the AUX
 *                       area's teardown on another CPU meets a transaction in flight
 *                       (race mutant 069), which a single-threaded TCG guest's turns of
 *                       about 3.6 ms otherwise almost never catch
 *   config1             period in microseconds (0: 1000; at least 100)
 *
 * A second PMU, ringlab_aux_contig, is the same PMU with what a tracing PMU without
 * scatter-gather has (Intel BTS, PT without multi-entry ToPA, Arm TRBE's alignment):
 * PERF_PMU_CAP_AUX_NO_SG (the core allocates the AUX area as few contiguous blocks, one in
 * overwrite mode), event_mapped()/event_unmapped() (counted: the parameter `mapped`), a
 * smallest AUX area (setup_aux() refuses fewer than attr.config2 pages), and alignment
 * skips:
 *   config  bits 24-31  bytes skipped with perf_aux_output_skip() before each chunk, in
 *                       8-byte units (ringlab_aux_contig only; not in overwrite mode)
 * It has event_unmapped, so its events cannot be revoked: `unregister` is the first PMU's.
 */
#include <linux/delay.h>
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

#define RL_CHUNK_MASK		0xffffffULL
#define RL_PARTIAL		BIT_ULL(32)
#define RL_COLLISION		BIT_ULL(33)
#define RL_MAX_SHIFT		40
#define RL_MAX_MASK		0xffffULL
#define RL_SKIP_SHIFT		24
#define RL_SKIP_MASK		0xffULL
#define RL_HOLD_SHIFT		56
#define RL_HOLD_MASK		0xffULL
#define RL_HOLD_UNIT_US		10
#define RL_CONFIG_MASK		(RL_CHUNK_MASK | RL_PARTIAL | RL_COLLISION | \
				 (RL_MAX_MASK << RL_MAX_SHIFT) | (RL_HOLD_MASK << RL_HOLD_SHIFT))
#define RL_CONTIG_CONFIG_MASK	(RL_CONFIG_MASK | (RL_SKIP_MASK << RL_SKIP_SHIFT))

static unsigned int default_period_us = 1000;
module_param(default_period_us, uint, 0644);
MODULE_PARM_DESC(default_period_us, "timer period when attr.config1 is 0");

struct rl_event {
	struct hrtimer timer;
	struct perf_event *event;
	u64 period_ns;
	u64 flags;		/* PERF_AUX_FLAG_* to set on every record */
	u64 max_chunks;
	u64 chunks;
	u32 chunk;
	u32 skip;		/* bytes skipped before each chunk (ringlab_aux_contig) */
	u32 min_pages;		/* setup_aux() refuses fewer (ringlab_aux_contig) */
	u32 hold_us;		/* each transaction held open this long */
};

struct rl_buf {
	bool overwrite;
	int nr_pages;
	void *pages[];
};

static struct pmu rl_pmu, rl_contig_pmu;

/* Live mappings of ringlab_aux_contig buffers: event_mapped() less event_unmapped(). */
static atomic_t rl_mapped = ATOMIC_INIT(0);

static int mapped_get(char *buffer, const struct kernel_param *kp)
{
	return sysfs_emit(buffer, "%d\n", atomic_read(&rl_mapped));
}

static const struct kernel_param_ops mapped_ops = {
	.get = mapped_get,
};
module_param_cb(mapped, &mapped_ops, NULL, 0444);
MODULE_PARM_DESC(mapped, "event_mapped() calls less event_unmapped() calls of ringlab_aux_contig");

static void rl_write(struct rl_buf *buf, u64 head, unsigned long len)
{
	unsigned long size = (unsigned long)buf->nr_pages << PAGE_SHIFT;
	unsigned long i;

	for (i = 0; i < len; i += sizeof(u64)) {
		u64 pos = head + i;
		unsigned long off = pos & (size - 1);

		*(u64 *)(buf->pages[off >> PAGE_SHIFT] + offset_in_page(off)) = pos;
	}
}

static enum hrtimer_restart rl_tick(struct hrtimer *timer)
{
	struct rl_event *s = container_of(timer, struct rl_event, timer);
	struct perf_output_handle handle;
	struct rl_buf *buf;
	unsigned long len;
	u64 head;

	if (s->max_chunks && s->chunks >= s->max_chunks)
		return HRTIMER_NORESTART;

	buf = perf_aux_output_begin(&handle, s->event);
	if (buf) {
		if (s->skip && !buf->overwrite && perf_aux_output_skip(&handle, s->skip)) {
			/* no room for the skip: end with nothing, as a full buffer does */
			perf_aux_output_flag(&handle, PERF_AUX_FLAG_TRUNCATED);
			perf_aux_output_end(&handle, 0);
			goto next;
		}
		head = handle.head;
		len = s->chunk;
		if (!buf->overwrite && len > handle.size) {
			len = handle.size & ~7UL;
			perf_aux_output_flag(&handle, PERF_AUX_FLAG_TRUNCATED);
		}
		rl_write(buf, head, len);
		if (s->hold_us)
			udelay(s->hold_us);
		if (s->flags)
			perf_aux_output_flag(&handle, s->flags);
		if (buf->overwrite)
			handle.head = head + len;	/* the driver owns aux_head here */
		perf_aux_output_end(&handle, len);
		s->chunks++;
	}
next:
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
	u64 period_us = event->attr.config1 ?: default_period_us;
	/*
	 * The core tries every PMU for a type it does not know (a legacy type, or the type of a
	 * PMU unregistered since): each answers only for its own.
	 */
	bool contig = event->pmu == &rl_contig_pmu;
	struct rl_event *s;
	u32 chunk;

	if (event->attr.type != event->pmu->type)
		return -ENOENT;
	if (config & ~(contig ? RL_CONTIG_CONFIG_MASK : RL_CONFIG_MASK))
		return -EINVAL;
	if (!contig && event->attr.config2)
		return -EINVAL;
	chunk = config & RL_CHUNK_MASK ?: PAGE_SIZE;
	if (chunk % sizeof(u64) || period_us < 100 ||
	    ((config >> RL_HOLD_SHIFT) & RL_HOLD_MASK) * RL_HOLD_UNIT_US >= period_us)
		return -EINVAL;

	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	rl_timer_setup(&s->timer);
	s->event = event;
	s->chunk = chunk;
	s->period_ns = period_us * NSEC_PER_USEC;
	s->max_chunks = (config >> RL_MAX_SHIFT) & RL_MAX_MASK;
	s->flags = (config & RL_PARTIAL ? PERF_AUX_FLAG_PARTIAL : 0) |
		   (config & RL_COLLISION ? PERF_AUX_FLAG_COLLISION : 0);
	s->skip = ((config >> RL_SKIP_SHIFT) & RL_SKIP_MASK) * sizeof(u64);
	s->min_pages = min_t(u64, event->attr.config2, INT_MAX);
	s->hold_us = ((config >> RL_HOLD_SHIFT) & RL_HOLD_MASK) * RL_HOLD_UNIT_US;
	event->pmu_private = s;
	event->destroy = rl_destroy;
	return 0;
}

static void *rl_setup_aux(struct perf_event *event, void **pages, int nr_pages,
			  bool overwrite)
{
	struct rl_event *s = event->pmu_private;
	struct rl_buf *buf;

	if (!nr_pages || !is_power_of_2(nr_pages) || nr_pages < s->min_pages)
		return NULL;
	buf = kzalloc(struct_size(buf, pages, nr_pages), GFP_KERNEL);
	if (!buf)
		return NULL;
	buf->overwrite = overwrite;
	buf->nr_pages = nr_pages;
	memcpy(buf->pages, pages, nr_pages * sizeof(*pages));
	return buf;
}

static void rl_free_aux(void *aux)
{
	kfree(aux);
}

static void rl_event_mapped(struct perf_event *event, struct mm_struct *mm)
{
	atomic_inc(&rl_mapped);
}

static void rl_event_unmapped(struct perf_event *event, struct mm_struct *mm)
{
	atomic_dec(&rl_mapped);
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
	.setup_aux	= rl_setup_aux,
	.free_aux	= rl_free_aux,
};

#ifdef RL_HAVE_PMU_REVOKE
/*
 * echo 1 > /sys/module/ringlab_aux/parameters/unregister: the PMU goes away while the module
 * stays, as a hot-unplugged device's would: 7.x revokes its live events (their module
 * references too). An AUX area mapped then must be unmapped before rmmod: the last munmap
 * calls rl_free_aux(), this module's code.
 */
static bool rl_unregistered;

static int unregister_set(const char *val, const struct kernel_param *kp)
{
	bool on;
	int ret = kstrtobool(val, &on);

	if (ret || !on)
		return ret;
	if (rl_unregistered)
		return -EALREADY;
	ret = perf_pmu_unregister(&rl_pmu);
	if (!ret)
		rl_unregistered = true;
	return ret;
}

static const struct kernel_param_ops unregister_ops = {
	.set = unregister_set,
};
module_param_cb(unregister, &unregister_ops, NULL, 0200);
MODULE_PARM_DESC(unregister, "write 1 to unregister the PMU, its live events revoked (7.x)");
#else
static const bool rl_unregistered;
#endif

static int __init rl_init(void)
{
	int ret;

	/* ringlab_aux_contig: the same PMU, without scatter-gather, told of each mapping */
	rl_contig_pmu = rl_pmu;
	rl_contig_pmu.capabilities = PERF_PMU_CAP_AUX_NO_SG;
	rl_contig_pmu.event_mapped = rl_event_mapped;
	rl_contig_pmu.event_unmapped = rl_event_unmapped;

	ret = perf_pmu_register(&rl_pmu, "ringlab_aux", -1);

	if (ret)
		return ret;
	ret = perf_pmu_register(&rl_contig_pmu, "ringlab_aux_contig", -1);
	if (ret)
		perf_pmu_unregister(&rl_pmu);
	return ret;
}

static void __exit rl_exit(void)
{
	perf_pmu_unregister(&rl_contig_pmu);
	if (!rl_unregistered)
		perf_pmu_unregister(&rl_pmu);
}

module_init(rl_init);
module_exit(rl_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("ringlab test PMU with an AUX area");
