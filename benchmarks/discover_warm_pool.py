"""Do the random-blocks grammar's choices carry the score? A scored pool on the tuning seed, re-scored at its ends.

    python benchmarks/discover_warm_pool.py --pool 320 --seed 0 --tail 0.1 \\
        --out benchmarks/results/discover_warm_pool/pool.json --png benchmarks/results/discover_warm_pool/pool.png

Scores `--pool` random-blocks programs once each from the first root of `--seed` (the tuning seed) on the work
clock (the pool a filtered warm start trains on: `warm_pool.cached_pool`, shared through its cache), then runs
the best and the worst `--tail` of them again with a different program seed (5000 + i instead of 1000 + i).
If "good program" is a property of a program's choices and not of its seed's luck, the best programs stay well
ahead of the worst on the new seed. Reports the rank correlation of the two runs over both tails, where each
tail's re-scores fall in the pool's distribution, and per choice of the grammar (start, stage kinds, max_n, ...)
the programs' mean percentile in the pool. Writes the JSON (with every program and score) and a PNG, and prints
ONE JSON line last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np

from ttlab.common.data import repo_relative
from ttlab.discover.config import WarmStartConfig
from ttlab.discover.llm.warm_pool import (
    cached_pool,
    check,
    graded_field,
    graded_index,
    pool_key,
    ranks,
    score,
    tuning_root,
)

ROOT = Path(__file__).resolve().parents[1]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def features(ch: dict) -> dict[str, str]:
    """The categorical choices of one program (its grammar draw) as feature -> value."""
    kinds = [s["kind"] for s in ch.get("stages", [])]
    f = {"start": ch["start"], "symmetrise": str(bool(ch.get("symmetrise"))), "max_n": str(ch["max_n"]),
         "stages": str(len(kinds)), "first_stage": kinds[0] if kinds else "none"}
    for k in ("hop", "up_hop", "continuation", "converge", "lp"):
        f[f"has_{k}"] = str(k in kinds)
    if ch["start"] == "multistart":
        f["shape"] = ch["shape"]
        f["n0"] = "<48" if ch["n0"] < 48 else ("<80" if ch["n0"] < 80 else ">=80")
    hops = [s for s in ch.get("stages", []) if s["kind"] in ("hop", "up_hop")]
    if hops:
        f["hop_metropolis"] = str(any(s["temperature"] > 0 for s in hops))
    return f


def choice_table(pool: list[dict], field: str = "c5") -> dict:
    """Per feature and value: count, mean percentile by `field` (0 = best), mean C5; features sorted by spread."""
    pct = ranks(pool, field) / max(1, len(pool) - 1)  # (N,)
    table: dict[str, dict] = {}
    for i, p in enumerate(pool):
        for k, v in features(p["choices"]).items():
            table.setdefault(k, {}).setdefault(v, []).append(i)
    out = {}
    for k, vals in table.items():
        rows = {v: {"n": len(ix), "mean_pct": round(float(pct[ix].mean()), 3),
                    "mean_c5": (float(np.mean([pool[i][field] for i in ix if pool[i][field] is not None]))
                                if any(pool[i][field] is not None for i in ix) else None)}
                for v, ix in sorted(vals.items())}
        big = [r["mean_pct"] for r in rows.values() if r["n"] >= 8]
        out[k] = {"spread": round(max(big) - min(big), 3) if len(big) > 1 else 0.0, "values": rows}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["spread"]))


def refined_summary(pool: list[dict]) -> dict:
    """The pool from the refined parent: its C5 quantiles, the rank correlation with the root's scores, how much the
    two top quartiles overlap, and the choices' mean percentiles from the refined parent."""
    both = [(p["c5"], p["c5_refined"]) for p in pool if p["c5"] is not None and p["c5_refined"] is not None]
    v = np.array([p["c5_refined"] for p in pool if p["c5_refined"] is not None])
    k = int(np.ceil(0.25 * len(pool)))
    top_root, top_ref = set(np.argsort(ranks(pool))[:k].tolist()), set(np.argsort(ranks(pool, "c5_refined"))[:k].tolist())
    return {"parent_index": pool[0].get("refined_parent"), "parent_c5": pool[0].get("refined_parent_c5"),
            "valid_rate": float(v.size / len(pool)),
            "c5": {"best": float(v.min()), "q10": float(np.quantile(v, 0.1)), "q25": float(np.quantile(v, 0.25)),
                   "median": float(np.median(v)), "worst": float(v.max())},
            "spearman_root_vs_refined": spearman(*map(np.array, zip(*both, strict=True))),
            "top_quartile_overlap": len(top_root & top_ref) / k,
            "choices": choice_table(pool, "c5_refined")}


