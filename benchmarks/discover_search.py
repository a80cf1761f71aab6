"""Offline Erdős search from random starts, several seeds: best C5 against wall time; prints one JSON line last.

    python benchmarks/discover_search.py [--time-limit 10m] [--seeds 0,1,2] [--workers 2]
    python benchmarks/discover_search.py --preset erdos_auto --seeds 0,1,2   # a named search preset (presets.py)

`--preset NAME` starts from that `ttlab discover search` preset; every flag given also overrides its field.

Each seed runs `ttlab discover search --task erdos --proposer library --time-limit B --seed S` (random initial
states, the library's optimiser programs in the sandbox, every score recomputed by the verifier) one after
the other. Recorded per seed: best C5 after every step (with wall time and evaluations), the time at which
it first beat AlphaEvolve (0.380924) and the record (0.380876), evaluations per second; across seeds: the
best, median and spread. The best construction of each seed is kept in its run directory; the overall best
is checked in exact rational arithmetic. Writes the JSON (--out) and a best-vs-time plot (--png).

With --cpu-budget the search also stops once its programs have used that much CPU time (each program budgets
by its own process's CPU time when --program-wall-factor > 1), so a run measures "T minutes on one core"
whatever else the machine runs; every program's budget, CPU and wall seconds are recorded per seed, and the
first-below times are given in both wall and program CPU seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ttlab.discover.config import SearchConfig
from ttlab.discover.curve import best_by, first_below
from ttlab.discover.loop import run_search
from ttlab.discover.presets import SEARCH_PRESETS
from ttlab.discover.tasks.erdos import RECORD, exact_c5

ROOT = Path(__file__).resolve().parents[1]
ALPHAEVOLVE = 0.380924
HAUGLAND = 0.380927


def plot(res: dict, path: Path) -> None:
    """Best C5 against wall time, one step line per seed, with the published bounds."""
    import charts  # a sibling module; matplotlib only when a plot is asked for

    seeds = res["seeds"]
    tmax = max(max((p["t"] for p in s["curve"]), default=1.0) for s in seeds) or 1.0
    lo = min(min(s["best_score"] for s in seeds), RECORD) - 2e-6
    firsts = [p["best_score"] for s in seeds for p in s["curve"][:1] if np.isfinite(p["best_score"])]
    hi = min(0.3816, max(0.38095, max(firsts, default=0.3812)))
    fig, (ax,) = charts.panels(1, size=(9.0, 4.6), title=f"Erdos C5 (lower is better): offline library search from "
                               f"random starts, {res['config']['workers']} workers, load {res['machine']['load_start'][0]}")
    charts.reference(ax, HAUGLAND, "Haugland 0.380927", charts.rgb((150, 150, 150)))
    charts.reference(ax, ALPHAEVOLVE, "AlphaEvolve 0.380924", charts.rgb((200, 120, 0)), below=True)
    charts.reference(ax, RECORD, f"TTT-Discover record {RECORD}", charts.rgb((200, 0, 0)))
    colors = [(0, 90, 200), (0, 150, 60), (140, 0, 160), (0, 160, 160), (120, 80, 0)]
    for i, s in enumerate(seeds):
        curve = [p for p in s["curve"] if np.isfinite(p["best_score"])]  # a step whose best failed re-verification
        # a step line from the first result on (nothing is known before a step ends)
        charts.series(ax, [p["t"] for p in curve], [p["best_score"] for p in curve],
                      charts.rgb(colors[i % len(colors)]), label=f"seed {s['seed']}: best {s['best_score']:.7f}",
                      span=(lo, hi), lw=2, drawstyle="steps-post")
    ax.set(xlim=(0, tmax), ylim=(lo, hi), xlabel="wall time (s)", ylabel="best C5")
    ax.yaxis.set_major_formatter("{x:.6f}")
    charts.legend_outside(ax)
    charts.save(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="", choices=["", *sorted(SEARCH_PRESETS)],
                    help="start from this `ttlab discover search` preset (default: the search's defaults)")
    ap.add_argument("--time-limit", "--budget", dest="time_limit", default=None, help="per seed (default 10m)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--workers", type=int, default=None, help="default 2")
    ap.add_argument("--root", default="runs")
    ap.add_argument("--program-weights", default=None, help="as `ttlab discover search` (empty: the task's default)")
    ap.add_argument("--program-settings", default=None, help="JSON pinning program settings, as `ttlab discover search`")
    ap.add_argument("--program-budget-s", type=float, default=None)
    ap.add_argument("--proposer", default=None, choices=["library", "random_blocks"], help="default: library")
    ap.add_argument("--cpu-budget", default=None, help="also stop at this much program CPU time (e.g. 30m)")
    ap.add_argument("--program-wall-factor", type=float, default=None,
                    help="a program's wall limit is this times its (CPU) budget")
    ap.add_argument("--init-states", type=int, default=None)
    ap.add_argument("--states-per-step", type=int, default=None)
    ap.add_argument("--samples-per-state", type=int, default=None)
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench" / "discover_search" / "discover_search.json"))
    ap.add_argument("--png", default=str(ROOT / "runs" / "bench" / "discover_search" / "discover_search.png"))
    ap.add_argument("--best-out", default="", help="write the best seed's best construction here (its run's "
                    "best.json: construction, the program that wrote it, the exact check)")
    a = ap.parse_args()
    given = {k: getattr(a, k) for k in ("time_limit", "workers", "proposer", "cpu_budget", "program_wall_factor", "program_weights", "program_settings", "program_budget_s",
                                        "init_states", "states_per_step", "samples_per_state")}
    base = dataclasses.replace(SEARCH_PRESETS[a.preset]() if a.preset else SearchConfig(),
                               **{k: v for k, v in given.items() if v is not None})
    seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
    load0 = os.getloadavg()
    t0 = time.time()
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    out = []
    best_overall = None
    for seed in seeds:
        curve: list[dict] = []
        cfg = dataclasses.replace(base, task="erdos", seed=seed, root=a.root,
                                  run_name=f"bench_search_{int(t0)}_seed{seed}")
        rec = run_search(cfg, log=lambda s: print(s, flush=True),
                         on_step=lambda p, curve=curve: curve.append({**p, "load1": round(os.getloadavg()[0], 2)}))
        ev = rec.get("evals", 0)
        row = {"seed": seed, "best_score": rec["score"], "evals": ev, "elapsed_s": round(rec["elapsed_s"], 1),
               "evals_per_s": round(ev / max(rec["elapsed_s"], 1e-9), 3), "run_dir": rec["run_dir"],
               "t_below_alphaevolve": first_below(curve, ALPHAEVOLVE), "t_below_record": first_below(curve, RECORD),
               "cpu_below_alphaevolve": first_below(curve, ALPHAEVOLVE, "cpu_s"),
               "cpu_below_record": first_below(curve, RECORD, "cpu_s"), "programs_cpu_s": round(rec["programs_cpu_s"], 1),
               "programs": [dict(q, step=p["step"]) for p in curve for q in p["programs"]],
               "best_by_600s": best_by(curve, 600.0), "best_by_3600s": best_by(curve, 3600.0),
               "exact": rec.get("exact"),
               "curve": [{k: (round(v, 12) if isinstance(v, float) else v) for k, v in p.items() if k != "programs"}
                         for p in curve]}
        out.append(row)
        if best_overall is None or rec["score"] < best_overall[0]:
            best_overall = (rec["score"], np.asarray(rec["construction"], dtype=np.float64), seed)
            best_rec = rec
        print(json.dumps({k: v for k, v in row.items() if k != "curve"}), flush=True)
    c, feasible, msg = exact_c5(best_overall[1])
    scores = [r["best_score"] for r in out]
    res = {"benchmark": "discover_search", "commit": rev, "wall_s": round(time.time() - t0, 1),
           "machine": {"nproc": os.cpu_count(), "load_start": [round(x, 2) for x in load0],
                       "load_end": [round(x, 2) for x in os.getloadavg()]},
           "config": {"preset": a.preset, "time_limit": base.time_limit, "workers": base.workers, "seeds": seeds,
                      "proposer": base.proposer, "cpu_budget": base.cpu_budget,
                      "program_wall_factor": base.program_wall_factor, "program_weights": base.program_weights,
                      "program_settings": base.program_settings, "program_budget_s": base.program_budget_s,
                      "init_states": base.init_states, "states_per_step": base.states_per_step,
                      "samples_per_state": base.samples_per_state},
           "summary": {"best": min(scores), "median": statistics.median(scores), "worst": max(scores),
                       "beat_alphaevolve": sum(s <= ALPHAEVOLVE for s in scores),
                       "beat_record": sum(s <= RECORD for s in scores), "runs": len(scores),
                       "evals_per_s_mean": round(float(np.mean([r["evals_per_s"] for r in out])), 3),
                       "best_exact_c5": float(c), "best_exact_feasible": feasible, "best_seed": best_overall[2],
                       "best_n": int(best_overall[1].size)},
           "bounds": {"haugland": HAUGLAND, "alphaevolve": ALPHAEVOLVE, "record": RECORD},
           "seeds": out, "command": "python benchmarks/discover_search.py " + shlex.join(sys.argv[1:])}
    if a.best_out:
        Path(a.best_out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.best_out).write_text(json.dumps({k: v for k, v in best_rec.items() if k != "run_dir"}) + "\n")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res) + "\n")
    plot(res, Path(a.png))
    print(json.dumps({"benchmark": "discover_search", **res["summary"], "preset": a.preset, "time_limit": base.time_limit,
                      "t_below_alphaevolve": [r["t_below_alphaevolve"] for r in out],
                      "cpu_below_record": [r["cpu_below_record"] for r in out],
                      "programs_cpu_s": [r["programs_cpu_s"] for r in out],
                      "wall_s": res["wall_s"], "machine": res["machine"], "commit": rev}))


if __name__ == "__main__":
    main()
