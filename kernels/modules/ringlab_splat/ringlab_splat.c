// SPDX-License-Identifier: GPL-2.0
/*
 * ringlab_splat: makes the kernel splat on request, so the lab's own tests can prove that a
 * kernel WARNING during a test fails that test and is reported with its call trace and the
 * module that taints the kernel.
 *
 *   echo 1 > /sys/module/ringlab_splat/parameters/warn     a WARNING (the kernel goes on)
 *   echo MS > /sys/module/ringlab_splat/parameters/warn_later
 *                                                          a WARNING MS milliseconds later,
 *                                                          from a workqueue (deferred work)
 *   echo 1 > /sys/module/ringlab_splat/parameters/hang     this CPU spins with interrupts off
 *                                                          (on a 1-CPU guest: a silent hang)
 *   echo N > /sys/module/ringlab_splat/parameters/flood    a kernel thread printks N lines as
 *                                                          fast as the console takes them;
 *                                                          parameters/flood reads the lines
 *                                                          still to print
 *   echo KIND > /sys/module/ringlab_splat/parameters/fire  one splat of that kind (below);
 *                                                          parameters/fire reads the kinds
 *                                                          this kernel's config can fire
 *
 * The kinds `fire` knows, each the kernel's own reporting path, so the lab proves it reads
 * what this kernel really prints (not a printk that looks like one):
 *   warn       WARN(): lib/bug.c, kernel/panic.c __warn()
 *   bug        BUG() in a kernel thread of its own: "kernel BUG at" and the Oops; the thread
 *              dies, nothing it held is left locked (the writer gets its answer first)
 *   null       a NULL dereference in a kernel thread: the page-fault Oops
 *   refcount   refcount_inc() of a zero refcount_t: "refcount_t: addition on 0" (a WARN)
 *   list       list_add() between entries that do not point at each other: lib/list_debug.c
 *              (CONFIG_DEBUG_LIST or CONFIG_LIST_HARDENED); the add is refused, nothing broken
 *   alloc      vmalloc() of more than the machine has: warn_alloc()'s "vmalloc error"
 *   ubsan      an array index past the end (CONFIG_UBSAN_BOUNDS)
 *   kasan      a read past a kmalloc()ed object (CONFIG_KASAN); race: a data race (KCSAN)
 *   lockdep    two mutexes taken in both orders, one after the other: a possible circular
 *              locking dependency (CONFIG_PROVE_LOCKING), no deadlock
 *   hung       a kernel thread in D state for parameters/hung_s seconds (CONFIG_DETECT_HUNG_TASK;
 *              set /proc/sys/kernel/hung_task_timeout_secs lower first)
 */
#include <linux/atomic.h>
#include <linux/bug.h>
#include <linux/irqflags.h>
#include <linux/kthread.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/refcount.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>

static noinline void ringlab_splat_warn(void)
{
	WARN(1, "ringlab_splat: warning requested through its 'warn' parameter\n");
}

static int warn_set(const char *val, const struct kernel_param *kp)
{
	bool on;
	int ret = kstrtobool(val, &on);

	if (ret)
		return ret;
	if (on)
		ringlab_splat_warn();
	return 0;
}

static const struct kernel_param_ops warn_ops = {
	.set = warn_set,
	.get = param_get_bool,
};

static bool warn;
module_param_cb(warn, &warn_ops, &warn, 0200);
MODULE_PARM_DESC(warn, "write 1 to make the kernel WARN");

static void warn_later_fn(struct work_struct *work)
{
	ringlab_splat_warn();
}
static DECLARE_DELAYED_WORK(warn_later_work, warn_later_fn);

static int warn_later_set(const char *val, const struct kernel_param *kp)
{
	unsigned int ms;
	int ret = kstrtouint(val, 0, &ms);

	if (ret)
		return ret;
	schedule_delayed_work(&warn_later_work, msecs_to_jiffies(ms));
	return 0;
}

static const struct kernel_param_ops warn_later_ops = {
	.set = warn_later_set,
};

module_param_cb(warn_later, &warn_later_ops, NULL, 0200);
MODULE_PARM_DESC(warn_later, "write MS to make the kernel WARN from deferred work MS ms later");

static int hang_set(const char *val, const struct kernel_param *kp)
{
	bool on;
	int ret = kstrtobool(val, &on);

	if (ret || !on)
		return ret;
	local_irq_disable();
	for (;;)
		cpu_relax();
	return 0;
}

