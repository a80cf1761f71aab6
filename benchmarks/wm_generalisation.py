"""Does a trained world model score better on the episodes it trained on than on held-out ones? Prints ONE JSON
line last.

A trained run (e.g. `benchmarks/wm_evidence.py`'s) is scored by the evidence scorecard twice, on its held-out
episodes and on as many of its training episodes (a seeded draw), with the same windows per episode count, the
same rollouts and the same sampler. The baselines (copy-last, mean frame, blend) are scored on both sets too: they
learn nothing per episode, so their difference between the sets is how much harder one set of episodes is, and the
model's difference beyond that is what it memorised. A gap says more data (or fewer passes over it) would help the
held-out scores; no gap says the model's capacity or its steps are what limit it.

    python benchmarks/wm_generalisation.py --run runs/wm/<run> [--data data/pusht64_smooth] [--windows 64]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from ttlab.worldmodel.data.windows import WindowDataset
from ttlab.worldmodel.presets import pusht_cpu
from ttlab.worldmodel.scorecard import fit_baselines, score_rollouts, score_windows
from ttlab.worldmodel.train import build_datasets
from ttlab.worldmodel.weights import load_world_model

SCORES = ("psnr", "ssim", "tee_px", "tee_deg", "agent_px", "tee_kept", "tee_placed", "agent_ink_ratio")
PREDICTORS = ("model", "copy_last", "mean_frame", "blend")


def means(res: dict) -> dict:
    return {p: {s: round(float(res[f"{p}/{s}"]), 4) for s in SCORES if f"{p}/{s}" in res} for p in PREDICTORS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="a trained run directory (runs/wm/<name>)")
    ap.add_argument("--data", default="data/pusht64_smooth", help="the dataset the run trained on")
    ap.add_argument("--heldout-of", type=int, default=0, help="as the run's wm_evidence --heldout-of")
    ap.add_argument("--windows", type=int, default=64, help="windows scored on each set")
    ap.add_argument("--rollout-episodes", type=int, default=8, help="24-frame rollouts on each set")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    run = Path(args.run)
    if not (run / "checkpoints" / "weights_latest.json").exists():
        ap.error(f"--run {run}: no trained weights (checkpoints/weights_latest.json)")
    if not (Path(args.data) / "states.pth").exists():
        ap.error(f"--data {args.data}: not a generated PushT dataset (no states.pth)")
    if args.windows < 1 or args.rollout_episodes < 2:
        ap.error(f"--windows {args.windows} / --rollout-episodes {args.rollout_episodes}: need >= 1 / >= 2")
    torch.set_num_threads(args.threads)
    saved = json.loads((run / "config.json").read_text())
    cfg = replace(pusht_cpu(), data=args.data, relative_actions=bool(saved.get("relative_actions", False)),
                  action_map=saved.get("action_map", "gaussian"), split_seed=0, heldout_of=args.heldout_of)
    cfg = replace(cfg, **{k: saved[k] for k in ("num_frames", "frame_interval", "n_ctx", "sample_steps") if k in saved})
    wm = load_world_model(run)
    _, val = build_datasets(cfg, run / "action_stats.json")
    src = val.source
    train_eps = np.setdiff1d(np.arange(len(src)), val.episodes)
    base = fit_baselines(src, train_eps, cfg.frame_interval, max_lag=24)
    drawn = np.sort(np.random.default_rng(0).choice(train_eps, size=min(len(val.episodes), len(train_eps)),
                                                    replace=False))
    seen = WindowDataset(src, num_frames=cfg.num_frames, frame_interval=cfg.frame_interval, split="val",
                         action_stats=val.action_stats, episodes=drawn)
    out: dict = {"benchmark": "wm_generalisation", "run": run.name, "data": args.data, "windows": args.windows,
                 "rollout_episodes": args.rollout_episodes, "episodes_per_set": len(drawn),
                 "heldout_episodes": [int(e) for e in val.episodes], "trained_on_episodes": [int(e) for e in drawn]}
    for name, ds in (("heldout", val), ("trained_on", seen)):
        t = time.perf_counter()
        w = score_windows(wm.model, wm.obj, ds, base, cfg.n_ctx, cfg.sample_steps, count=args.windows, stlpips=False)
        w.pop("_first")
        ro = score_rollouts(wm.model, wm.obj, ds, base, cfg.n_ctx, cfg.sample_steps, horizon=24,
                            max_episodes=args.rollout_episodes, stlpips=False)
        ro.pop("_first")
        out[name] = {"windows": means(w), "rollouts": means(ro), "seconds": round(time.perf_counter() - t, 1)}
        print(name, json.dumps(out[name]), file=sys.stderr, flush=True)
    gap = {}
    for part in ("windows", "rollouts"):
        for s in ("psnr", "ssim"):
            m = out["trained_on"][part]["model"][s] - out["heldout"][part]["model"][s]
            b = out["trained_on"][part]["blend"][s] - out["heldout"][part]["blend"][s]
            gap[f"{part}_{s}"] = {"model": round(m, 4), "blend": round(b, 4), "model_beyond_blend": round(m - b, 4)}
        gap[f"{part}_tee_px_ratio"] = round(out["trained_on"][part]["model"]["tee_px"]
                                            / max(out["heldout"][part]["model"]["tee_px"], 1e-9), 4)
    out["gap_trained_on_minus_heldout"] = gap
    print(json.dumps(out))


if __name__ == "__main__":
    main()
