"""Which kernel lines the lab ran: the gcov variant of a build kernel (variant.py, profile.py),
the counters read off each guest (collect.py), and their merge into reports (report.py)."""
