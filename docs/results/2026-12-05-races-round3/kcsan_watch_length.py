"""KCSAN under round-robin TCG: does a longer watch (udelay_task) let the other vCPU's turn fall inside it?"""
import os, subprocess, sys, time
T = "/sys/kernel/tracing"; K = "/sys/kernel/debug/kcsan"; P = "/sys/module/kcsan/parameters"
subprocess.run(["mount", "-t", "debugfs", "none", "/sys/kernel/debug"], capture_output=True)
def w(p, t):
    with open(p, "w") as f: f.write(t)
def counters():
    out = {}
    for line in open(K):
        if ":" in line:
            k, _, v = line.partition(":")
            try: out[k.strip()] = int(v)
            except ValueError: pass
    return out
p = f"{T}/instances/kt"
if os.path.isdir(p): os.rmdir(p)
os.mkdir(p); w(f"{p}/snapshot", "1")
def child(cpu, path, stop):
    os.sched_setaffinity(0, {cpu}); fd = os.open(path, os.O_WRONLY); n = 0
    while time.monotonic() < stop:
        try: os.write(fd, b"1"); n += 1
        except OSError: pass
    os._exit(min(n // 1000, 255))
secs = float(sys.argv[1]) if len(sys.argv) > 1 else 8
for ud in [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "80,1000,4000").split(",")]:
    w(f"{P}/udelay_task", str(ud))
    c0 = counters(); stop = time.monotonic() + secs; kids = []
    for cpu, path in ((0, f"{p}/trace_marker"), (1, f"{p}/snapshot")):
        pid = os.fork()
        if pid == 0: child(cpu, path, stop)
        kids.append(pid)
    ks = [os.waitstatus_to_exitcode(os.waitpid(k, 0)[1]) for k in kids]
    c1 = counters(); d = {k: c1[k] - c0.get(k, 0) for k in c1}
    print(f"udelay_task={ud}: markers~{ks[0]}k swaps~{ks[1]}k setup_watch/s={d.get('setup_watchpoints',0)/secs:.0f} data_races={d.get('data_races')} reported={d.get('report_races')}", flush=True)
w(f"{P}/udelay_task", "80")
