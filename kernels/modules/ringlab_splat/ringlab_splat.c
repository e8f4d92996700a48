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
 */
#include <linux/bug.h>
#include <linux/atomic.h>
#include <linux/irqflags.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>
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

static void __exit ringlab_splat_exit(void)
{
	cancel_delayed_work_sync(&warn_later_work);
	if (flooder)
		kthread_stop(flooder);
}
module_exit(ringlab_splat_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("ringlab: kernel splats on request, for the lab's own tests");
