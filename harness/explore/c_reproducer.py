"""A failure's shortest sequence as one C file in kselftest style: builds alone with `gcc -o
repro repro.c`, prints KTAP as kselftest.h does (version, plan, a numbered result per step and
per end check, totals), exits KSFT_PASS (0), KSFT_FAIL (1) or KSFT_SKIP (4). The same calls as
repro.py (harness/explore/reproducer.py), the same judgement. Each step's statements are its
operation's C form (its record in the path's OPS, probes/explore_*.py); the support code is
real C in harness/explore/c/ (ringlab_repro.h and the path's header), carried inline so the
file needs nothing but the kernel's uapi headers."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.explore import reproducer
from harness.probe_modules import probe_module

SUPPORT = Path(__file__).with_name("c")


def support(path: str) -> str:
    """ringlab_repro.h and the path's own header, as the program carries them."""
    own = reproducer.world(path).C_SUPPORT
    return (SUPPORT / "ringlab_repro.h").read_text() + "\n" + (SUPPORT / own).read_text()


def _c_step(step: dict, allowed: list[str], pin: int | None, path: str,
            made: dict[int, tuple[int, bool]]) -> list[str]:
    """A step's statements: its operation's calls, then the verdict on the result (and on
    VmPin when the model says what it must be: -1 when it does not)."""
    s = reproducer.step_record(step, path, made)
    verdict = f'step("{s.what}", got, "{"|".join(allowed)}", {-1 if pin is None else pin});'
    return s.op.c(s) + [verdict]


def program(f: Any, title: str, expectations: list[dict]) -> str:
    s = dict(f.setup, **f.env)
    n = max([e["step"]["id"] for e in expectations] + [0]) + 2
    plan = reproducer.plan(expectations, reproducer.end_checks(f))
    made: dict[int, tuple[int, bool]] = {}
    body: list[str] = []
    for e in expectations:
        body += [""] + _c_step(e["step"], e["allowed"], e["vm_pin_kb"], f.path, made)
        body += reproducer.check_lines(f, e.get("checks", {}), "c")
    frame = getattr(reproducer.world(f.path), "c_frame", None)
    if frame is not None:   # the path's own file frames its reproducers
        begin, end = frame(s, plan, reproducer.model_end(f))
    elif f.path == "trace-mmap":
        begin = f'trace_begin({plan}, "{s["buffer_kb"]}\\n", "{s["subbuf_kb"]}\\n");'
        end = f'trace_end("{s["buffer_kb"] + 4}\\n");'
    else:
        ipc = int(s.get("who") == "user+ipc_lock")
        begin = (f'perf_begin({plan}, {s["mlock_kb"]}, {s["rlimit_pages"] * s["page_size"]}, '
                 f'{reproducer.UID}, {ipc});')
        end = f'perf_end({s["mlock_kb"]}, {int(bool(s.get("has_pmu")))});'
    banners = ", ".join('"' + b.replace('"', '\\"') + '"'
                        for b in probe_module("splat_banners").PREFIXES)
    top = (f"// SPDX-License-Identifier: GPL-2.0\n/*\n * {title.replace('*/', '* /')}\n *\n"
           f" * Found by ringlab's explorer (./lab explore {f.path}). Run as root on the kernel "
           "to test:\n *   gcc -Wall -o repro repro.c && ./repro\n */\n"
           f"#define SLOTS {n}\n#define SPLAT_BANNERS {banners}\n")
    main = ["", "int main(void)", "{", "\tconst char *got = \"ok\";", "\tchar path[512], *a, *spot;",
            "\tint i, j;", "", "\t(void)got; (void)path; (void)a; (void)spot; (void)i; (void)j;",
            "\t" + begin]
    main += ["\t" + line if line else "" for line in body]
    main += ["", "\t" + end, "\tkmsg_check();", "\tktap_end();", "}", ""]
    return top + support(f.path) + "\n".join(main)
