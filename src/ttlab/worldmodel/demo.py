"""`ttlab demo` stage for the world model: PushT data -> small NanoWM on CPU -> the scorecard on held-out episodes.

Budget: about 6 minutes on 2 cores (data ~20 s, training 300 steps with a 5-minute guard, scoring ~1 min).
The model is scored (`ttlab.worldmodel.scorecard`) beside every cheap predictor: copy-last, the mean training
frame and the best fitted blend of the two, in PSNR and SSIM, on held-out windows (lags 1-3) and on 24-frame
rollouts, with the T block's ink kept. The section says plainly which of them the model beats and which it
does not; a strip PNG and a rollout GIF show it.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from ttlab.common.heartbeat import step
from ttlab.common.stage_report import StageReport, demo_threads, picture
from ttlab.worldmodel.data.pusht import generate_pusht
from ttlab.worldmodel.model.nanowm import count_parameters
from ttlab.worldmodel.presets import tiny_pusht
from ttlab.worldmodel.scorecard import fit_baselines, score_rollouts, score_windows
from ttlab.worldmodel.train import build_datasets, train
from ttlab.worldmodel.visuals import rollout_gif, strip_png
from ttlab.worldmodel.weights import load_world_model

HORIZON = 24
"""Rollout frames (the blend is fitted for lags 1..HORIZON - n_ctx: an episode of 120 raw steps at interval 5 has no
lag 24)."""
PREDICTORS = (("model", "the model"), ("copy_last", "copy-last"), ("mean_frame", "mean frame"),
              ("blend", "blend (fitted)"))


def verdict(res: dict, rival: str) -> str:
    """'beats' | 'does not beat' | 'beats in PSNR only' | 'beats in SSIM only' (pure)."""
    p = res["model/psnr"] > res[f"{rival}/psnr"]
    s = res["model/ssim"] > res[f"{rival}/ssim"]
    return "beats" if p and s else "does not beat" if not (p or s) else f"beats in {'PSNR' if p else 'SSIM'} only"


def score_table(w: dict, ro: dict) -> list[str]:
    """Markdown table: predictor x (windows, rollouts) x (PSNR, SSIM), the T's ink kept, and the rollouts' ST-LPIPS
    where it was scored (lower is closer)."""
    stl = "model/stlpips" in ro
    lines = ["| predictor | windows PSNR (dB) | windows SSIM | rollouts PSNR (dB) | rollouts SSIM | T ink kept, rollouts |"
             + (" rollouts ST-LPIPS (lower is closer) |" if stl else ""),
             "|---|---|---|---|---|---|" + ("---|" if stl else "")]
    for key, name in PREDICTORS:
        b = "**" if key == "model" else ""
        lines.append(f"| {b}{name}{b} | {w[f'{key}/psnr']:.2f} | {w[f'{key}/ssim']:.3f} | {ro[f'{key}/psnr']:.2f} | "
                     f"{ro[f'{key}/ssim']:.3f} | {ro.get(f'{key}/tee_ink_ratio', float('nan')):.2f} |"
                     + (f" {ro.get(f'{key}/stlpips', float('nan')):.3f} |" if stl else ""))
    return lines


def run(out_dir: Path, device: str = "auto", episodes: int = 24, episode_steps: int = 120) -> StageReport:
    out_dir = Path(out_dir)
    summary_dir = out_dir.parent
    t0 = time.perf_counter()
    data = out_dir / "pusht64"
    meta = data / "ttlab_pusht.json"
    fresh = not meta.exists() or json.loads(meta.read_text()).get("max_steps") != episode_steps
    step(f"generating {episodes} PushT episodes" if fresh else "reusing the PushT data", 0.02)
    gen = generate_pusht(data, num_episodes=episodes, resolution=64, max_steps=episode_steps, workers=2, seed=0,
                         show_progress=False, overwrite=True) if fresh else None
    shutil.rmtree(out_dir / "runs" / "wm" / "tiny_pusht", ignore_errors=True)  # the stage always trains afresh
    cfg = replace(tiny_pusht(), data=str(data), root=str(out_dir / "runs"), run_name="tiny_pusht", device=device,
                  val_fraction=0.15, time_limit="5m", threads=demo_threads())
    step(f"training NanoWM for {cfg.max_steps} steps (guard {cfg.time_limit})", 0.1)
    tr = train(cfg)
    run_dir = Path(tr["run_dir"])
    wm = load_world_model(run_dir)
    step("fitting copy-last / mean-frame / blend on training episodes", 0.75)
    _, val_ds = build_datasets(cfg, run_dir / "action_stats.json")
    train_eps = np.setdiff1d(np.arange(len(val_ds.source)), val_ds.episodes)
    base = fit_baselines(val_ds.source, train_eps, cfg.frame_interval, max_lag=HORIZON - cfg.n_ctx)
    step("scoring held-out windows", 0.8)
    w = score_windows(wm.model, wm.obj, val_ds, base, cfg.n_ctx, cfg.sample_steps, count=128)
    step("scoring 24-frame held-out rollouts", 0.9)
    ro = score_rollouts(wm.model, wm.obj, val_ds, base, cfg.n_ctx, cfg.sample_steps, horizon=HORIZON, max_episodes=8)
    x, p1, _, po = w.pop("_first")
    gt, rp, rpo = ro.pop("_first")
    step("drawing the strip and the rollout GIF", 0.97)
    blend = [1.0] * cfg.n_ctx + base.blend_alpha[:gt.shape[1] - cfg.n_ctx]
    blend_row = torch.tensor(blend).view(-1, 1, 1, 1)  # (T, 1, 1, 1)
    last = gt[0, cfg.n_ctx - 1:cfg.n_ctx]
    strip = strip_png(out_dir / "strip.png", [
        ("win truth", x[0]), ("win model", p1[0]), ("win other act", po[0]),
        ("roll truth", gt[0]), ("roll model", rp[0]), ("roll other act", rpo[0]),
        ("copy-last", last.expand_as(gt[0])), ("mean frame", base.mean_frame.expand_as(gt[0])),
        ("blend", (last * blend_row + base.mean_frame * (1 - blend_row)).float())])
    n = min(3, gt.shape[0])
    gif = rollout_gif(out_dir / "rollouts.gif", [("truth", gt[:n]), ("model", rp[:n]), ("other actions", rpo[:n])])

    vs = {k: (verdict(w, k), verdict(ro, k)) for k in ("copy_last", "mean_frame", "blend")}
    said = "; ".join(f"{name}: {vs[k][0]} on windows, {vs[k][1]} on rollouts"
                     for k, name in (("copy_last", "copy-last"), ("mean_frame", "the mean frame"), ("blend", "the blend")))
    beats_mean = vs["mean_frame"] == ("beats", "beats")
    plain = ("The model **beats the mean frame** on windows and rollouts, in PSNR and SSIM." if beats_mean else
             "The model **does not beat the mean frame** everywhere (see the table): a few CPU minutes of this "
             "small model do not make a world model that beats every cheap predictor.")
    d = cfg.diffusion
    lag = "; ".join(f"lag {k + 1}: {a:.2f} vs copy-last {b:.2f} dB" for k, (a, b) in
                    enumerate(zip(w["model/psnr/by_lag"], w["copy_last/psnr/by_lag"], strict=True)))
    act_gap = w["model/psnr"] - w["model_other_actions/psnr"]
    body = "\n".join([
        (f"Generated {gen['episodes']} PushT episodes at 64x64 in {gen['seconds']:.0f} s; " if gen else
         "Reused the PushT data; ") +
        f"trained NanoWM ({count_parameters(wm.model) / 1e6:.1f}M parameters: {cfg.hidden} wide, {cfg.depth} blocks, "
        f"{cfg.patch_size}x{cfg.patch_size} patches, {'residual ' if d.residual else ''}{d.target}-target from "
        f"{d.timestep_sampling} levels, a {cfg.sample_steps}-step sampler: a regressor of the next frames, not a "
        f"generative model) for {tr['steps']} of {cfg.max_steps} steps (batch {cfg.batch_size}) in "
        f"{tr['seconds']:.0f} s{' (stopped by the wall-clock guard)' if tr['stopped_by_wall_clock'] else ''}.",
        "",
        f"Scored on held-out episodes: {w['count']} windows ({cfg.n_ctx} context + {w['predicted']} predicted frames "
        f"every {cfg.frame_interval} steps) and {ro['episodes']} 24-frame sliding-window rollouts; the blend is "
        "a x last + (1 - a) x mean with a fitted per lag on training episodes:",
        "",
        *score_table(w, ro),
        "",
        f"Against each: {said}. {plain} Per lag on windows: {lag}. True actions vs another episode's on windows: "
        f"{act_gap:+.2f} dB.",
        "",
        f"{picture(strip, summary_dir, 'strip: truth, model, other actions, cheap predictors')}",
        "",
        f"{picture(gif, summary_dir, 'rollouts: truth | model | another episode actions')}",
        "",
        f"Stage wall time {time.perf_counter() - t0:.0f} s. `python benchmarks/wm_evidence.py` is the measured run "
        "of the generative model (45 CPU minutes), scored on objects too.",
    ])
    figure = (f"windows PSNR {w['model/psnr']:.2f} dB vs copy-last {w['copy_last/psnr']:.2f}, mean frame "
              f"{w['mean_frame/psnr']:.2f}, blend {w['blend/psnr']:.2f}; rollouts {ro['model/psnr']:.2f} vs "
              f"{ro['copy_last/psnr']:.2f} / {ro['mean_frame/psnr']:.2f} / {ro['blend/psnr']:.2f}; "
              f"{'beats' if beats_mean else 'does not beat'} the mean frame")
    return StageReport(shows="an action-conditioned world model against copy-last, the mean frame and their blend",
                       figure=figure, body=body)
