"""Assemble a `discover_ttt.py` result from its per-arm files when the run was stopped before its last arm ended.

    python benchmarks/discover_ttt_collect.py --runs RUNS --tag TAG --seeds 1,2,3 --arms trained,frozen,random_blocks \\
        --stopped "seed 3 trained stopped after step 6: out of session time" --out OUT.json --png OUT.png

Each arm of `discover_ttt.py --jobs N` saves its rows after every step (`RUNS/ttt_<arm>_<tag>_s<seed>.json`);
this reads them, adds the same summary and targets `discover_ttt.py` computes, plus the comparison at equal
evaluations (each arm's best C5 at the largest evaluation count every arm of the seed reached), and names why the
run was cut (`--stopped`). The other fields (preset, lr, temperature, ...) are those of the preset with the
overrides given here, as `discover_ttt.py` records them. Prints ONE JSON line last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from discover_ttt import plot  # noqa: E402  (the sibling benchmark's plot, so both draw the same figure)
from ttlab.discover.llm.ttt_compare import arm_summary, comparison_targets  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def at_equal_evals(runs: dict) -> dict:
    """Per seed: the evaluation count every arm reached, and each arm's best C5 by then."""
    out = {}
    for seed, arms in runs.items():
        reached = [max((r["evals"] for r in a.get("steps", [])), default=0) for a in arms.values()]
        n = min(reached) if reached else 0
        best = {}
        for arm, a in arms.items():
            v = [r["tree/best_score"] for r in a.get("steps", []) if r["evals"] <= n and r.get("tree/best_score") is not None]
            best[arm] = min(v) if v else None
        out[seed] = {"evals": n, "best_c5": best}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--arms", default="trained,frozen,random_blocks")
    ap.add_argument("--steps", type=int, required=True, help="the steps the run was asked for")
    ap.add_argument("--tuning-seed", type=int, default=0)
    ap.add_argument("--wall-budget", default="")
    ap.add_argument("--stopped", required=True, help="why and where the run was cut")
    ap.add_argument("--command", required=True, help="the discover_ttt.py command that was run")
    ap.add_argument("--out", required=True)
    ap.add_argument("--png", required=True)
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s]
    arms = [a for a in args.arms.split(",") if a]
    runs: dict[str, dict] = {}
    for s in seeds:
        runs[str(s)] = {}
        for a in arms:
            f = Path(args.runs) / f"ttt_{a}_{args.tag}_s{s}.json"
            runs[str(s)][a] = json.loads(f.read_text()) if f.is_file() else {"steps": []}
    from ttlab.discover.llm.presets import TRAIN_PRESETS

    c = TRAIN_PRESETS["cpu_smollm2_blocks"]()
    summary = {seed: {a: arm_summary(r.get("steps", [])) for a, r in arms_.items()} for seed, arms_ in runs.items()}
    eq = at_equal_evals(runs)
    git = ["git", "-C", str(ROOT)]
    res = {"benchmark": "discover_ttt", "collected_by": "discover_ttt_collect", "command": args.command,
           "stopped": args.stopped, "model": c.policy.model, "task": c.task, "preset": "cpu_smollm2_blocks",
           "prompt_format": c.prompt_format, "sampler": c.policy.backend, "program_clock": c.program_clock,
           "arms": arms, "seeds": seeds, "tuning_seed": args.tuning_seed, "steps": args.steps, "lr": c.lr,
           "temperature": c.policy.temperature, "rollouts_per_step": c.states_per_step * c.rollouts_per_state,
           "program_budget_s": c.program_budget_s, "wall_budget": args.wall_budget or "none",
           "title": f"TTT-Discover cpu_smollm2_blocks, Erdős, {c.states_per_step * c.rollouts_per_state} programs/step, "
                    f"T {c.policy.temperature}, lr {c.lr:g}, work clock",
           "summary": summary, "targets": comparison_targets(summary), "at_equal_evals": eq,
           "targets_at_equal_evals": comparison_targets({s: {a: {"best_c5": b} for a, b in v["best_c5"].items()}
                                                         for s, v in eq.items()}),
           "runs": runs,
           "commit": subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
           "nproc": os.cpu_count(), "loadavg_end": os.getloadavg(),
           "longest_arm_wall_s": max((r["steps"][-1]["wall_s"] for a in runs.values() for r in a.values() if r.get("steps")),
                         default=0.0)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1))
    plot(res, Path(args.png))
    print(json.dumps({k: res[k] for k in ("benchmark", "collected_by", "seeds", "steps", "targets",
                                          "targets_at_equal_evals", "stopped", "commit")}))


if __name__ == "__main__":
    main()