static const struct kernel_param_ops hang_ops = {
	.set = hang_set,
	.get = param_get_bool,
};

static bool hang;
module_param_cb(hang, &hang_ops, &hang, 0200);
MODULE_PARM_DESC(hang, "write 1 to hang this CPU with interrupts off");

static atomic_t flood_left = ATOMIC_INIT(0);
static struct task_struct *flooder;

static int flood_fn(void *unused)
{
	unsigned int n = 0;

	while (!kthread_should_stop() && atomic_read(&flood_left) > 0) {
		pr_info("ringlab_splat: flood line %u, %d to go\n", ++n,
			atomic_dec_return(&flood_left));
		cond_resched();
	}
	atomic_set(&flood_left, 0);
	while (!kthread_should_stop())
		schedule_timeout_interruptible(HZ);
	return 0;
}

static int flood_set(const char *val, const struct kernel_param *kp)
{
	unsigned int lines;
	int ret = kstrtouint(val, 0, &lines);

	if (ret)
		return ret;
	if (flooder || !lines)
		return -EBUSY;
	atomic_set(&flood_left, lines);
	flooder = kthread_run(flood_fn, NULL, "ringlab_flood");
	if (IS_ERR(flooder)) {
		ret = PTR_ERR(flooder);
		flooder = NULL;
		return ret;
	}
	return 0;
}

static int flood_get(char *buffer, const struct kernel_param *kp)
{
	return sysfs_emit(buffer, "%d\n", atomic_read(&flood_left));
}

static const struct kernel_param_ops flood_ops = {
	.set = flood_set,
	.get = flood_get,
};

module_param_cb(flood, &flood_ops, NULL, 0600);
MODULE_PARM_DESC(flood, "write N to printk N lines from a kernel thread; reads lines to go");

/* --- fire: one splat of a named kind ------------------------------------------------------ */

static noinline int fire_bug(void *unused)
{
	BUG();
	return 0;
}

static noinline int fire_null(void *unused)
{
	int *volatile p = NULL;

	return *p;
}

static noinline void fire_refcount(void)
{
	refcount_t r = REFCOUNT_INIT(0);

	refcount_inc(&r);
}

static noinline int fire_list(void *unused)
{
	struct list_head a, b, new;

	/* a and b are not neighbours: list_add(&new, &a) must refuse and report. */
	INIT_LIST_HEAD(&a);
	INIT_LIST_HEAD(&b);
	a.next = &b;
	list_add(&new, &a);
	module_put_and_kthread_exit(0);
}

static noinline void fire_alloc(void)
{
	void *p = vmalloc(totalram_pages() * 2 * PAGE_SIZE + PAGE_SIZE);

	vfree(p);
}

static int ubsan_index = 4;
module_param(ubsan_index, int, 0600);

static noinline int fire_ubsan(void)
{
	int a[4] = { 1, 2, 3, 4 };

	return a[READ_ONCE(ubsan_index)];
}

static noinline int fire_kasan(void)
{
	char *p = kmalloc(24, GFP_KERNEL);
	int v;

	if (!p)
		return -ENOMEM;
	OPTIMIZER_HIDE_VAR(p);
	v = READ_ONCE(p[24]);	/* the slot's redzone (kmalloc-32) */
	kfree(p);
	return v;
}

static DEFINE_MUTEX(lock_a);
static DEFINE_MUTEX(lock_b);

static noinline void fire_lockdep(void)
{
	mutex_lock(&lock_a);
	mutex_lock(&lock_b);
	mutex_unlock(&lock_b);
	mutex_unlock(&lock_a);
	mutex_lock(&lock_b);
	mutex_lock(&lock_a);
	mutex_unlock(&lock_a);
	mutex_unlock(&lock_b);
}

static unsigned int hung_s = 6;
module_param(hung_s, uint, 0600);

static int fire_hung(void *unused)
{
	schedule_timeout_uninterruptible(hung_s * HZ);
	module_put_and_kthread_exit(0);
}

/*
 * race: the writer's task reads a word, plain, for up to 2 s while a timer increments it,
 * plain, from softirq: KCSAN's watchpoint on the read sees the timer's write ("data-race in
 * ringlab_splat_race_read / ringlab_splat_race_tick"). One CPU is enough:
 * CONFIG_KCSAN_INTERRUPT_WATCHER keeps interrupts on while a watchpoint waits. (Kept below
 * the other kinds: the WARN and BUG lines the lab's kept consoles name do not move.)
 */
