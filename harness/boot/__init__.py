"""A guest from QEMU start to a probe's answer: argv, process, console, SSH, probes."""
