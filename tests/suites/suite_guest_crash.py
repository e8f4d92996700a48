"""A kernel suite of our own that crashes its guest mid-run (run by test_lab_run.py).

test_a logs a marker to the kernel log (its report must carry it), test_b panics the guest
(it must fail with the console excerpt), test_c must pass on a fresh guest.
"""
from harness.guest.guest import Guest


def test_a_logs_to_dmesg(guest: Guest) -> None:
    guest.run("echo ringlab-dmesg-marker > /dev/kmsg")


def test_b_crashes_the_guest(guest: Guest) -> None:
    # The command never returns: the guest dies under it, and the harness must notice.
    guest.run("echo 1 > /proc/sys/kernel/sysrq; echo c > /proc/sysrq-trigger", timeout=120)


def test_c_gets_a_fresh_guest(guest: Guest) -> None:
    assert guest.run("test -e /var/tmp/crash-suite-marker").exit_status == 1
    guest.run("touch /var/tmp/crash-suite-marker")