static unsigned long race_word;
static struct timer_list race_timer;
static bool race_on;

static void ringlab_splat_race_tick(struct timer_list *t)
{
	race_word++;		/* plain: the race KCSAN is to see */
	if (READ_ONCE(race_on))
		mod_timer(t, jiffies + 1);
}

static unsigned long race_seen;

static noinline void ringlab_splat_race_read(void)
{
	unsigned long end = jiffies + 2 * HZ, seen = 0;

	while (time_before(jiffies, end)) {
		seen += race_word;	/* plain, and read again each time round */
		barrier();
	}
	WRITE_ONCE(race_seen, seen);	/* used: the reads are not dead code */
}

static noinline void fire_race(void)
{
	timer_setup(&race_timer, ringlab_splat_race_tick, 0);
	WRITE_ONCE(race_on, true);
	mod_timer(&race_timer, jiffies + 1);
	ringlab_splat_race_read();
	WRITE_ONCE(race_on, false);
	timer_delete_sync(&race_timer);
}

struct fire_kind {
	const char *name;
	bool available;
	void (*now)(void);		/* in the writer's context */
	int (*thread)(void *);		/* in a kernel thread of its own, which may die: it
					 * holds a reference on the module until it ends */
};

static void fire_warn(void) { ringlab_splat_warn(); }
static void fire_ubsan_v(void) { fire_ubsan(); }
static void fire_kasan_v(void) { fire_kasan(); }

static const struct fire_kind fire_kinds[] = {
	{ "warn", true, fire_warn, NULL },
	{ "bug", true, NULL, fire_bug },
	{ "null", true, NULL, fire_null },
	{ "refcount", true, fire_refcount, NULL },
	/* A thread: CONFIG_BUG_ON_DATA_CORRUPTION makes the report a BUG(). */
	{ "list", IS_ENABLED(CONFIG_DEBUG_LIST) || IS_ENABLED(CONFIG_LIST_HARDENED),
	  NULL, fire_list },
	{ "alloc", true, fire_alloc, NULL },
	{ "ubsan", IS_ENABLED(CONFIG_UBSAN_BOUNDS), fire_ubsan_v, NULL },
	{ "kasan", IS_ENABLED(CONFIG_KASAN), fire_kasan_v, NULL },
	{ "lockdep", IS_ENABLED(CONFIG_PROVE_LOCKING), fire_lockdep, NULL },
	{ "hung", IS_ENABLED(CONFIG_DETECT_HUNG_TASK), NULL, fire_hung },
	{ "race", IS_ENABLED(CONFIG_KCSAN), fire_race, NULL },
};

static int fire_set(const char *val, const struct kernel_param *kp)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(fire_kinds); i++) {
		const struct fire_kind *k = &fire_kinds[i];
		struct task_struct *t;

		if (!sysfs_streq(val, k->name))
			continue;
		if (!k->available)
			return -EOPNOTSUPP;
		if (k->now) {
			k->now();
			return 0;
		}
		__module_get(THIS_MODULE);
		t = kthread_run(k->thread, NULL, "ringlab_%s", k->name);
		if (IS_ERR(t))
			module_put(THIS_MODULE);
		return PTR_ERR_OR_ZERO(t);
	}
	return -EINVAL;
}

static int fire_get(char *buffer, const struct kernel_param *kp)
{
	int n = 0;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(fire_kinds); i++)
		if (fire_kinds[i].available)
			n += sysfs_emit_at(buffer, n, "%s%s", n ? " " : "", fire_kinds[i].name);
	return n + sysfs_emit_at(buffer, n, "\n");
}

static const struct kernel_param_ops fire_ops = {
	.set = fire_set,
	.get = fire_get,
};

module_param_cb(fire, &fire_ops, NULL, 0600);
MODULE_PARM_DESC(fire, "write a kind (warn bug null refcount list alloc ubsan kasan lockdep "
		 "hung race) to make the kernel report one; reads the kinds this kernel can fire");

static void __exit ringlab_splat_exit(void)
{
	cancel_delayed_work_sync(&warn_later_work);
	if (flooder)
		kthread_stop(flooder);
}
module_exit(ringlab_splat_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("ringlab: kernel splats on request, for the lab's own tests");
