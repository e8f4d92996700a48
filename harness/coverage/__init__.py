"""`./lab coverage`'s reports: the guests' gcov counters summed (merge.py), read by gcovr
(gcovr.py), the table per function (functions.py), a series' changed lines judged
(changed.py), all of it written by report.py. The gcov variant itself is
harness/kernels/gcov.py, a guest's counters harness/guest/gcov.py."""
