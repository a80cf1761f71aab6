"""The TTT comparison (`benchmarks/discover_ttt.py`): TTT, the same model frozen, and random compositions of the
building blocks, at equal sandbox evaluations. How each arm is stepped and recorded, each arm's summary and the
per-seed comparison the figure's claims rest on; the benchmark wires them to flags and prints.

    rows = trainer_steps(Trainer(cfg), cfg, "trained s1", wall_budget=2400)   # one row per step
    res = random_arm(cfg, seed=1, run_name="ttt_random_blocks_s1", root="runs", wall_budget=2400)
    summary = {seed: {arm: arm_summary(rows) for arm, rows in ...}}; comparison_targets(summary)
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

from ttlab.discover.config import SearchConfig, TrainConfig
from ttlab.discover.loop import run_search

ARMS = ("trained", "frozen", "random_blocks")
# the trainer metrics each step row keeps (the `rollout/` prefix dropped)
KEYS = ("rollout/parse_rate", "rollout/run_rate", "rollout/valid_rate", "rollout/reward_mean", "rollout/reward_best",
        "rollout/score_best", "rollout/score_mean", "tree/best_score", "rollout/completion_tokens_mean",
        "rollout/finished_rate", "adv/kept_frac", "adv/abs_max_raw", "adv/beta_mean", "adv/beta_at_cap_frac",
        "learn/samples", "learn/grad_norm", "learn/ratio_mean", "learn/ratio_max", "learn/dlogp_pos",
        "learn/dlogp_neg", "time/step_s", "time/generate_s", "time/evaluate_s", "time/learn_s",
        "perf/gen_tokens_per_s")


def trainer_steps(tr, cfg: TrainConfig, name: str, wall_budget: float, after_step=None) -> list[dict]:
    """Step a `Trainer` to cfg.steps or until `wall_budget` seconds have passed (checked after each step); one row
    per step: the KEYS metrics, the step, the sandbox evaluations so far, wall seconds and the load. Closes it."""
    rows: list[dict] = []
    t0 = time.time()
    per_step = cfg.states_per_step * cfg.rollouts_per_state
    try:
        while tr.step_idx < cfg.steps and time.time() - t0 < wall_budget:
            m = tr.step()
            rows.append({k.split("/")[-1] if k.startswith("rollout/") else k: m.get(k) for k in KEYS}
                        | {"step": tr.step_idx, "evals": tr.step_idx * per_step, "wall_s": round(time.time() - t0, 1),
                           "load1": round(os.getloadavg()[0], 2)})
            print(f"[{name}] step {tr.step_idx}: parse {m['rollout/parse_rate']:.2f} run {m['rollout/run_rate']:.2f} valid "
                  f"{m['rollout/valid_rate']:.2f} reward mean {m['rollout/reward_mean']:.4f} best C5 "
                  f"{m['tree/best_score']:.6f} ({m['time/step_s']:.0f} s: gen {m['time/generate_s']:.0f} "
                  f"eval {m['time/evaluate_s']:.0f} learn {m['time/learn_s']:.0f})", flush=True)
            if after_step is not None:
                after_step(rows)
    finally:
        tr.close()
    return rows


def random_arm(c: TrainConfig, seed: int, run_name: str, root: str, wall_budget: float, after_step=None) -> dict:
    """The random-blocks proposer through the search loop with the LLM arms' tree, batch and program settings
    (those of `c`), for c.steps steps or `wall_budget` seconds; rows shaped like `trainer_steps`' rows."""
    budget = f"{int(wall_budget)}s" if math.isfinite(wall_budget) else "100000h"
    sc = SearchConfig(task=c.task, proposer="random_blocks", time_limit=budget, workers=c.workers,
                      states_per_step=c.states_per_step, samples_per_state=c.rollouts_per_state,
                      program_budget_s=c.program_budget_s, grace_s=c.grace_s, program_clock=c.program_clock,
                      memory_mb=c.memory_mb,
                      init_states=c.init_states, puct_c=c.puct_c, keep_children=c.keep_children, max_roots=c.max_roots,
                      seed=seed, run_name=run_name, root=root, max_steps=c.steps, init_tree=str(c.init_tree or ""))
    rows: list[dict] = []
    last = {"evals": 0, "valid": 0, "t": 0.0}

    def on_step(d: dict) -> None:
        n = d["evals"] - last["evals"]
        rows.append({"step": d["step"], "evals": d["evals"], "wall_s": round(d["t"], 1),
                     "valid_rate": (d["valid"] - last["valid"]) / max(1, n), "tree/best_score": d["best_score"],
                     "time/step_s": round(d["t"] - last["t"], 2), "time/generate_s": 0.0, "time/learn_s": 0.0,
                     "time/evaluate_s": round(d["t"] - last["t"], 2), "load1": round(os.getloadavg()[0], 2)})
        last.update(evals=d["evals"], valid=d["valid"], t=d["t"])
        print(f"[random_blocks] step {d['step']}: valid {rows[-1]['valid_rate']:.2f} best C5 {d['best_score']:.6f} "
              f"({rows[-1]['time/step_s']:.0f} s)", flush=True)
        if after_step is not None:
            after_step(rows)

    run_search(sc, log=lambda s: None, on_step=on_step)
    return {"arm": "random_blocks", "seed": seed, "steps": rows}


