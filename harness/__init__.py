"""ringlab: a QEMU-backed test lab for the Linux kernel's ring-buffer mapping paths."""
