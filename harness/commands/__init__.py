"""Commands that drive whole runs of the lab: bisect and the benchmarks."""
