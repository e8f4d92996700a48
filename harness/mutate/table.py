"""mutate.txt: the kill table a mutation run prints and keeps, from its mutate.json document."""
from __future__ import annotations

import statistics

from harness.mutate.outcomes import KILLED, NOT_BOOTED, NOT_BUILT, NOT_RUN, SURVIVED


def render(doc: dict) -> str:
    """The kill table, each mutant's rule and what killed it."""
    t = doc["totals"]
    u = doc["unmutated"]
    lines = [f"mutation run on {doc['kernel']} ({doc['release']}), tests: "
             f"{doc['selection'] or 'the whole suite'}",
             "unmutated kernel: " + ", ".join(f"{v} {o}" for o, v in sorted(u["counts"].items()))
             + f" (build {u['build_s']:.0f} s, run {u['run_s']:.0f} s); only a test that "
             "passed (or xfailed) there can kill", "",
             f"{'mutant':40s} {'outcome':10s} {'build':>6s} {'run':>6s}  killed by / why"]
    for r in doc["mutants"]:
        lines.append(f"{r['id'][:40]:40s} {r['outcome']:10s} {r['build_s']:5.0f}s "
                     f"{r['run_s']:5.0f}s  {r['why']}")
        lines.append(f"    {r['file']}: {r['rule']}"
                     + (f" (reverts {r['fixes_revert']})" if r["fixes_revert"] else ""))
        if len(r["killed_by"]) > 1:
            also = ", ".join(k.split("::")[-1] for k in r["killed_by"][1:])
            lines.append(f"    also failed: {also}"[:300])
        if r.get("selftest_killers") is not None:
            st = r["selftest_killers"]
            lines.append("    kernel selftests: " + ("killed it: " + ", ".join(
                k.split("[", 1)[-1].rstrip("]") for k in st) if st else "survived")[:300])
    rate = f"{100 * t['kill_rate']:.0f}%" if t["kill_rate"] is not None else "n/a"
    judged_st = [r for r in doc["mutants"] if r.get("selftest_killers") is not None]
    if judged_st:
        lines += ["", f"the kernel's own selftests killed "
                  f"{sum(bool(r['selftest_killers']) for r in judged_st)} of {len(judged_st)} "
                  "they judged (ours: below)"]
    if doc.get("whole_suite"):
        lines += ["", cost_line(doc)]
    lines += versus(doc)
    lines += ["", f"killed {t[KILLED]} of {t['judged']} judged ({rate}); survived {t[SURVIVED]};"
              f" not built {t[NOT_BUILT]}; not booted {t[NOT_BOOTED]}; not run {t[NOT_RUN]}; "
              f"wall {doc['wall_s'] / 60:.1f} min"]
    return "\n".join(lines) + "\n"


def cost_line(doc: dict) -> str:
    """What a mutant costs against the unmutated kernel, each run on the same tests: the
    run-time ratio min / median / max and the slowest mutant (a kernel under review or bisect
    is such a kernel)."""
    base = doc["unmutated"]["run_s"]
    ran = sorted((r["run_s"], r["id"]) for r in doc["mutants"] if r["run_s"] > 0)
    if not ran or base <= 0:
        return "run time against the unmutated kernel: no mutant ran"
    ratios = [s / base for s, _ in ran]
    mid = statistics.median(ratios)
    slow_s, slow_id = ran[-1]
    over = [i for s, i in ran if s > 1.3 * base]
    return (f"run time against the unmutated kernel ({base:.0f} s), {len(ran)} mutants: "
            f"{ratios[0]:.2f} / {mid:.2f} / {ratios[-1]:.2f}x (min / median / max); slowest "
            f"{slow_id} {slow_s:.0f} s; over 1.3x: {', '.join(over) or 'none'}")


def versus(doc: dict) -> list[str]:
    """With the explorer run in more than one (seed, mode): per mutant and mode, the seeds
    that killed it and the median explore time of those kills; then each mode's totals.
    Nothing when every mutant had one explore (the table above says it all)."""
    runs = [e for r in doc["mutants"] for e in r.get("explored") or []]
    if len({(e["seed"], e["steered"]) for e in runs}) < 2:
        return []
    modes = sorted({e["steered"] for e in runs})
    name = {False: "blind", True: "steered"}
    head = f"{'mutant':40s}" + "".join(f" {name[m] + ': kills, s to kill':>26s}" for m in modes)
    lines = ["", "explorer, by mode (kills of the seeds run; median explore time of a kill):",
             head]
    for r in doc["mutants"]:
        if not r.get("explored"):
            continue
        cells = []
        for m in modes:
            mine = [e for e in r["explored"] if e["steered"] == m]
            kills = [e["seconds"] for e in mine if e["killed"]]
            when = f"{statistics.median(kills):.0f}" if kills else "-"
            cells.append(f" {f'{len(kills)}/{len(mine)}, {when}':>26s}")
        lines.append(f"{r['id'][:40]:40s}" + "".join(cells))
    for m in modes:
        mine = [e for e in runs if e["steered"] == m]
        kills = sorted(e["seconds"] for e in mine if e["killed"])
        killed = {r["id"] for r in doc["mutants"] for e in r.get("explored") or []
                  if e["steered"] == m and e["killed"]}
        spread = (f"{kills[0]:.0f} / {statistics.median(kills):.0f} / {kills[-1]:.0f} s"
                  if kills else "n/a")
        lines.append(f"{name[m]}: {len(killed)} mutants killed by some seed; {len(kills)} of "
                     f"{len(mine)} explores killed, in {spread} (min / median / max)")
    return lines
