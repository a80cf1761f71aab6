"""Where each arm's best C5 comes from in a `discover_ttt.py` run: the first step, or the steps after it.

Every arm's first step expands the root with N programs; every later step expands what PUCT picks. A search's
final best is its first step's best-of-N plus what the later steps take off it, so the gap between two arms
splits into the two. Per arm and seed this reports:

  - `first`: the first step's valid share, best and median C5 (the best of N programs from the same root);
  - `final`: the best C5 of the run;
  - `later_gain`: first best minus final best (what the later steps added; >= 0);
  - `lineage`: the best state's ancestors back to the root, each as [created at step, start of its program]
    (`restart`, `coarsen` or `parent`, read from the program text as `discover_choices.py` does): where the
    basin was found and how long it was refined.

  - `children`: the programs written for a state that is not a root (a later step's parent), by their start:
    how many, the valid share, the share that beat their parent, and the median / 90th percentile / largest
    gain over the parent's C5 (> 0 is better). It separates where a later gain comes from: new basins
    (`restart`) or refinements (`coarsen`, `parent`), and how often each pays.

LLM arms are read from `samples.jsonl`, the random proposer from `results.jsonl` (its program texts regenerated
from the run's seed, matched by hash); the lineage and the parents' scores from `tree.json`.

    python benchmarks/discover_gap.py --tag graded --seeds 1 2 3 \
        --out benchmarks/results/discover_ttt/blocks_graded_gap.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from ttlab.common.result_file import emit_result
from ttlab.discover.provenance import program_hash
from ttlab.discover.random_blocks import random_program
from ttlab.discover.starts import start_of


def _scores_by_step(rows: list[dict]) -> dict[int, list[float | None]]:
    out: dict[int, list[float | None]] = {}
    for r in rows:
        s = r.get("score")
        out.setdefault(int(r["step"]), []).append(float(s) if s is not None and r.get("valid", True) else None)
    return out


def lineage(tree: dict) -> tuple[float, list[list]]:
    """(best score, [[created step, start], ...] from the best state back to its root's child)."""
    nodes = {n["id"]: n for n in tree["nodes"]}
    if not nodes:
        raise ValueError("the tree has no states")
    best = min(nodes.values(), key=lambda n: n["score"])
    out, n = [], best
    while n is not None and n.get("parent_id"):
        out.append([int(n.get("created", -1)), start_of(n.get("code", ""))])
        n = nodes.get(n["parent_id"])
    return float(best["score"]), out


def random_bodies(run: Path, count: int) -> dict[str, str]:
    """{program hash: the program's body after the shared head} for the first `count` programs the random
    proposer of `run` drew (its seeded stream, as the search drew them)."""
    cfg = json.loads((run / "config.json").read_text())
    rng = np.random.default_rng(int(cfg["seed"]))
    out = {}
    for _ in range(count):
        code, _choices = random_program(rng, float(cfg.get("program_wall_factor", 1.0)))
        lines = code.splitlines()
        head = next(i for i, ln in enumerate(lines) if "eb.normalise(" in ln)
        out[program_hash(code)] = "\n".join(lines[head + 1:])
    return out


def text_reader(run: Path, rows: list[dict], llm: bool):
    """row -> the program text: an LLM arm's row carries it (`samples.jsonl`); the random proposer's is
    regenerated from the run's seed and matched by hash ("" when unknown)."""
    if llm:
        return lambda r: r.get("text") or ""
    bodies = random_bodies(run, 2 * len(rows))
    return lambda r: bodies.get(r.get("program", ""), "")


def child_gains(rows: list[dict], tree: dict, text_of) -> dict[str, list[float | None]]:
    """Per start: each program written for a non-root state, its gain over that state's C5 (None: invalid).
    A program whose text is not known is counted under `unknown`."""
    nodes = {n["id"]: n for n in tree["nodes"]}
    by: dict[str, list[float | None]] = {}
    for r in rows:
        parent = nodes.get(r.get("parent"))
        if parent is None or not parent.get("parent_id"):
            continue  # a root's programs are the first step's (`first`), or the parent left the tree
        ok = r.get("valid", True) and r.get("score") is not None
        text = text_of(r)
        by.setdefault(start_of(text) if text else "unknown", []).append(
            float(parent["score"]) - float(r["score"]) if ok else None)
    return by


def summarise_gains(by: dict[str, list[float | None]]) -> dict:
    out = {}
    for start, gains in sorted(by.items()):
        v = np.array([g for g in gains if g is not None])
        out[start] = {"programs": len(gains), "valid": round(len(v) / len(gains), 3)}
        if len(v):
            out[start] |= {"beat_parent": round(float(np.mean(v > 0)), 3), "median_gain": float(np.median(v)),
                           "p90_gain": float(np.percentile(v, 90)), "max_gain": float(v.max())}
    return out


def arm_gap(run: Path) -> dict:
    samples = run / "samples.jsonl"
    path = samples if samples.exists() else run / "results.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{run}: no samples.jsonl or results.jsonl")
    rows = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    if not rows:
        raise ValueError(f"{path}: no programs")
    by_step = _scores_by_step(rows)
    first = by_step[min(by_step)]
    ok = [s for s in first if s is not None]
    every = [s for v in by_step.values() for s in v if s is not None]
    if not every:
        raise ValueError(f"{path}: no valid program")
    final = min(every)
    tree_best, lin = lineage(json.loads((run / "tree.json").read_text())) if (run / "tree.json").exists() else (
        final, [])
    res = {"steps": len(by_step), "programs": len(rows),
           "first": {"programs": len(first), "valid": round(len(ok) / len(first), 3),
                     "best_c5": min(ok) if ok else None, "median_c5": statistics.median(ok) if ok else None},
           "final_c5": min(final, tree_best), "lineage": lin}
    res["later_gain"] = (res["first"]["best_c5"] - res["final_c5"]) if ok else None
    if (run / "tree.json").exists():
        text_of = text_reader(run, rows, samples.exists())
        res["_child_gains"] = child_gains(rows, json.loads((run / "tree.json").read_text()), text_of)
        res["children"] = summarise_gains(res["_child_gains"])
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tag", required=True, help="the discover_ttt.py run's --tag")
    ap.add_argument("--seeds", type=int, nargs="+", required=True)
    ap.add_argument("--arms", nargs="+", default=["trained", "frozen", "random_blocks"])
    ap.add_argument("--runs", default="runs", help="the discover_ttt.py --runs root")
    ap.add_argument("--out", type=Path, help="write the JSON here too")
    args = ap.parse_args()
    res: dict = {"benchmark": "discover_gap", "tag": args.tag, "arms": {}}
    for arm in args.arms:
        for seed in args.seeds:
            run = Path(args.runs) / "discover" / f"ttt_{arm}_{args.tag}_s{seed}"
            try:
                res["arms"].setdefault(arm, {})[str(seed)] = arm_gap(run)
            except FileNotFoundError as e:
                sys.exit(f"discover_gap: error: {e} (run discover_ttt.py with --tag {args.tag} first)")
            except (ValueError, KeyError, json.JSONDecodeError) as e:
                sys.exit(f"discover_gap: error: {run}: unreadable run ({e})")
    seeds = [str(s) for s in args.seeds]
    res["mean"], res["children_pooled"] = {}, {}
    for arm, v in res["arms"].items():
        pooled: dict[str, list[float | None]] = {}
        for s in seeds:
            for start, gains in v[s].pop("_child_gains", {}).items():
                pooled.setdefault(start, []).extend(gains)
        if pooled:
            res["children_pooled"][arm] = summarise_gains(pooled)
        if all(v[s]["later_gain"] is not None for s in seeds):
            res["mean"][arm] = {"first_best_c5": statistics.mean(v[s]["first"]["best_c5"] for s in seeds),
                                "later_gain": statistics.mean(v[s]["later_gain"] for s in seeds),
                                "final_c5": statistics.mean(v[s]["final_c5"] for s in seeds)}
    emit_result(res, args.out, indent=None)


if __name__ == "__main__":
    main()
