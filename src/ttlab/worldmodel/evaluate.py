"""`ttlab wm eval`: metrics JSON + GT-vs-prediction mp4 of a trained model on held-out windows.

Metrics are computed on predicted frames only (context excluded), always beside the copy-last-frame,
mid-gray and mean-training-frame baselines on the same frames, on a fixed seeded subset of the
validation split. ST-LPIPS (model and copy-last) runs from the weights its wheel ships; the other learned
metrics (LPIPS/FID/FVD) run only with local TorchScript weights given by path; the JSON says which were skipped
and why. Long-horizon rollouts live in `rollouts.py`; the PushT
object-level scorecard in `scorecard.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from ttlab.common.checkpoint import atomic_write_text
from ttlab.common.config import from_dict, parse_config
from ttlab.common.device import resolve_device
from ttlab.common.outdir import writable_dir
from ttlab.worldmodel.config import TrainConfig
from ttlab.worldmodel.diffusion import SamplerConfig, sample_window
from ttlab.worldmodel.metrics import LearnedMetrics, MetricWeights, frame_metrics, quantize
from ttlab.worldmodel.train import build_datasets, fixed_subset
from ttlab.worldmodel.visuals import side_by_side, write_mp4
from ttlab.worldmodel.weights import decode, load_world_model, run_codec, run_dir_of, sampling_model

SPLITS = ("val", "train")


@dataclass
class EvalConfig:
    """Evaluate a trained NanoWM on the validation split against the copy-last-frame baseline."""

    checkpoint: Path = Path("runs/wm/latest")
    """A run directory or a weights export stem (checkpoints/weights_latest)."""
    data: str = ""
    """Dataset (default: the one the model was trained on)."""
    split: str = "val"
    """Split to evaluate: val | train."""
    num_samples: int = 128
    """Windows in the fixed seeded subset (of the held-out episodes for split=val)."""
    batch_size: int = 16
    """Windows per sampling batch."""
    n_ctx: int = 1
    """Context frames (the rest of the window is predicted)."""
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    """How predictions are sampled (steps 0 = the run's own)."""
    metrics: MetricWeights = field(default_factory=MetricWeights)
    """Local weights for LPIPS / FID (Inception) / FVD (I3D)."""
    video_clips: int = 4
    """Clips in the GT-vs-prediction mp4 (0: no video)."""
    out: Path | None = None
    """Output directory (default: <run>/eval)."""
    ema: bool = True
    """Use the EMA weights."""
    quantize: bool = True
    """Round predictions to 8-bit values before scoring, as a saved frame would be (ground truth already is)."""
    seed: int = 0
    """Seed of the subset and the sampling noise."""
    device: str = "auto"
    """auto | cpu | cuda."""


def mean_train_frame(train_ds, seed: int = 0, windows: int = 256) -> torch.Tensor:
    """Mean frame (C, H, W) over every frame of a fixed seeded subset of training windows (model space)."""
    sub = fixed_subset(train_ds, windows, seed + 1)
    total = None
    for i in range(len(sub)):
        f = sub[i]["frames"].float().sum(0)  # (C, H, W)
        total = f if total is None else total + f
    return total / (len(sub) * train_ds.num_frames)


def evaluate(cfg: EvalConfig) -> dict:
    for flag, value, low in (("--video-clips", cfg.video_clips, 0), ("--num-samples", cfg.num_samples, 1),
                             ("--batch-size", cfg.batch_size, 1)):
        if value < low:
            raise ValueError(f"{flag} {value}: must be >= {low}")
    if cfg.split not in SPLITS:
        raise ValueError(f"--split {cfg.split!r}: expected one of {', '.join(SPLITS)}")
    cfg.sampler.check()
    dev = resolve_device(cfg.device)
    wm = load_world_model(cfg.checkpoint, dev, ema=cfg.ema)
    tc = from_dict(TrainConfig, wm.train_cfg)
    if not 1 <= cfg.n_ctx < tc.num_frames:
        raise ValueError(f"--n-ctx {cfg.n_ctx}: must be 1..{tc.num_frames - 1} (the model's window is "
                         f"{tc.num_frames} frames)")
    sp = cfg.sampler.resolve(tc.sample_steps, tc.diffusion.target)
    model = sampling_model(wm, sp.guide, sp.guidance, dev)
    out_dir = writable_dir("--out", cfg.out if cfg.out is not None else run_dir_of(cfg.checkpoint) / "eval")
    if cfg.data:
        tc = replace(tc, data=cfg.data)
    codec = run_codec(wm.train_cfg, dev)
    train_ds, val_ds = build_datasets(tc, run_dir_of(cfg.checkpoint) / "action_stats.json", codec)
    ds = {"val": val_ds, "train": train_ds}[cfg.split]
    # published fixed windows (e.g. Vid2World CSGO start indices) are scored all, in order; else a seeded subset
    sub = ds if getattr(ds, "fixed_windows", False) else fixed_subset(ds, cfg.num_samples, cfg.seed)
    dl = torch.utils.data.DataLoader(sub, batch_size=cfg.batch_size, shuffle=False)
    learned = LearnedMetrics(cfg.metrics, dev)
    # latents: the decoded mean latent, which approximates the mean frame
    mean_frame = decode(codec, mean_train_frame(train_ds, cfg.seed)[None, None].to(dev))[0, 0]  # (C, H, W)
    if cfg.quantize:
        mean_frame = quantize(mean_frame)
    g = torch.Generator(device=dev).manual_seed(cfg.seed)
    sums: dict[str, float] = {}
    n = 0
    vid_gt, vid_pred = [], []
    for batch in dl:
        x, a = batch["frames"].to(dev), batch["actions"].to(dev)
        pred = sample_window(model, wm.obj, x[:, :cfg.n_ctx], a, x.shape[1] - cfg.n_ctx, sp.steps, sp.mode,
                             sp.history_noise, clip=1.0 if codec is None else None, generator=g, eta=sp.eta)
        pp, gp = decode(codec, pred), decode(codec, x)
        if cfg.quantize:
            pp = quantize(pp)
        m = frame_metrics(pp, gp, cfg.n_ctx, mean_frame, per_lag=True)
        b = x.shape[0]
        for k, v in m.items():
            sums[k] = sums.get(k, 0.0) + v * b
        n += b
        learned.update(pp, gp, cfg.n_ctx)
        if sum(len(v) for v in vid_gt) < cfg.video_clips:
            vid_gt.append(gp[:cfg.video_clips].cpu())
            vid_pred.append(pp[:cfg.video_clips].cpu())
    res = {k: v / n for k, v in sums.items()}
    res.update(learned.compute())
    video = (write_mp4(out_dir / "gt_vs_pred.mp4", side_by_side(torch.cat(vid_gt)[:cfg.video_clips],
                                                                 torch.cat(vid_pred)[:cfg.video_clips]), fps=4)
             if cfg.video_clips > 0 else None)
    report = {"step": wm.step, "samples": n, "n_ctx": cfg.n_ctx, "steps": sp.steps, "mode": sp.mode,
              "history_noise": sp.history_noise, "eta": sp.eta, "guide": sp.guide or None, "guidance": sp.guidance,
              "metrics": res, "psnr_gain_over_copy_last_db": res["psnr"] - res["baseline_copy_last/psnr"],
              "skipped": learned.skipped, "video": None if video is None else str(video)}
    atomic_write_text(out_dir / "metrics.json", json.dumps(report, indent=2) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    print(json.dumps(evaluate(parse_config(EvalConfig, argv=argv, prog="ttlab wm eval")), indent=2))
    return 0
