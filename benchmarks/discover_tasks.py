"""The offline search on the other tasks (AC1, AC2, circle packing n = 26, 32) against the published figures.

    python benchmarks/discover_tasks.py [--time-limit 4m] [--tasks ac1,ac2,circle26,circle32] [--seed 0] [--workers 1]

For each task: `ttlab discover search --task T --proposer library --time-limit B --seed S` (random initial states,
the task's library programs in the sandbox, every score recomputed by the task's verifier), then the best
construction re-verified. Recorded per task: best score, the published figure it is compared with (the task's
`best_known`, with its source), the gap, whether it is matched or beaten (direction-aware), evaluations per
second, wall time. Writes the JSON (--out) and prints ONE JSON line last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np

from ttlab.discover.config import SearchConfig
from ttlab.discover.loop import run_search
from ttlab.discover.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", "--budget", dest="time_limit", default="4m")
    ap.add_argument("--tasks", default="ac1,ac2,circle26,circle32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--root", default="runs")
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench" / "discover_tasks" / "discover_tasks.json"))
    a = ap.parse_args()
    tasks = [t.strip() for t in a.tasks.split(",") if t.strip()]
    for name in tasks:  # a wrong name fails before any search runs
        get_task(name)
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    load0, t0 = os.getloadavg(), time.time()
    rows = []
    for name in tasks:
        task = get_task(name)
        cfg = SearchConfig(task=name, proposer="library", time_limit=a.time_limit, workers=a.workers, seed=a.seed,
                           root=a.root, run_name=f"bench_tasks_{int(t0)}_{name}")
        rec = run_search(cfg, log=lambda s: print(s, flush=True))
        check = task.verify(np.asarray(rec["construction"], dtype=np.float64))  # the best, verified again
        minimise = not task.higher_is_better
        best, known = float(rec["score"]), float(task.best_known)
        gap = (best - known) if minimise else (known - best)  # > 0: short of the published figure
        ev = rec.get("evals", 0)
        row = {"task": name, "direction": "min" if minimise else "max", "best": best, "reverified": check.valid,
               "reverified_score": check.score, "published": known, "published_source": task.best_known_source,
               "gap_to_published": gap, "matched_or_beaten": gap <= 0, "evals": ev,
               "evals_per_s": round(ev / max(rec["elapsed_s"], 1e-9), 3), "elapsed_s": round(rec["elapsed_s"], 1),
               "run_dir": rec["run_dir"]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    res = {"benchmark": "discover_tasks", "commit": rev, "wall_s": round(time.time() - t0, 1),
           "machine": {"nproc": os.cpu_count(), "load_start": [round(x, 2) for x in load0],
                       "load_end": [round(x, 2) for x in os.getloadavg()]},
           "config": {"time_limit": a.time_limit, "workers": a.workers, "seed": a.seed, "proposer": "library"},
           "tasks": rows,
           "command": f"python benchmarks/discover_tasks.py --time-limit {a.time_limit} --tasks {a.tasks} --seed {a.seed} "
                      f"--workers {a.workers}"}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res) + "\n")
    print(json.dumps({"benchmark": "discover_tasks", "commit": rev[:10], "wall_s": res["wall_s"],
                      **{r["task"]: {"best": r["best"], "published": r["published"],
                                     "gap": r["gap_to_published"]} for r in rows}}))


if __name__ == "__main__":
    main()
