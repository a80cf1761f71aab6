"""Choose the world model's sampler on tuning episodes, never on the held-out ones. Prints ONE JSON line last.

A trained run (e.g. `benchmarks/wm_evidence.py`'s) is scored on PushT episodes generated with another seed than the
evidence data (so neither trained on nor held out), for each sampler setting: the noise schedule over a window's
frames (`full_sequence`: every frame at one level; `pyramid`: diffusion forcing's staircase, each frame one step
noisier than the one before; `sequential`: one frame after another) and how many of each round's generated frames a
rollout keeps before re-conditioning (0 = all), and optionally the sampling steps (`steps=N`), the noise level the
context is shown at (`hist=F`, diffusion forcing's stabilisation: a fraction of the way to pure noise) and stochastic
DDIM (`eta=F`), and autoguidance (`guide=N:w=F`: the prediction pushed away from the run's own checkpoint at step N, or
`last`, by weight F >= 1; `ttlab.worldmodel.diffusion.guidance`). Windows (lags 1-3) and 24-frame rollouts, against the same
copy-last / mean-frame / blend baselines as the evidence. The choice is the highest rollout SSIM (the evidence
target the default sampler missed); pass it to `wm_evidence.py --eval-only --sample-mode M --rollout-keep K
--sample-steps N --history-noise F --eta F --guide RUN/checkpoints/step=N.ckpt --guidance F`.

    python benchmarks/wm_sampler_sweep.py --run runs/wm/evidence [--configs full_sequence:0,pyramid:0:hist=0.05,...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from ttlab.common.checkpoint import CheckpointError
from ttlab.common.config import from_dict
from ttlab.worldmodel.config import TrainConfig
from ttlab.worldmodel.data.pusht import generate_pusht
from ttlab.worldmodel.diffusion.samplers import MODES
from ttlab.worldmodel.scorecard import fit_baselines, score_rollouts, score_windows, scorecard_targets
from ttlab.worldmodel.train import build_datasets
from ttlab.worldmodel.weights import load_world_model, sampling_model

ROOT = Path(__file__).resolve().parent.parent
KEYS = ("psnr", "ssim", "tee_px", "tee_kept", "tee_placed", "agent_ink_ratio")


def _guide(v: str) -> str:
    if v != "last" and not (v.isdigit() and int(v) >= 1):
        raise ValueError(v)
    return v


OPTIONS = {"steps": int, "hist": float, "eta": float, "guide": _guide, "w": float}


def parse_configs(text: str) -> list[dict]:
    """'full_sequence:0,pyramid:1:steps=16:hist=0.05' -> [{'mode': 'full_sequence', 'keep': 0}, {'mode': 'pyramid',
    'keep': 1, 'steps': 16, 'hist': 0.05}]; options left out take the run's defaults. A bad entry is a ValueError."""
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        mode, _, rest = item.partition(":")
        keep, *opts = rest.split(":")
        if mode not in MODES or not keep.isdigit():
            raise ValueError(f"--configs {item!r}: expected MODE:KEEP[:steps=N][:hist=F][:eta=F][:guide=N:w=F] with "
                             f"MODE one of {', '.join(MODES)} and KEEP >= 0")
        cfg = {"mode": mode, "keep": int(keep)}
        for o in opts:
            k, _, v = o.partition("=")
            try:
                cfg[k] = OPTIONS[k](v)
            except (KeyError, ValueError):
                raise ValueError(f"--configs {item!r}: bad option {o!r}; expected steps=N (N >= 1), hist=F (0 <= F < 1) "
                                 f"eta=F (F >= 0), guide=N (a checkpoint step, or last) or w=F (F >= 1)") from None
        if cfg.get("steps", 1) < 1 or not 0 <= cfg.get("hist", 0.0) < 1 or cfg.get("eta", 0.0) < 0:
            raise ValueError(f"--configs {item!r}: expected steps >= 1, 0 <= hist < 1, eta >= 0")
        if ("guide" in cfg) != ("w" in cfg) or cfg.get("w", 1.0) < 1:
            raise ValueError(f"--configs {item!r}: autoguidance takes both guide=N (a checkpoint step, or last) and "
                             "w=F (F >= 1)")
        out.append(cfg)
    if not out:
        raise ValueError("--configs: no sampler setting given")
    return out


