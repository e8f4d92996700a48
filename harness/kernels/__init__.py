"""Kernels made ready to boot: Debian packages, built trees (series, config, make), test modules."""
