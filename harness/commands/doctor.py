"""`./lab doctor`: the host's tools, the mirror in use, the KVM verdict, the cache by kind."""
from __future__ import annotations

import argparse
import json
import os
import time

from harness import cache, host
from harness.runs import run_folder
from harness.debian import mirror
from harness.errors import LabError
from harness.guest import accel
from harness.kernels import kernel

# Read by harness/cli.py, and as text by harness/host.py (./lab's host check): literals only.
OWN_LOGGING: bool = False
HOST_TOOLS: tuple[str, ...] = ()


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("doctor", help="check the host, KVM, mirror and cache",
                       description=main.__doc__)
    d.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Host dependencies, the KVM verdict, the mirror, the cache."""
    ok = True
    print("host tools:")
    for t in host.ALL_TOOLS:
        found = not host.missing((t,))
        ok &= found
        print(f"  {'ok     ' if found else 'MISSING'} {t.command:20s} ({t.package}: {t.why})")
    try:
        cfg = run_folder.config(args)
        print(f"config: {cfg.path} (kernels: {', '.join(cfg.kernels)}; default "
              f"{cfg.default_kernel})")
    except LabError as e:
        print(f"config: ERROR {e}")
        return 2
    try:
        m = mirror.resolve(cfg.mirror)
        print(f"mirror: {m.url} (from {m.origin}; keyring {m.keyring})")
    except LabError as e:
        ok = False
        print(f"mirror: ERROR {e}")
    root = cache.cache_root(cfg.cache_dir)
    verdict = cache.Layout(root).kvm_verdict(accel.host_id())
    if verdict.exists():
        v = json.loads(verdict.read_text())
        print(f"kvm: {'works' if v['kvm_works'] else 'does not work'} ({v['reason']}; "
              f"checked {time.ctime(v['checked_at'])}; {verdict})")
    else:
        print(f"kvm: not checked yet (/dev/kvm {'present' if os.path.exists('/dev/kvm') else 'absent'});"
              " the first boot with accel: auto checks it")
    print(f"machine.accel: {cfg.machine.accel}")
    entries = cache.entries(root)
    print(f"cache: {root} ({cache.human(sum(e.size for e in entries))} in entries ./lab gc "
          f"may remove; debs {cache.human(kernel.cache_usage(root, ('debs',)))})")
    for kind, size in cache.sizes_by_kind(entries).items():
        print(f"  {cache.KINDS[kind]:20s} {cache.human(size):>10s} "
              f"({sum(e.kind == kind for e in entries)} entries)")
    return 0 if ok else 1
