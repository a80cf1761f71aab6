"""The adaptation evidence: transformer (KV cache across trials) vs memoryless MLP on the hidden-exit benchmark.

For each core and seed: PPO on `presets.hidden_exit` (M = 2 candidate exits, K = 2 trials, exit feedback)
for the same agent-step budget, logging the per-trial goal rates of the training rollouts (the learning
curve); then an evaluation on held-out scenes (`presets.HIDDEN_EXIT_HELD_OUT`, other seeds than training)
of exactly `--eval-episodes` episodes per env, trial 1 paired with trial 0 in each episode
(`adapt_eval.run_policy`). The scripted references (a driver with memory and the best memoryless one,
`ttlab.drive.scripted`) are measured on the same held-out scenes.

Writes benchmarks/results/drive_adapt.json and the learning-curve figure benchmarks/results/drive_adapt.png,
and prints ONE JSON line last.

    python benchmarks/drive_adapt.py                      # 3 seeds x {transformer, mlp}
    python benchmarks/drive_adapt.py --design steer --seeds 2 --out benchmarks/results/drive_adapt_steer.json \
        --png benchmarks/results/drive_adapt_steer.png    # the steering-only design (no exit intent)
    python benchmarks/drive_adapt.py --seeds 1 --steps 300000 --cores transformer --out /tmp/x.json   # a probe
    python benchmarks/drive_adapt.py --set env.k_trials=3 --out .../drive_adapt_k3.json --png .../drive_adapt_k3.png

`--set` overrides apply to training, to the held-out evaluation and to the scripted references alike (K, M and
the held-out scenes follow them); the JSON reports `ada_delta_trial_{k}_minus_0` for every k < K.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import torch

from ttlab.drive.adapt import apply_overrides, held_out_env, held_out_source, train_hidden_exit
from ttlab.drive.adapt_eval import run_policy
from ttlab.drive.policy import CORES
from ttlab.drive.presets import hidden_exit
from ttlab.drive.scripted import FixedChooser, MemoryChooser, pool_exit_routes, run_scripted

RESULTS = Path(__file__).resolve().parents[1] / "runs" / "bench" / "drive_adapt"  # canonical: benchmarks/results/drive_adapt/


def plot(runs: list[dict], path: Path, k_trials: int = 2) -> None:
    """Learning curves of the training rollouts: goal rate per trial, and trial k - trial 0 for every k >= 1; trial 0
    dashed, later trials solid."""
    import charts  # a sibling module; matplotlib only when a plot is asked for

    shades = {"transformer": [(31, 119, 180), (80, 160, 220), (20, 70, 130)],
              "lstm": [(44, 160, 44), (110, 200, 110), (20, 100, 20)],
              "mlp": [(230, 120, 20), (250, 170, 80), (170, 80, 10)]}
    later = "1" if k_trials == 2 else f"1..{k_trials - 1}"
    fig, (g, d) = charts.panels(2, size=(5.0, 3.6))
    charts.trial_curves(g, d, [([c["agent_steps"] for c in r["curve"]],
                                [[c.get(f"trial_{k}_goal_rate", float("nan")) for c in r["curve"]] for k in range(k_trials)],
                                [charts.rgb(shades.get(r["core"], [(0, 0, 0)] * 3)[r["seed"] % 3])] * k_trials)
                               for r in runs])
    g.set_title(f"goal rate, training rollouts: trial 0 dashed, {later} solid")
    d.set_title(f"trial k - trial 0 goal rate, k = {later}")
    cores = {"transformer": "transformer (KV cache kept across trials)", "lstm": "LSTM", "mlp": "MLP (memoryless)"}
    charts.key(fig, [(name, charts.rgb(shades[core][0])) for core, name in cores.items()
                     if any(r["core"] == core for r in runs)], title="one line per seed")
    charts.save(fig, path)


def run_one(core: str, seed: int, steps: int, eval_episodes: int, threads: int, t_start: float,
            overrides: dict | None = None, intent: bool = True) -> dict:
    """Train one (core, seed) and evaluate it on held-out scenes (paired trials)."""
    torch.set_num_threads(threads)

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:6.0f}s] {msg}", flush=True)

    log(f"train {core} seed {seed}")
    policy, curve, facts = train_hidden_exit(core, seed, steps=steps, log=log, intent=intent, **(overrides or {}))
    t0 = time.perf_counter()
    env = held_out_env(seed=100 + seed, intent=intent, overrides=overrides)  # the training overrides (K, M, ...)
    ev = {k: round(v, 4) for k, v in run_policy(env, policy, eval_episodes).items()}
    facts["eval_wall_s"] = round(time.perf_counter() - t0, 1)
    log(f"eval {core} seed {seed}: {ev}")
    return {"core": core, "seed": seed, **facts, "eval": ev, "curve": curve}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=hidden_exit().total_agent_steps, help="agent-steps per run")
    ap.add_argument("--cores", default="transformer,mlp")
    ap.add_argument("--design", default="intent", choices=("intent", "steer"),
                    help="intent: the route is picked by an exit-intent action (presets.hidden_exit); steer: steering "
                         "only (presets.hidden_exit(intent=False), the previous design)")
    ap.add_argument("--eval-episodes", type=int, default=8, help="episodes per held-out env (64 envs)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads with --jobs 1")
    ap.add_argument("--set", nargs="*", default=[],
                    help="preset overrides section.field=value, applied to training and to the held-out evaluation "
                         "alike (e.g. env.k_trials=3)")
    ap.add_argument("--jobs", type=int, default=0,
                    help="runs trained at once, one thread each; 0 = 2 when the 1-min load average is < 2.5, else 1")
    ap.add_argument("--out", type=Path, default=RESULTS / "drive_adapt.json")
    ap.add_argument("--png", type=Path, default=RESULTS / "drive_adapt.png")
    args = ap.parse_args()
    intent = args.design == "intent"
    bad = [c for c in args.cores.split(",") if c not in CORES]
    if bad:
        print(f"drive_adapt.py: --cores {args.cores}: unknown {bad} ({', '.join(CORES)})")
        return 2
    try:  # the code that runs: read at the start (later commits during the run do not change it)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = "unknown"
    torch.set_num_threads(args.threads)
    t_start, load0 = time.perf_counter(), os.getloadavg()
    if args.jobs <= 0:
        args.jobs = 2 if load0[0] < 2.5 else 1

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:6.0f}s] {msg}", flush=True)

    overrides = dict(kv.split("=", 1) for kv in args.set)
    try:
        cfg = apply_overrides(hidden_exit(intent=intent), overrides)  # what trains and what is evaluated
    except ValueError as e:
        print(f"drive_adapt.py: --set: {e}")
        return 2
    held_out = held_out_source(cfg)
    K = cfg.env.k_trials
    # scripted references on the held-out scenes (what the information structure allows)
    env = held_out_env(intent=intent, overrides=overrides)
    M = int(env.view.candidates.shape[2])
    routes = pool_exit_routes(held_out)
    scripted = {}
    for name, ch in (("memory", MemoryChooser()), *((f"fixed_{i}", FixedChooser(i)) for i in range(M))):
        scripted[name] = {k: round(v, 4) for k, v in run_scripted(env, routes, ch, args.eval_episodes).items()}
        log(f"scripted {name}: {scripted[name]}")

    jobs = [(core, seed) for core in args.cores.split(",") for seed in range(args.seeds)]
    if args.jobs > 1:  # one process per run, each on one thread (the 2 cores are used by 2 runs at a time)
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.jobs) as pool:
            runs = pool.starmap(run_one, [(c, s, args.steps, args.eval_episodes, 1, t_start, overrides, intent)
                                          for c, s in jobs])
    else:
        runs = [run_one(c, s, args.steps, args.eval_episodes, args.threads, t_start, overrides, intent) for c, s in jobs]

    def agg(core: str, key: str) -> list[float]:
        return [r["eval"][key] for r in runs if r["core"] == core]

    summary = {}
    for core in args.cores.split(","):
        d = agg(core, "ada_delta_trial_1_minus_0")
        per_k = {k: agg(core, f"ada_delta_trial_{k}_minus_0") for k in range(1, K)}
        summary[core] = {"delta_goal_rate_mean": round(sum(d) / len(d), 4), "delta_goal_rate_per_seed": d,
                         **{f"ada_delta_trial_{k}_minus_0_mean": round(sum(v) / len(v), 4) for k, v in per_k.items()},
                         **{f"ada_delta_trial_{k}_minus_0_per_seed": v for k, v in per_k.items()},
                         **{f"trial_{k}_goal_rate": agg(core, f"trial_{k}_goal_rate") for k in range(K)},
                         "trial_1_goal_rate_after_wrong_0": agg(core, "trial_1_goal_rate_after_wrong_0"),
                         **{f"trial_{k}_exit_rate": agg(core, f"trial_{k}_exit_rate") for k in range(K)}}
    tr, ml = summary.get("transformer"), summary.get("mlp")
    targets = {}
    if tr:
        targets["transformer_mean_delta_ge_0.3"] = tr["delta_goal_rate_mean"] >= 0.3
        targets["transformer_every_seed_ge_0.2"] = all(x >= 0.2 for x in tr["delta_goal_rate_per_seed"])
    if ml:
        targets["mlp_abs_delta_le_0.05"] = abs(ml["delta_goal_rate_mean"]) <= 0.05
    result = {
        "benchmark": "drive_adapt", "commit": commit, "nproc": os.cpu_count(), "jobs": args.jobs,
        "torch_threads": 1 if args.jobs > 1 else args.threads,
        "loadavg_start": [round(x, 2) for x in load0], "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "wall_s": round(time.perf_counter() - t_start, 1),
        "config": {"design": args.design, "intent_floor": cfg.policy.intent_floor,
                   "progress_target": cfg.env.progress_target, "scenarios": cfg.scenarios, "held_out": held_out, "M": M, "K": K,
                   "trial_length": cfg.env.trial_length, "num_envs": cfg.env.num_envs,
                   "agent_steps_per_run": runs[0]["agent_steps"] if runs else 0, "seeds": args.seeds,
                   "eval_episodes_per_env": args.eval_episodes, "eval_envs": 64,
                   "ppo": {k: getattr(cfg.ppo, k) for k in ("lr", "ent_coef", "ent_coef_end", "aux_task_coef",
                                                          "explore_steer", "update_epochs", "num_minibatches")},
                   "task_classes": cfg.policy.task_classes},
        "overrides": overrides, "summary": summary, "targets": targets, "scripted_held_out": scripted,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for r in runs:  # the curve keeps the per-trial rates only (the file stays small)
        r["curve"] = [{k: v for k, v in c.items() if k in ("update", "agent_steps", "wall_s")
                       or (k.startswith("trial_") and k.endswith(("goal_rate", "exit_rate")))} for c in r["curve"]]
    args.out.write_text(json.dumps(result, separators=(",", ":")) + "\n")
    plot(runs, args.png, K)
    line = {"benchmark": "drive_adapt", "design": args.design, "wall_s": result["wall_s"], "commit": commit[:10],
            "loadavg_start": result["loadavg_start"], **{f"{c}_{k}": v for c, s in summary.items() for k, v in s.items()
                                                         if k in ("delta_goal_rate_mean", "delta_goal_rate_per_seed",
                                                                  "trial_1_goal_rate_after_wrong_0")
                                                         or (k.startswith("ada_delta_trial_") and k.endswith("_mean"))},
            "M": M, "K": K,
            "scripted_memory_delta": scripted["memory"]["ada_delta_trial_1_minus_0"], "targets": targets}
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
