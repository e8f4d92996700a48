"""The guest layer: a guest from QEMU start to a probe's answer (argv, process, console, SSH,
probes, snapshots)."""
