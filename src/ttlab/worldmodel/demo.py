"""`ttlab demo` stage for the world model: PushT data -> tiny NanoWM on CPU -> rollout video + PSNR.

Budget: under 4 minutes on 2 cores (data ~30 s, training 2.5 min wall-clock cap, evaluation/rollout ~30 s).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path


def run(out_dir: Path, device: str = "auto", train_minutes: float = 2.5, episodes: int = 20) -> str:
    from ttlab.worldmodel.data.pusht import generate_pusht
    from ttlab.worldmodel.evaluate import EvalConfig, RolloutConfig, evaluate, rollout_run
    from ttlab.worldmodel.model.nanowm import count_parameters
    from ttlab.worldmodel.presets import tiny_pusht
    from ttlab.worldmodel.train import load_world_model, train

    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    data = out_dir / "pusht64"
    if not (data / "states.pth").exists():
        gen = generate_pusht(data, num_episodes=episodes, resolution=64, max_steps=80, workers=2, seed=0,
                             show_progress=False)
    else:
        gen = None  # data from an earlier demo run is reused
    cfg = replace(tiny_pusht(), data=str(data), root=str(out_dir / "runs"), run_name="tiny_pusht", device=device,
                  max_minutes=train_minutes, progress_bar=False, val_every=10_000, val_fraction=0.15,
                  resume=(out_dir / "runs" / "wm" / "tiny_pusht").exists())
    tr = train(cfg)
    run_dir = Path(tr["run_dir"])
    ev = evaluate(EvalConfig(weights=run_dir, num_samples=16, steps=10, device=device, out=out_dir / "eval"))
    ro = rollout_run(RolloutConfig(weights=run_dir, horizon=24, steps=10, device=device, out=out_dir / "rollout"))
    m = ev["metrics"]
    d = cfg.diffusion
    return (
        (f"Generated {gen['episodes']} PushT episodes at 64x64 in {gen['seconds']:.0f} s (`{data}`); " if gen else
         f"Reused the PushT data in `{data}`; ") + "trained the tiny "
        f"NanoWM ({cfg.hidden} wide, {cfg.depth} blocks, {cfg.patch_size}x{cfg.patch_size} patches, {d.target}-target, "
        f"{d.timestep_sampling} levels, additive actions) for {tr['steps']} steps in {tr['seconds']:.0f} s on {device} "
        f"(`{run_dir}`).\n\n"
        f"{cfg.num_frames}-frame windows, 1 context frame, {ev['samples']} fixed validation windows, 10 DDIM steps, "
        f"metrics on the predicted frames only: PSNR **{m['psnr']:.2f} dB** (SSIM {m['ssim']:.3f}) vs "
        f"copy-last-frame **{m['baseline_copy_last/psnr']:.2f} dB** (SSIM {m['baseline_copy_last/ssim']:.3f}), "
        f"mean training frame {m['baseline_mean_frame/psnr']:.2f} dB (SSIM {m['baseline_mean_frame/ssim']:.3f}), "
        f"mid-gray frame {m['baseline_gray/psnr']:.2f} dB; video `{ev['video']}`.\n\n"
        f"24-frame sliding-window rollout of episode 0: PSNR {ro.get('psnr', float('nan')):.2f} dB vs copy-last "
        f"{ro.get('baseline_copy_last/psnr', float('nan')):.2f} dB; video `{ro['video']}`. "
        f"Stage wall time {time.perf_counter() - t0:.0f} s. This is a smoke test of the whole pipeline: a "
        f"{count_parameters(load_world_model(run_dir).model) / 1e6:.1f}M-parameter "
        f"model trained for {train_minutes:g} CPU minutes, not a measure of what NanoWM reaches with real training."
    )
