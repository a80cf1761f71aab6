"""`ttlab demo` stage for the world model: PushT data -> tiny NanoWM on CPU -> rollout video + PSNR.

Budget: about 5 minutes on 2 cores (data ~30 s, training 2.5 min wall-clock cap, evaluation/rollout ~1 min).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path


def run(out_dir: Path, device: str = "auto", train_minutes: float = 2.5, episodes: int = 20) -> str:
    from ttlab.worldmodel.data.pusht import generate_pusht
    from ttlab.worldmodel.evaluate import EvalConfig, RolloutConfig, evaluate, rollout_run
    from ttlab.worldmodel.presets import tiny_pusht
    from ttlab.worldmodel.train import train

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
    return (
        (f"Generated {gen['episodes']} PushT episodes at 64x64 in {gen['seconds']:.0f} s (`{data}`); " if gen else
         f"Reused the PushT data in `{data}`; ") + "trained the tiny "
        f"NanoWM ({cfg.hidden} wide, {cfg.depth} blocks, 8x8 patches, v-target, additive actions) for "
        f"{tr['steps']} steps in {tr['seconds']:.0f} s on {device} (`{run_dir}`).\n\n"
        f"4-frame windows, 1 context frame, {ev['samples']} fixed validation windows, 10 DDIM steps: "
        f"PSNR **{m['psnr']:.2f} dB** vs copy-last-frame **{m['baseline_copy_last/psnr']:.2f} dB** "
        f"(SSIM {m['ssim']:.3f} vs {m['baseline_copy_last/ssim']:.3f}); video `{ev['video']}`.\n\n"
        f"24-frame sliding-window rollout of episode 0: PSNR {ro.get('psnr', float('nan')):.2f} dB vs copy-last "
        f"{ro.get('baseline_copy_last/psnr', float('nan')):.2f} dB; video `{ro['video']}`. "
        f"Stage wall time {time.perf_counter() - t0:.0f} s. A tiny CPU model for 2.5 minutes is a smoke test, "
        f"not the README's H100 result."
    )
