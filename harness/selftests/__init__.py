"""The kernel's own selftests for the ring-buffer paths, beside ours in the same run.

catalog.py says which programs and ftracetest cases (`tools/testing/selftests`), build.py
builds them from the kernel's tree on the host (static, so any guest rootfs runs them) into a
bundle with a manifest of cases, ktap.py reads what they print. The pytest side is
tests/kselftest/: one test per case, run in the guest like ours, so a splat it causes is
attributed to it and it lands in JUnit, HTML, KCIDB and summary.txt as ours do.
"""
