"""What `./lab bench` and `./lab review` do: one module a benchmark, the review's run and
figures, and one report writer (report.py); harness/commands/ only parses and dispatches."""
