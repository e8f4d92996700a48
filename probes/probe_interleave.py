"""How often do two vCPUs really run at the same time? The question behind every race the lab
hopes to see: under single-threaded TCG one host thread runs the vCPUs in turn (a vCPU keeps
the host thread until it idles or QEMU's kick timer fires), under multi-threaded TCG each vCPU
has a host thread of its own (issue 43, `./lab bench tcg-threads`).

By hand in a guest with two or more CPUs:
  python3 probe_interleave.py [--seconds S] [--cpus 0,1]

One process per CPU, pinned there, reads CLOCK_MONOTONIC in a loop for S seconds. Then, over
the time both ran: for windows of 0.1, 1 and 10 ms, the share of windows in which every CPU
took a sample (both made progress inside the window); how often the merged stream of samples
changes CPU (switches a second: thousands when they really run together, tens when they take
turns); each CPU's longest gap between two of its samples (the other's turn, under
single-threaded TCG). Output: one JSON document. Stdlib only.
"""
from __future__ import annotations

import argparse
import heapq
import json
import os
import sys
import time
from array import array

WINDOWS_MS = (0.1, 1.0, 10.0)


def spin(cpu: int, seconds: float, go: int, out: int) -> None:
    """In a child: wait for `go`, sample the clock on `cpu` for `seconds`, send the samples."""
    os.sched_setaffinity(0, {cpu})
    os.read(go, 1)
    samples = array("q")
    now = time.monotonic_ns
    end = now() + int(seconds * 1e9)
    t = 0
    while t < end:
        t = now()
        samples.append(t)
    data = samples.tobytes()
    os.write(out, len(data).to_bytes(8, "little"))
    view = memoryview(data)
    while view:
        view = view[os.write(out, view):]


def read_exact(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        b = os.read(fd, min(left, 1 << 20))
        if not b:
            raise EOFError("a sampler died before it sent its samples")
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)


def sample(cpus: list[int], seconds: float) -> list[array]:
    """Each CPU's clock samples, taken at the same time by one pinned process per CPU."""
    go_r, go_w = os.pipe()
    pipes, pids = [], []
    for cpu in cpus:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                spin(cpu, seconds, go_r, w)
            finally:
                os._exit(0)
        os.close(w)
        pipes.append(r)
        pids.append(pid)
    os.write(go_w, b"x" * len(cpus))
    out = []
    for r in pipes:
        n = int.from_bytes(read_exact(r, 8), "little")
        a = array("q")
        a.frombytes(read_exact(r, n))
        out.append(a)
        os.close(r)
    for pid in pids:
        os.waitpid(pid, 0)
    return out


def analyse(streams: list[array]) -> dict:
    """The figures of the module docstring, over the span every CPU was sampling."""
    start = max(s[0] for s in streams)
    stop = min(s[-1] for s in streams)
    span = stop - start
    result: dict = {"span_s": span / 1e9, "samples": [len(s) for s in streams]}
    if span <= 0:
        result["error"] = "the samplers never ran at the same time"
        return result
    both = {}
    for w_ms in WINDOWS_MS:
        w = int(w_ms * 1e6)
        n = span // w
        if n == 0:
            continue
        sets = [{(t - start) // w for t in s if start <= t < start + n * w} for s in streams]
        both[str(w_ms)] = len(set.intersection(*sets)) / n
    result["windows_with_every_cpu"] = both
    switches, last = 0, None
    for _, cpu in heapq.merge(*([(t, i) for t in s if start <= t <= stop]
                                for i, s in enumerate(streams))):
        if last is not None and cpu != last:
            switches += 1
        last = cpu
    result["switches_per_s"] = switches / (span / 1e9)
    result["longest_gap_ms"] = [max((b - a for a, b in zip(s, s[1:]) if start <= a <= stop),
                                    default=0) / 1e6 for s in streams]
    return result


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--cpus", default="0,1", help="the CPUs to sample on (default: 0,1)")
    a = ap.parse_args(argv)
    cpus = [int(c) for c in a.cpus.split(",")]
    online = sorted(os.sched_getaffinity(0))
    if missing := [c for c in cpus if c not in online]:
        print(json.dumps({"error": f"CPU(s) {missing} not online (online: {online})"}))
        return 2
    print(json.dumps({"cpus": cpus, **analyse(sample(cpus, a.seconds))}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
