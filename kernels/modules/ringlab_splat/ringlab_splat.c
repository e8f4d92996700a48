// SPDX-License-Identifier: GPL-2.0
/*
 * ringlab_splat: makes the kernel splat on request, so the lab's own tests can prove that a
 * kernel WARNING during a test fails that test and is reported with its call trace and the
 * module that taints the kernel.
 *
 *   echo 1 > /sys/module/ringlab_splat/parameters/warn     a WARNING (the kernel goes on)
 *   echo 1 > /sys/module/ringlab_splat/parameters/hang     this CPU spins with interrupts off
 *                                                          (on a 1-CPU guest: a silent hang)
 */
#include <linux/bug.h>
#include <linux/irqflags.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

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

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("ringlab: kernel splats on request, for the lab's own tests");