def graded_summary(pool: list[dict], q: float) -> dict:
    """The pool from the parent at root-pool quantile `q`: the parent's C5, the programs' C5 quantiles from it, and
    per start choice (restart = `multistart`, refine = `parent` / `coarse`) its share of the best quarter, so the
    table shows from which parent quality a restart pays."""
    field, i = graded_field(q), graded_index(pool, q)
    v = np.array([p[field] for p in pool if p[field] is not None])
    k = int(np.ceil(0.25 * len(pool)))
    top = np.argsort(ranks(pool, field))[:k]
    starts = sorted({p["choices"].get("start", "?") for p in pool})
    share = {s: round(float(np.mean([pool[j]["choices"].get("start", "?") == s for j in top])), 3) for s in starts}
    return {"quantile": q, "parent_index": i, "parent_c5": pool[i]["c5"], "valid_rate": float(v.size / len(pool)),
            "c5": {"best": float(v.min()), "q10": float(np.quantile(v, 0.1)), "q25": float(np.quantile(v, 0.25)),
                   "median": float(np.median(v)), "worst": float(v.max())},
            "below_parent": float(np.mean(v < pool[i]["c5"])), "top_quarter_start_share": share,
            "choices": choice_table(pool, field)}


def plot(res: dict, path: Path) -> None:
    """Left: the pool's C5 sorted; right: first run vs re-run for both tails (top blue, bottom red). Values above the
    pool's 98th percentile are drawn at the axis' edge."""
    import charts  # a sibling module; matplotlib only when a plot is asked for

    c5 = np.sort([p["c5"] for p in res["programs"] if p["c5"] is not None])
    lo, hi = float(c5.min()), float(np.quantile(c5, 0.98))
    fig, (left, right) = charts.panels(2, size=(5.0, 4.0))
    left.plot(np.linspace(0, 100, len(c5)), np.minimum(c5, hi), "o", ms=2, color="tab:blue", clip_on=False)
    left.set_title(f"{len(c5)} valid random-blocks programs, seed {res['seed']}: C5 by pool percentile")
    left.set_xlim(0, 100)
    left.set_xlabel("pool percentile")
    left.set_ylabel("C5")
    right.plot([lo, hi], [lo, hi], color=charts.rgb((200, 200, 200)), lw=1)
    for tail, colour in (("top", "tab:blue"), ("bottom", "tab:red")):
        rs = [r for r in res["rescore"] if r["tail"] == tail and r["c5"] is not None and r["c5_first"] is not None]
        right.plot([min(r["c5_first"], hi) for r in rs], [min(r["c5"], hi) for r in rs], "o", ms=4, color=colour,
                   label=f"{tail} tail", clip_on=False)
    right.set_title(f"tails re-run with a new program seed, Spearman {res['rescore_summary']['spearman']:.2f}")
    right.set_xlabel("first C5")
    right.set_ylabel("re-run C5")
    right.set_xlim(lo, hi)
    right.legend(loc="upper left")
    for ax in (left, right):
        ax.set_ylim(lo, hi)
        ax.yaxis.set_major_formatter("{x:.6f}")
    right.xaxis.set_major_formatter("{x:.5f}")
    charts.save(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", type=int, default=320, help="random-blocks programs in the pool")
    ap.add_argument("--seed", type=int, default=0, help="the tuning seed (its first root is every program's parent)")
    ap.add_argument("--tail", type=float, default=0.1, help="fraction re-scored at each end of the pool (0: none)")
    ap.add_argument("--refined", action="store_true",
                    help="also score every program from a refined parent (the pool's best program's construction)")
    ap.add_argument("--parents", default="", help="graded parents: root-pool C5 quantiles, comma-separated (e.g. "
                    "0.05,0.5); every program is scored again from each one's construction")
    ap.add_argument("--budget-s", type=float, default=2.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out")
    ap.add_argument("--png")
    args = ap.parse_args()
    if args.pool < 10 or not 0.0 <= args.tail <= 0.5:
        raise SystemExit(f"--pool {args.pool} / --tail {args.tail}: need a pool of >= 10 and a tail in [0, 0.5]")
    try:
        parents = tuple(float(x) for x in args.parents.split(",") if x.strip())
    except ValueError:
        raise SystemExit(f"--parents {args.parents!r}: comma-separated quantiles in [0, 1]") from None
    t0, load0 = time.time(), os.getloadavg()
    cfg = WarmStartConfig(top_frac=0.25, pool=args.pool, pool_seed=args.seed, pool_budget_s=args.budget_s,
                          pool_workers=args.workers, pool_refined=args.refined, pool_parents=parents)
    try:
        check(cfg)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    pool = cached_pool(cfg, log=lambda s: print(s, flush=True))
    t_pool = time.time() - t0
    r = ranks(pool)
    k = int(round(args.tail * len(pool)))
    valid = [i for i in np.argsort(r) if pool[i]["c5"] is not None]
    top, bottom = valid[:k], (valid[-k:] if k else [])
    ix = top + bottom
    re = score([pool[i]["code"] for i in ix], tuning_root(args.seed), [5000 + int(i) for i in ix], args.budget_s,
               cfg.pool_clock, args.workers, log=lambda s: print(s, flush=True)) if ix else []
    rescore = [{"index": int(i), "tail": "top" if j < k else "bottom", "c5_first": pool[i]["c5"], **x}
               for j, (i, x) in enumerate(zip(ix, re, strict=True))]
    c5 = np.array([p["c5"] for p in pool if p["c5"] is not None])  # (V,)
    med, q25 = float(np.median(c5)), float(np.quantile(c5, 0.25))

    def tail_stats(name: str) -> dict:
        v = [x["c5"] for x in rescore if x["tail"] == name and x["c5"] is not None]
        first = [x["c5_first"] for x in rescore if x["tail"] == name]
        if not first:
            return {"n": 0}
        return {"n": len(first), "valid_rescore": len(v), "first_median": float(np.median(first)),
                "rescore_median": float(np.median(v)) if v else None,
                "rescore_pct_in_pool_median": float(np.median([(c5 < x).mean() for x in v])) if v else None,
                "rescore_below_pool_median": float(np.mean([x < med for x in v])) if v else None,
                "rescore_in_pool_top_quartile": float(np.mean([x <= q25 for x in v])) if v else None}

    both = [(x["c5_first"], x["c5"]) for x in rescore if x["c5"] is not None]
    top_re = [x["c5"] for x in rescore if x["tail"] == "top" and x["c5"] is not None]
    bot_re = [x["c5"] for x in rescore if x["tail"] == "bottom" and x["c5"] is not None]
    # probability that a re-scored top program beats a re-scored bottom program (1: the ends never cross)
    auc = float(np.mean([[a < b for b in bot_re] for a in top_re])) if top_re and bot_re else None
    top_only = [(x["c5_first"], x["c5"]) for x in rescore if x["tail"] == "top" and x["c5"] is not None]
    summ = {"spearman": spearman(*map(np.array, zip(*both, strict=True))) if len(both) > 2 else None,
            "spearman_top_tail": spearman(*map(np.array, zip(*top_only, strict=True))) if len(top_only) > 2 else None,
            "p_top_beats_bottom": auc, "top": tail_stats("top"), "bottom": tail_stats("bottom")}
    work = [p.get("work_s") for p in pool if p.get("work_s") is not None]
    git = ["git", "-C", str(ROOT)]
    res = {"benchmark": "discover_warm_pool", "seed": args.seed, "pool_size": len(pool), "pool_key": pool_key(cfg),
           "tail": args.tail, "budget_s": args.budget_s, "clock": cfg.pool_clock, "workers": args.workers,
           "valid_rate": float(len(c5) / len(pool)),
           "pool_c5": {"best": float(c5.min()), "q10": float(np.quantile(c5, 0.1)), "q25": q25, "median": med,
                       "q75": float(np.quantile(c5, 0.75)), "worst": float(c5.max()), "mean": float(c5.mean())},
           "rescore_summary": summ, "choices": choice_table(pool), "rescore": rescore,
           "refined": refined_summary(pool) if args.refined else None,
           "graded": [graded_summary(pool, q) for q in parents],
           "programs": [{k2: p[k2] for k2 in ("code", "choices", "seed", "c5", "status", "work_s", "cpu_s", "wall_s",
                                                "wall_stops", "c5_refined", *map(graded_field, parents)) if k2 in p}
                        for p in pool],
           "pool_wall_s": round(t_pool, 1),
           "commit": subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
           "dirty": bool(subprocess.run([*git, "status", "--porcelain", "src"], capture_output=True, text=True).stdout),
           "nproc": os.cpu_count(), "loadavg_start": load0, "loadavg_end": os.getloadavg(),
           "median_work_s": float(np.median(work)) if work else None, "wall_s": round(time.time() - t0, 1)}
    if args.png:
        res["png"] = repo_relative(args.png)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    if args.png:
        plot(res, Path(args.png))
    print(json.dumps({"benchmark": res["benchmark"], "seed": args.seed, "pool_size": len(pool),
                      "valid_rate": res["valid_rate"], "pool_c5": res["pool_c5"], "rescore_summary": summ,
                      "top_choices": {k2: v["spread"] for k2, v in list(res["choices"].items())[:5]},
                      "graded": [{k2: g[k2] for k2 in ("quantile", "parent_c5", "below_parent", "top_quarter_start_share")}
                                 for g in res["graded"]],
                      "wall_s": res["wall_s"], "loadavg_start": load0, "loadavg_end": res["loadavg_end"],
                      "commit": res["commit"]}))


if __name__ == "__main__":
    main()
