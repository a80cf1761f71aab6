"""`ttlab wm train-codec`: train the in-project KL autoencoder on the frames of a dataset.

Frames of the train split (by episode, the same split as `WindowDataset`) are held in memory as uint8;
each step takes a random batch. Reconstruction PSNR on the val split is logged to TensorBoard under
`runs/wm/<run>/` and the codec is saved as `runs/wm/<run>/codec.{json,safetensors}` with its latent
`scale` (1 / std of train latents) measured at the end.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ttlab.common.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from ttlab.common.config import parse_config
from ttlab.common.device import resolve_device, seed_everything
from ttlab.common.logging import Logger, progress
from ttlab.common.runs import make_run_dir
from ttlab.worldmodel.codecs.autoencoder import AEConfig, KLAutoencoder, psnr
from ttlab.worldmodel.data.episodes import drop_bad
from ttlab.worldmodel.data.sources import open_source
from ttlab.worldmodel.data.windows import split_episodes, to_model_frames


@dataclass
class CodecTrainConfig:
    """Train the in-project KL autoencoder."""

    data: Path = Path("data/pusht")
    """dataset directory (any supported format)"""
    format: str = "auto"
    """dataset format: auto, dino_wm, lerobot, csgo"""
    steps: int = 2000
    """optimizer steps"""
    batch_size: int = 32
    """frames per batch"""
    lr: float = 1e-3
    """AdamW learning rate"""
    kl_weight: float = 1e-6
    """weight of the KL term"""
    latent_channels: int = 4
    """latent channels"""
    widths: tuple[int, ...] = field(default_factory=lambda: (32, 64))
    """conv widths (each halves the resolution)"""
    max_frames: int = 20000
    """at most this many frames held in memory (evenly subsampled)"""
    val_fraction: float = 0.1
    """fraction of episodes held out for the PSNR measurement"""
    eval_every: int = 200
    """steps between val PSNR measurements"""
    seed: int = 0
    """random seed"""
    device: str = "auto"
    """auto, cpu or cuda"""
    run_name: str | None = None
    """run directory name under runs/wm/ (default: a timestamp)"""
    root: Path = Path("runs")
    """root of run directories"""
    wandb: bool = False
    """also log to Weights & Biases"""
    skip_bad: bool = False
    """skip bad episodes (and report how many) instead of stopping at the first"""
    checkpoint_every: int = 500
    """steps between checkpoints (checkpoints/latest: model, optimizer, schedule, step, RNG)"""
    resume: bool = False
    """continue runs/wm/<run_name> from checkpoints/latest"""


def presets() -> dict:
    return {
        "debug": lambda: CodecTrainConfig(steps=4, batch_size=4, widths=(8, 16), eval_every=2, max_frames=64),
        "pusht64": lambda: CodecTrainConfig(steps=3000, batch_size=32),
    }


def collect_frames(source, episodes: np.ndarray, max_frames: int) -> np.ndarray:
    """uint8 (N, H, W, 3) frames of `episodes`, evenly subsampled to at most `max_frames`."""
    per = max(1, max_frames // max(len(episodes), 1))
    out = []
    for e in episodes.tolist():
        t = source.length(e)
        idx = np.unique(np.linspace(0, t - 1, min(t, per)).round().astype(np.int64))
        out.append(source.frames(e, idx))
    return np.concatenate(out)[:max_frames]


def train_codec(cfg: CodecTrainConfig, show_progress: bool | None = None) -> dict:

    seed_everything(cfg.seed)
    device = resolve_device(cfg.device)
    src, skipped = drop_bad(open_source(cfg.data, cfg.format), cfg.skip_bad) if cfg.skip_bad else (
        open_source(cfg.data, cfg.format), [])
    train_eps, val_eps = split_episodes(len(src), cfg.val_fraction, cfg.seed)
    if len(val_eps) == 0:
        val_eps = train_eps[:1]
    train = torch.from_numpy(collect_frames(src, train_eps, cfg.max_frames))  # (N, H, W, 3) uint8
    val = to_model_frames(collect_frames(src, val_eps, 256)).to(device)  # (V, 3, H, W)
    if cfg.resume and not cfg.run_name:
        raise ValueError("--resume needs --run-name (the run to continue)")
    run = make_run_dir("wm", cfg, cfg.run_name, cfg.root, resume=cfg.resume)
    log = Logger(run.path, wandb=cfg.wandb, config=cfg)
    model = KLAutoencoder(AEConfig(cfg.latent_channels, tuple(cfg.widths))).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(cfg.steps, 1), eta_min=cfg.lr * 0.1)
    gen = torch.Generator().manual_seed(cfg.seed)
    t0 = time.perf_counter()
    val_psnr = float("nan")
    start = 1
    if cfg.resume and run.latest is not None:
        ck = load_checkpoint(run.latest)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        gen.set_state(ck["generator"])
        set_rng_state(ck["rng"])
        start = int(ck["step"]) + 1

    def save(step: int) -> None:
        save_checkpoint(run.checkpoints / "latest", {
            "model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
            "generator": gen.get_state(), "rng": rng_state(), "step": step})

    def evaluate() -> torch.Tensor:
        model.eval()
        with torch.no_grad():
            rec = torch.cat([model.decode(model.encode(v)) for v in val.split(64)])  # (V, 3, H, W)
        model.train()
        return psnr(rec, val)

    with progress(cfg.steps, "train codec", disable=None if show_progress is None else not show_progress) as bar:
        bar.advance(start - 1)
        for step in range(start, cfg.steps + 1):
            idx = torch.randint(0, train.shape[0], (cfg.batch_size,), generator=gen)
            x = to_model_frames(train[idx].numpy()).to(device, non_blocking=True)  # (B, 3, H, W)
            loss, parts = model.loss(x, cfg.kl_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            bar.advance(1)
            if step % cfg.eval_every == 0 or step == cfg.steps:
                vals = log.scalars({"loss/total": loss.detach(), **parts, "val/psnr": evaluate(),
                                    "charts/lr": sched.get_last_lr()[0]}, step)  # sync point: log interval
                val_psnr = vals["val/psnr"]
                bar.set(text=f"psnr {val_psnr:.2f} dB")
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                save(step)
    model.eval()
    with torch.no_grad():
        probe = to_model_frames(train[: min(512, train.shape[0])].numpy()).to(device)
        z = torch.cat([model.posterior(p)[0] for p in probe.split(64)])  # (n, C', h, w)
        model.scale = float(1.0 / z.std().clamp_min(1e-6))
    stem = run.path / "codec"
    model.cpu().save(stem)
    log.close()
    return {"run": str(run.path), "checkpoint": str(stem), "val_psnr_db": val_psnr, "scale": model.scale,
            "train_frames": int(train.shape[0]), "val_frames": int(val.shape[0]), "steps": cfg.steps,
            "seconds": time.perf_counter() - t0, "skipped": len(skipped)}


def main(argv: list[str]) -> int:
    cfg = parse_config(CodecTrainConfig, presets(), argv, prog="ttlab wm train-codec")

    out = train_codec(cfg)
    print(json.dumps(out))
    return 0
