"""How often does the search get below a bound within a CPU budget? Summary of per-seed discover_search runs.

    python benchmarks/discover_search_rate.py benchmarks/results/discover_search/robust_s*.json \
        --out benchmarks/results/discover_search/robust.json --png benchmarks/results/discover_search/robust.png

Reads result files of `benchmarks/discover_search.py` (one seed each, run with --cpu-budget), and reports per
seed: the best C5, whether and at how many program CPU seconds it got below the record (0.380876) and
AlphaEvolve (0.380924), every program's CPU seconds, wall seconds and budget, and the load; across seeds: the
rate below the record within the CPU budget (every run counts, misses included). Plots best C5 against the
programs' cumulative CPU seconds. One JSON line last.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from ttlab.common.duration import parse_duration

ALPHAEVOLVE = 0.380924
RECORD = 0.380876


def seed_rows(paths: list[Path]) -> tuple[list[dict], list[dict]]:
    rows, files = [], []
    for p in paths:
        d = json.loads(p.read_text())
        files.append({"file": p.name, "commit": d["commit"], "machine": d["machine"], "wall_s": d["wall_s"],
                      "command": d["command"], "cpu_budget": d["config"].get("cpu_budget"),
                      "proposer": d["config"].get("proposer")})
        for s in d["seeds"]:
            progs = s.get("programs", [])
            loads = [c["load1"] for c in s["curve"] if "load1" in c]
            rows.append({"file": p.name, "seed": s["seed"], "best": s["best_score"],
                         "exact_feasible": (s.get("exact") or {}).get("feasible"),
                         "below_record": s["best_score"] <= RECORD, "cpu_below_record": s.get("cpu_below_record"),
                         "cpu_below_alphaevolve": s.get("cpu_below_alphaevolve"), "wall_s": s["elapsed_s"],
                         "programs_cpu_s": s.get("programs_cpu_s"), "load1_median": statistics.median(loads) if loads else None,
                         "programs": [{k: q[k] for k in ("budget_s", "cpu_s", "wall_s", "status", "score") if k in q}
                                      for q in progs],
                         "curve": [(c.get("cpu_s"), c["best_score"]) for c in s["curve"]]})
    return rows, files


def plot(rows: list[dict], budget: float, path: Path) -> None:
    """Best C5 against the programs' cumulative CPU seconds, one step line per seed, with the record and AlphaEvolve."""
    import charts  # a sibling module; matplotlib only when a plot is asked for

    vals = [b for r in rows for _, b in r["curve"] if np.isfinite(b)]
    lo, hi = min(vals + [RECORD]) - 2e-6, min(max(vals), 0.38100) + 2e-6
    fig, (ax,) = charts.panels(1, size=(9.0, 4.6), title="Erdos C5 (lower is better) against the programs' cumulative "
                               "CPU seconds, one search per seed")
    for name, b, col in [("AlphaEvolve 0.380924", ALPHAEVOLVE, (200, 120, 0)), (f"record {RECORD}", RECORD, (200, 0, 0))]:
        if lo <= b <= hi:
            charts.reference(ax, b, name, charts.rgb(col))
    colors = [(0, 90, 200), (0, 150, 60), (140, 0, 160), (0, 160, 160), (120, 80, 0), (90, 90, 90), (200, 0, 120)]
    for i, r in enumerate(rows):
        pts = [(t, b) for t, b in r["curve"] if t is not None and np.isfinite(b)]
        charts.series(ax, [t for t, _ in pts], [b for _, b in pts], charts.rgb(colors[i % len(colors)]),
                      label=f"seed {r['seed']}: best {r['best']:.7f}", span=(lo, hi), lw=2, marker="o", ms=4,
                      drawstyle="steps-post")
    ax.set(xlim=(0, budget), ylim=(lo, hi), xlabel="programs' cumulative CPU seconds", ylabel="best C5")
    ax.yaxis.set_major_formatter("{x:.6f}")
    charts.legend_outside(ax)
    charts.save(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--png", required=True)
    a = ap.parse_args()
    paths = [Path(f) for f in a.files]
    for p in paths:
        if not p.is_file():
            raise SystemExit(f"discover_search_rate: {p}: no such file")
    rows, files = seed_rows(paths)
    budgets = {f["cpu_budget"] for f in files}
    if len(budgets) != 1 or not next(iter(budgets)):
        raise SystemExit(f"discover_search_rate: the files must share one --cpu-budget, got {sorted(map(str, budgets))}")
    budget = parse_duration(next(iter(budgets)), "--cpu-budget")
    cpu = [q["cpu_s"] for r in rows for q in r["programs"]]
    share = [q["cpu_s"] / q["wall_s"] for r in rows for q in r["programs"] if q["wall_s"] > 0]
    res = {"benchmark": "discover_search_rate", "cpu_budget_s": budget, "files": files,
           "summary": {"runs": len(rows), "below_record": sum(r["below_record"] for r in rows),
                       "below_alphaevolve": sum(r["best"] <= ALPHAEVOLVE for r in rows),
                       "best": min(r["best"] for r in rows), "median": statistics.median(r["best"] for r in rows),
                       "program_cpu_s_median": statistics.median(cpu) if cpu else None,
                       "program_cpu_share_median": round(statistics.median(share), 3) if share else None},
           "seeds": rows}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res) + "\n")
    plot(rows, budget, Path(a.png))
    print(json.dumps({"benchmark": "discover_search_rate", **res["summary"], "cpu_budget_s": budget,
                      "seeds": [r["seed"] for r in rows]}))


if __name__ == "__main__":
    main()
