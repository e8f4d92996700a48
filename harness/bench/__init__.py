"""The benchmarks of `./lab bench`: one module each, one report writer (harness/commands/bench.py only parses and dispatches)."""
