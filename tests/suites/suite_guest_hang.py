"""A suite for tests/e2e: two ways a guest stops making progress, each given a command that
would wait 300 s. The lab must end each test well before that and give the next test a fresh
guest.

- test_a hangs its 1-CPU guest for good (a CPU spinning with interrupts off): no console
  output, no SSH answer, no panic. The SSH heartbeat notices (harness/guest/guest.py HANG_S).
- test_b spins one CPU of a 2-CPU guest: the other CPU soon waits on it too (SSH stops), and
  the kernel reports a soft lockup or an RCU stall on the console, which ends the test. The
  test shortens the kernel's own limits first (RCU stall 21 s and soft lockup 20 s on
  Debian's kernels, close to the lab's 30 s of silence: a loaded CI host once saw the
  heartbeat win), so the race under test is the lab's parsing, not the two timers.
"""
from __future__ import annotations

import pytest

from harness.guest.guest import Guest
from harness.resources import Lab


def test_a_hangs_the_guest(guest: Guest, lab: Lab) -> None:
    guest.insmod(lab.module("ringlab_splat", guest.kernel.name))
    guest.run("echo 1 > /sys/module/ringlab_splat/parameters/hang", timeout=300)


@pytest.mark.guest(cpus=2)
def test_b_stalls_one_cpu(guest: Guest, lab: Lab) -> None:
    guest.insmod(lab.module("ringlab_splat", guest.kernel.name))
    limits = guest.run("echo 5 > /sys/module/rcupdate/parameters/rcu_cpu_stall_timeout && "
                       "sysctl -q kernel.watchdog_thresh=3")
    assert limits.exit_status == 0, limits.stderr
    # RCU reports a stall only while a grace period waits, and an idle guest may start none
    # (seen: a rerun printed nothing for 30 s, where the first attempt reported at 6 s). Every
    # process exit queues an RCU callback (delayed_put_task_struct()), so CPU 0 keeps some
    # coming.
    guest.run("setsid taskset -c 0 sh -c 'while :; do /bin/true; sleep 0.2; done' "
              "</dev/null >/dev/null 2>&1 &")
    guest.run("taskset -c 1 sh -c 'echo 1 > /sys/module/ringlab_splat/parameters/hang'",
              timeout=300)


def test_c_gets_a_fresh_guest(guest: Guest) -> None:
    assert guest.run("test -d /sys/module/ringlab_splat").exit_status == 1
