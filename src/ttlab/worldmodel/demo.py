"""`ttlab demo` stage for the world model: PushT data -> small NanoWM on CPU -> held-out evaluation + rollout.

Budget: a few minutes on 2 cores (data ~20 s, training 300 steps, evaluation and rollouts ~1 min). The
stage says the model beats copying the last frame only when the measured numbers say so.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace
from pathlib import Path

from ttlab.worldmodel.data.pusht import generate_pusht
from ttlab.worldmodel.evaluate import EvalConfig, evaluate
from ttlab.worldmodel.model.nanowm import count_parameters
from ttlab.worldmodel.presets import tiny_pusht
from ttlab.worldmodel.rollouts import heldout_rollouts
from ttlab.worldmodel.train import train
from ttlab.worldmodel.weights import load_world_model


def run(out_dir: Path, device: str = "auto", episodes: int = 24, episode_steps: int = 120) -> str:

    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    data = out_dir / "pusht64"
    meta = data / "ttlab_pusht.json"
    fresh = not meta.exists() or json.loads(meta.read_text()).get("max_steps") != episode_steps
    gen = generate_pusht(data, num_episodes=episodes, resolution=64, max_steps=episode_steps, workers=2, seed=0,
                         show_progress=False, overwrite=True) if fresh else None
    shutil.rmtree(out_dir / "runs" / "wm" / "tiny_pusht", ignore_errors=True)  # the stage always trains afresh
    cfg = replace(tiny_pusht(), data=str(data), root=str(out_dir / "runs"), run_name="tiny_pusht", device=device,
                  val_fraction=0.15)
    tr = train(cfg)
    run_dir = Path(tr["run_dir"])
    ev = evaluate(EvalConfig(checkpoint=run_dir, num_samples=128, device=device, out=out_dir / "eval"))
    ro = heldout_rollouts(run_dir, horizon=24, device=device)
    ro.pop("_first_batch")
    m = ev["metrics"]
    gain = m["psnr"] - m["baseline_copy_last/psnr"]
    ro_gain = ro["psnr"] - ro["baseline_copy_last/psnr"]
    verdict = (f"The model **beats copy-last by {gain:.2f} dB**" if gain > 0 else
               f"The model **does not beat copy-last** ({-gain:.2f} dB below it)")
    ro_verdict = "beats" if ro_gain > 0 else "does not beat"

    def vs_mean(res: dict, model_key: str, mean_key: str) -> str:
        beats_p = res[model_key + "psnr"] > res[mean_key + "psnr"]
        beats_s = res[model_key + "ssim"] > res[mean_key + "ssim"]
        if beats_p and beats_s:
            return "**beats the mean training frame** in PSNR and SSIM"
        return (f"**does not beat the mean training frame** in {'PSNR and SSIM' if not (beats_p or beats_s) else ('SSIM' if beats_p else 'PSNR')} "
                f"(PSNR {res[model_key + 'psnr']:.2f} vs {res[mean_key + 'psnr']:.2f} dB, SSIM "
                f"{res[model_key + 'ssim']:.3f} vs {res[mean_key + 'ssim']:.3f})")

    mean_w = vs_mean(m, "", "baseline_mean_frame/")
    mean_r = vs_mean(ro, "", "baseline_mean_frame/")
    d = cfg.diffusion
    lags = ", ".join(f"{m[f'psnr/lag{k}']:.2f} vs {m[f'baseline_copy_last/psnr/lag{k}']:.2f}" for k in (1, 2, 3))
    return (
        (f"Generated {gen['episodes']} PushT episodes at 64x64 in {gen['seconds']:.0f} s (`{data}`); " if gen else
         f"Reused the PushT data in `{data}`; ") + "trained NanoWM "
        f"({count_parameters(load_world_model(run_dir).model) / 1e6:.1f}M parameters: {cfg.hidden} wide, {cfg.depth} "
        f"blocks, {cfg.patch_size}x{cfg.patch_size} patches, {'residual ' if d.residual else ''}{d.target}-target from "
        f"{d.timestep_sampling} levels, {cfg.sample_steps}-step sampler) for {tr['steps']} of {cfg.max_steps} steps "
        f"(batch {cfg.batch_size}) in {tr['seconds']:.0f} s on {device}"
        f"{' (stopped by the wall-clock guard)' if tr['stopped_by_wall_clock'] else ''} (`{run_dir}`).\n\n"
        f"{ev['samples']} windows from held-out episodes, 1 context + 3 predicted frames every "
        f"{cfg.frame_interval} steps, metrics on the predicted frames only: PSNR **{m['psnr']:.2f} dB** (SSIM "
        f"{m['ssim']:.3f}) vs copy-last-frame **{m['baseline_copy_last/psnr']:.2f} dB** (SSIM "
        f"{m['baseline_copy_last/ssim']:.3f}) and mean training frame {m['baseline_mean_frame/psnr']:.2f} dB; per lag "
        f"(model vs copy-last) {lags}. {verdict}; on these windows it {mean_w}. Video `{ev['video']}`.\n\n"
        f"24-frame sliding-window rollouts of {ro['episodes']} held-out episodes: PSNR {ro['psnr']:.2f} dB vs "
        f"copy-last {ro['baseline_copy_last/psnr']:.2f} dB (mean frame {ro['baseline_mean_frame/psnr']:.2f} dB): the "
        f"model {ro_verdict} copy-last and {mean_r}. Stage wall time {time.perf_counter() - t0:.0f} s. A few CPU "
        f"minutes of a regressor's training; `python benchmarks/wm_evidence.py` is the measured run of the generative "
        f"model, scored on objects too."
    )
