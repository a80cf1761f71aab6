"""What the LLM arms of a `discover_ttt.py` run chose to do, step by step. Prints ONE JSON line last.

Reads each arm's `samples.jsonl` (every rollout's program text, parent, validity and message) and reports, per
arm and seed, for the programs written for a child state (a parent that is not the root):

  - the start each program makes, read from its text: `restart` (it calls `eb.multistart`, a fresh start),
    `coarsen` (its first line coarsens the parent) or `parent` (it works on the parent as it is);
  - the share of each, and the valid rate, in the first and the second half of the run's steps;
  - the most common failure messages of each half.

A search that stops restarting keeps refining the basin it is in; that is what this measures. Also, per arm and
seed, the programs written for the root (the first step's, before any update): their start shares and valid
rate (every root of the tree: the fresh starts, read from the run's `tree.json`), the thing a best-of-16 from the root depends on most; and the spread of the numeric settings over all the
arm's programs (`program_settings.spread`), beside the random-blocks grammar's over 128 draws, a run's programs (`grammar_spread`; the share of distinct values depends on the count).

    python benchmarks/discover_choices.py --tag graded --seeds 1 2 3 \
        --out benchmarks/results/discover_ttt/blocks_graded_choices.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from ttlab.common.result_file import emit_result
from ttlab.discover.program_settings import spread
from ttlab.discover.random_blocks import random_program
from ttlab.discover.starts import STARTS, start_of


def root_ids(run_dir: Path) -> set[str]:
    """The ids of the tree's roots (states without a parent: the fresh starts the run began with, or added), from
    the run's `tree.json`; `{"s0"}` where there is none."""
    tree = run_dir / "tree.json"
    if not tree.is_file():
        return {"s0"}
    return {n["id"] for n in json.loads(tree.read_text())["nodes"] if n.get("parent_id") is None}


def half_summary(rows: list[dict], roots: set[str]) -> dict:
    """Start shares and valid rate of child-state programs, and the top failure messages of all programs."""
    child = [r for r in rows if r.get("parent", "s0") not in roots]
    starts = Counter(start_of(r.get("text", "")) for r in child)
    fails = Counter(str(r.get("message", ""))[:80] for r in rows if not r.get("valid"))
    n = max(1, len(child))
    return {"programs": len(rows), "child_programs": len(child),
            "start_share": {k: round(starts[k] / n, 3) for k in STARTS},
            "child_valid": round(sum(bool(r.get("valid")) for r in child) / n, 3),
            "valid": round(sum(bool(r.get("valid")) for r in rows) / max(1, len(rows)), 3),
            "failures": [[m, c] for m, c in fails.most_common(4)]}


def root_summary(rows: list[dict], roots: set[str]) -> dict:
    """Start shares and valid rate of the programs written for a root state (the root prompt: no parent code)."""
    root = [r for r in rows if r.get("parent", "s0") in roots]
    starts = Counter(start_of(r.get("text") or "") for r in root)
    n = max(1, len(root))
    return {"programs": len(root), "start_share": {k: round(starts[k] / n, 3) for k in STARTS},
            "valid": round(sum(bool(r.get("valid")) for r in root) / n, 3)}


def arm_summary(samples: Path) -> dict:
    rows = [json.loads(ln) for ln in samples.read_text().splitlines() if ln.strip()]
    if not rows:
        raise ValueError(f"{samples}: no samples")
    roots = root_ids(samples.parent)
    last = max(int(r["step"]) for r in rows)
    cut = (last + 1) // 2  # steps 1..cut, cut+1..last
    return {"steps": last, "first_half": half_summary([r for r in rows if int(r["step"]) <= cut], roots),
            "second_half": half_summary([r for r in rows if int(r["step"]) > cut], roots),
            "root": root_summary(rows, roots),
            "settings_spread": spread([r.get("text") or "" for r in rows])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tag", required=True, help="the discover_ttt.py run's --tag")
    ap.add_argument("--seeds", type=int, nargs="+", required=True)
    ap.add_argument("--arms", nargs="+", default=["trained", "frozen"], help="LLM arms (random_blocks has no text)")
    ap.add_argument("--runs", default="runs", help="the discover_ttt.py --runs root")
    ap.add_argument("--out", type=Path, help="write the JSON here too")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    res: dict = {"benchmark": "discover_choices", "tag": args.tag, "arms": {},
                 "grammar_spread": spread([random_program(rng)[0] for _ in range(128)])}
    for arm in args.arms:
        for seed in args.seeds:
            samples = Path(args.runs) / "discover" / f"ttt_{arm}_{args.tag}_s{seed}" / "samples.jsonl"
            if not samples.exists():
                sys.exit(f"discover_choices: error: {samples}: no such file (run discover_ttt.py with --tag "
                         f"{args.tag} first)")
            try:
                res["arms"].setdefault(arm, {})[str(seed)] = arm_summary(samples)
            except (ValueError, KeyError, json.JSONDecodeError) as e:
                sys.exit(f"discover_choices: error: {samples}: unreadable samples ({e})")
    emit_result(res, args.out, indent=None)


if __name__ == "__main__":
    main()