def summary(res: dict, names=("model", "copy_last", "mean_frame", "blend")) -> dict:
    return {n: {k: round(float(res[f"{n}/{k}"]), 4) for k in KEYS if f"{n}/{k}" in res} for n in names}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True, help="a trained run directory (runs/wm/<name>)")
    ap.add_argument("--data", default="data/pusht64_smooth_tune", help="tuning episodes (generated if missing)")
    ap.add_argument("--episodes", type=int, default=40, help="episodes to generate when --data is missing")
    ap.add_argument("--episode-steps", type=int, default=150)
    ap.add_argument("--data-seed", type=int, default=7, help="generator seed of the tuning episodes (the evidence "
                    "data is seed 0)")
    ap.add_argument("--configs", default="full_sequence:0,full_sequence:1,pyramid:0,pyramid:1")
    ap.add_argument("--eval-windows", type=int, default=64)
    ap.add_argument("--rollout-episodes", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="runs/bench/wm_sampler_sweep/wm_sampler_sweep.json")
    args = ap.parse_args()
    try:
        configs = parse_configs(args.configs)
    except ValueError as e:
        ap.error(str(e))
    if args.data_seed == 0:
        ap.error("--data-seed 0: that is the evidence data's seed; tuning episodes must be other episodes")
    run = Path(args.run)
    if not (run / "checkpoints" / "weights_latest.json").exists():
        ap.error(f"--run {run}: no checkpoints/weights_latest in it (train it first)")
    torch.set_num_threads(args.threads)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    t0 = time.perf_counter()
    data = Path(args.data)
    if not (data / "states.pth").exists():
        print(f"generating {args.episodes} tuning episodes into {data} (seed {args.data_seed})", flush=True)
        generate_pusht(data, args.episodes, 64, args.episode_steps, workers=1, seed=args.data_seed,
                       show_progress=False)
    wm = load_world_model(run)
    cfg = replace(from_dict(TrainConfig, wm.train_cfg), data=str(data), val_fraction=0.0)
    # every tuning episode is scored; the action statistics are the run's
    _, ds = build_datasets(cfg, run / "action_stats.json")
    base = fit_baselines(ds.source, np.arange(len(ds.source)), cfg.frame_interval, max_lag=24)
    for c in configs:  # every guide loads before any scoring: a missing checkpoint stops the sweep at once
        if "guide" in c:
            try:
                name = "last.ckpt" if c["guide"] == "last" else f"step={c['guide']}.ckpt"
                c["_model"] = sampling_model(wm, str(run / "checkpoints" / name), c["w"])
            except CheckpointError as e:
                ap.error(f"guide={c['guide']}: {e}")
    rows = []
    for c in configs:
        t = time.perf_counter()
        model = c.pop("_model", wm.model)
        c = {"steps": cfg.sample_steps, "hist": 0.0, "eta": 0.0, "guide": None, "w": 1.0} | c
        print(f"scoring {c}", flush=True)
        smp = {"mode": c["mode"], "history_noise": c["hist"], "eta": c["eta"]}
        w = score_windows(model, wm.obj, ds, base, cfg.n_ctx, c["steps"], count=args.eval_windows, **smp, stlpips=False)
        ro = score_rollouts(model, wm.obj, ds, base, cfg.n_ctx, c["steps"], horizon=24,
                            max_episodes=args.rollout_episodes, keep=c["keep"], **smp, stlpips=False)
        targets = scorecard_targets(w, ro)
        rows.append({**c, "windows": summary(w), "rollouts": summary(ro),
                     "tee_at_rollout_frame_8": targets["tee_ink_at_rollout_frame_8_at_least_0.8"],
                     "targets_met": sorted(k for k, v in targets.items() if v["met"]),
                     "seconds": round(time.perf_counter() - t, 1)})
    best = max(rows, key=lambda r: r["rollouts"]["model"]["ssim"])
    res = {"benchmark": "wm_sampler_sweep", "run": run.name, "step": wm.step, "tuning_data": {
        "dir": str(data), "seed": args.data_seed, "episodes": len(ds.source)}, "sample_steps": cfg.sample_steps,
        "criterion": "highest rollout SSIM on the tuning episodes", "chosen": {k: best[k] for k in (
        "mode", "keep", "steps", "hist", "eta", "guide", "w")}, "configs": rows, "minutes": round((time.perf_counter() - t0) / 60, 2)}
    out = Path(args.out) if Path(args.out).is_absolute() else ROOT / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
