"""How much of the within-group reward spread of TTT rollouts is the program, and how much its seed?

Reads a `ttlab discover train` run directory (its `tree.json`: every valid child with its program, parent and
reward), re-runs each valid child program from its parent with `--seeds` fresh seeds (same sandbox limits as
the trainer: `--budget-s`), and reports per group (children of one parent):

- the spread of the logged rewards between programs (max - min) and the seed spread of one program
  (mean over programs of max - min over its re-runs);
- how often the re-runs keep the logged best program on top, and the Spearman correlation of the
  logged ranking with the ranking by mean re-run reward.

If the seed spread is as large as the between-program spread, the entropic advantage's ranking of valid
programs is mostly seed noise. Prints ONE JSON line last.

    python benchmarks/discover_reward_noise.py runs/discover/ttt_frozen_<tag> [--seeds 3] [--budget-s 2]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a discover train run directory (holds tree.json)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=2.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--max-groups", type=int, default=6)
    args = ap.parse_args()
    from ttlab.discover.blocks import with_blocks
    from ttlab.discover.sandbox import Job, Limits, SandboxPool
    from ttlab.discover.tasks import get_task

    tree = json.loads((Path(args.run) / "tree.json").read_text())
    nodes = tree["nodes"]
    nodes = nodes if isinstance(nodes, list) else list(nodes.values())
    by_id = {n["id"]: n for n in nodes}
    groups: dict[str, list[dict]] = {}
    for n in nodes:
        if n.get("parent_id") and n.get("code"):
            groups.setdefault(n["parent_id"], []).append(n)
    groups = {p: c for p, c in groups.items() if len(c) >= 2}
    chosen = sorted(groups, key=lambda p: -len(groups[p]))[: args.max_groups]
    task = get_task("erdos")
    t0, load0 = time.time(), os.getloadavg()
    out = []
    with SandboxPool(args.workers, Limits(wall_s=args.budget_s + 5.0)) as pool:
        for pid in chosen:
            kids = groups[pid]
            parent = np.asarray(by_id[pid]["construction"], dtype=np.float64)
            logged = np.array([float(k["reward"]) for k in kids])
            futs = [[pool.submit(Job(with_blocks(k["code"]), parent, args.budget_s, seed=1000 + s)) for s in range(args.seeds)]
                    for k in kids]
            rerun = np.full((len(kids), args.seeds), np.nan)
            for i, fs in enumerate(futs):
                for s, f in enumerate(fs):
                    sr = f.result()
                    if sr.ok:
                        vr = task.verify(sr.output, sr.reported_score)
                        if vr.valid:
                            rerun[i, s] = vr.reward
            ok = ~np.isnan(rerun).any(axis=1)
            if ok.sum() < 2:
                continue
            m = rerun[ok].mean(axis=1)
            top_kept = float(np.mean(np.argmax(rerun[ok], axis=0) == int(np.argmax(logged[ok]))))
            out.append({"parent": pid, "programs": int(ok.sum()),
                        "between_spread": float(np.ptp(logged[ok])),
                        "seed_spread": float(np.mean(np.ptp(rerun[ok], axis=1))),
                        "spearman_logged_vs_rerun": spearman(logged[ok], m), "best_stays_best": top_kept})
    ratio = [g["seed_spread"] / g["between_spread"] for g in out if g["between_spread"] > 0]
    rho = [g["spearman_logged_vs_rerun"] for g in out if not np.isnan(g["spearman_logged_vs_rerun"])]
    res = {"benchmark": "discover_reward_noise", "run": str(args.run), "seeds": args.seeds, "budget_s": args.budget_s,
           "groups": out, "median_seed_over_between_spread": float(np.median(ratio)) if ratio else None,
           "mean_spearman": float(np.mean(rho)) if rho else None,
           "mean_best_stays_best": float(np.mean([g["best_stays_best"] for g in out])) if out else None,
           "nproc": os.cpu_count(), "loadavg_start": load0, "loadavg_end": os.getloadavg(),
           "wall_s": round(time.time() - t0, 1)}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
