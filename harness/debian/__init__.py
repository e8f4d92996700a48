"""Debian's archive as apt reads it: the host's mirror, InRelease, Packages, verified downloads."""