def arm_summary(rows: list[dict]) -> dict:
    """One arm of one seed: steps, evaluations, best C5 (lowest), valid rate and mean reward overall and over the
    first / last three steps, mean beta, the fraction of steps with some beta at its cap, the mean time split."""
    def mean(key, sl=slice(0, None)):
        v = [r[key] for r in rows[sl] if r.get(key) is not None and not (isinstance(r[key], float) and math.isnan(r[key]))]
        return float(np.mean(v)) if v else None

    caps = [r["adv/beta_at_cap_frac"] for r in rows if r.get("adv/beta_at_cap_frac") is not None
            and not math.isnan(r["adv/beta_at_cap_frac"])]  # NaN: no group had an advantage, so no beta was solved
    best = [r["tree/best_score"] for r in rows if r.get("tree/best_score") is not None]
    return {"steps": len(rows), "evals": rows[-1]["evals"] if rows else 0, "wall_s": rows[-1]["wall_s"] if rows else 0,
            "best_c5": min(best) if best else None, "valid_all": mean("valid_rate"),
            "valid_first3": mean("valid_rate", slice(0, 3)), "valid_last3": mean("valid_rate", slice(-3, None)),
            "reward_first3": mean("reward_mean", slice(0, 3)), "reward_last3": mean("reward_mean", slice(-3, None)),
            "beta_mean": mean("adv/beta_mean"),
            "steps_beta_at_cap_frac": float(np.mean([c > 0 for c in caps])) if caps else None,
            "step_s_mean": mean("time/step_s"), "generate_s_mean": mean("time/generate_s"),
            "evaluate_s_mean": mean("time/evaluate_s"), "learn_s_mean": mean("time/learn_s")}


def comparison_targets(summary: dict) -> dict:
    """The comparison per seed: TTT below frozen; both LLM arms below random_blocks (lower C5 is better). A seed
    where an arm found nothing does not count as below."""
    out = {}
    for seed, arms in summary.items():
        b = {a: s.get("best_c5") for a, s in arms.items()}
        row = {}
        if b.get("trained") is not None and b.get("frozen") is not None:
            row["ttt_minus_frozen"] = b["trained"] - b["frozen"]
        if b.get("random_blocks") is not None:
            for a in ("trained", "frozen"):
                if b.get(a) is not None:
                    row[f"{a}_minus_random_blocks"] = b[a] - b["random_blocks"]
        out[seed] = row
    n = len(out)
    return {"per_seed": out, "ttt_below_frozen": f"{sum(r.get('ttt_minus_frozen', 1) < 0 for r in out.values())}/{n}",
            "llm_arms_below_random": f"{sum(r.get('trained_minus_random_blocks', 1) < 0 and r.get('frozen_minus_random_blocks', 1) < 0 for r in out.values())}/{n}"}
