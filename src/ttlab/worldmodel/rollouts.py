"""`ttlab wm rollout`: a trained model rolled out far beyond its training clip with a sliding window, from a
start clip and an action file (or an episode's own); and `heldout_rollouts`, the same from every held-out
episode scored against copy-last and the mean training frame.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ttlab.common.config import from_dict, parse_config
from ttlab.common.device import resolve_device
from ttlab.common.outdir import writable_dir
from ttlab.worldmodel.config import TrainConfig
from ttlab.worldmodel.data.windows import ActionStats, to_model_frames, window_actions
from ttlab.worldmodel.diffusion import SamplerConfig, rollout
from ttlab.worldmodel.evaluate import mean_train_frame
from ttlab.worldmodel.metrics import psnr, quantize, ssim
from ttlab.worldmodel.train import build_datasets, open_episodes
from ttlab.worldmodel.visuals import side_by_side, to_uint8, write_mp4
from ttlab.worldmodel.weights import decode, load_world_model, run_codec, run_dir_of, sampling_model


@dataclass
class RolloutConfig:
    """Roll a trained NanoWM out far beyond its training clip with a sliding window."""

    checkpoint: Path = Path("runs/wm/latest")
    """A run directory or a weights export stem."""
    actions: Path | None = None
    """Raw actions .npy (T, A) per raw step (the dataset's layout); default: the episode's own actions."""
    start: Path | None = None
    """Start frames .npy uint8 (Fs, H, W, 3); default: the first frames of `episode`."""
    episode: int = 0
    """Episode of the training dataset to take the start clip (and ground truth) from."""
    horizon: int = 32
    """Frames to produce in total (start frames included)."""
    n_ctx: int = 1
    """Context frames kept by the sliding window."""
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    """How each window is sampled (steps 0 = the run's own)."""
    out: Path | None = None
    """Output directory (default: <run>/rollout)."""
    seed: int = 0
    """Sampling seed."""
    device: str = "auto"
    """auto | cpu | cuda."""


def frame_actions(raw: np.ndarray, mean: np.ndarray, std: np.ndarray, interval: int, frames: int) -> np.ndarray:
    """Raw actions (T, A) -> per-frame conditioning (frames, A * interval), normalised and laid out as a training
    window's (`window_actions` from raw step 0: row 0 zeros, row k the `interval` actions before frame k)."""
    need = (frames - 1) * interval
    if raw.ndim != 2 or raw.shape[1] != mean.shape[0]:
        raise ValueError(f"actions: expected shape (T, {mean.shape[0]}), got {raw.shape}")
    if raw.shape[0] < need:
        raise ValueError(f"actions: {raw.shape[0]} raw steps, need >= {need} for {frames} frames x interval {interval}")
    return window_actions(ActionStats(mean, std).normalize(raw), 0, frames, interval)  # (frames, A * interval)


def load_npy(flag: str, path: Path) -> np.ndarray:
    """An array from a .npy file given by `flag`; an unreadable file is a ValueError naming the flag and file."""
    try:
        return np.load(path)
    except (ValueError, OSError, EOFError) as e:
        raise ValueError(f"{flag} {path}: not a readable .npy array ({e})") from None


def rollout_run(cfg: RolloutConfig) -> dict:
    if cfg.horizon <= cfg.n_ctx:
        raise ValueError(f"--horizon {cfg.horizon}: must exceed --n-ctx {cfg.n_ctx} (it counts the start frames)")
    cfg.sampler.check()
    dev = resolve_device(cfg.device)
    wm = load_world_model(cfg.checkpoint, dev)
    tc = from_dict(TrainConfig, wm.train_cfg)
    codec = run_codec(wm.train_cfg, dev)
    iv = tc.frame_interval
    sp = cfg.sampler.resolve(tc.sample_steps, tc.diffusion.target)
    model = sampling_model(wm, sp.guide, sp.guidance, dev)
    gt = None
    if cfg.actions is None or cfg.start is None:
        src = open_episodes(tc)
        if not 0 <= cfg.episode < len(src):
            raise ValueError(f"--episode {cfg.episode}: the dataset has {len(src)} episodes")
        raw_actions = src.actions(cfg.episode)
        T = src.length(cfg.episode)
        idx = np.arange(0, T, iv)[:cfg.horizon]
        if src.is_latent:
            raise ValueError("rollout from a latent dataset needs --start frames (pixels)")
        gt = to_model_frames(src.frames(cfg.episode, idx))  # (H', 3, H, W)
    if cfg.actions is not None:
        raw_actions = load_npy("--actions", cfg.actions).astype(np.float32)
    horizon = min(cfg.horizon, raw_actions.shape[0] // iv + 1)
    if cfg.start is None:
        start = gt[:cfg.n_ctx]
    else:
        frames0 = load_npy("--start", cfg.start)
        if frames0.ndim != 4 or frames0.shape[-1] != 3 or frames0.shape[0] < cfg.n_ctx:
            raise ValueError(f"--start {cfg.start}: expected frames (Fs >= --n-ctx {cfg.n_ctx}, H, W, 3), "
                             f"got shape {frames0.shape}")
        start = to_model_frames(frames0)[:cfg.n_ctx]
    acts = torch.from_numpy(frame_actions(raw_actions, wm.action_mean, wm.action_std, iv, horizon))[None].to(dev)
    x0 = start[None].to(dev)  # (1, n_ctx, 3, H, W)
    if codec is not None:
        x0 = codec.encode(x0[0])[None]
    out_dir = writable_dir("--out", cfg.out if cfg.out is not None else run_dir_of(cfg.checkpoint) / "rollout")
    g = torch.Generator(device=dev).manual_seed(cfg.seed)
    out = rollout(model, wm.obj, x0, acts, window=tc.num_frames, n_ctx=cfg.n_ctx, n_steps=sp.steps,
                  mode=sp.mode, history_noise=sp.history_noise, clip=1.0 if codec is None else None, generator=g,
                  eta=sp.eta)
    frames = decode(codec, out)[0].cpu()  # (horizon, 3, H, W)
    res: dict = {"frames": int(frames.shape[0]), "window": tc.num_frames, "n_ctx": cfg.n_ctx}
    if gt is not None and gt.shape[0] >= frames.shape[0]:
        g_ = gt[:frames.shape[0]]
        res["psnr"] = float(psnr(frames[cfg.n_ctx:], g_[cfg.n_ctx:]).mean())
        res["baseline_copy_last/psnr"] = float(psnr(g_[cfg.n_ctx - 1:cfg.n_ctx].expand_as(g_[cfg.n_ctx:]),
                                                    g_[cfg.n_ctx:]).mean())
        video = side_by_side(g_[None], frames[None])
    else:
        video = to_uint8(frames)
    res["video"] = str(write_mp4(out_dir / "rollout.mp4", video, fps=8))
    return res


def rollout_main(argv: list[str] | None = None) -> int:
    print(json.dumps(rollout_run(parse_config(RolloutConfig, argv=argv, prog="ttlab wm rollout")), indent=2))
    return 0


def heldout_rollouts(weights: str | Path, horizon: int = 24, n_ctx: int = 1, steps: int = 0,
                     mode: str = "full_sequence", max_episodes: int = 64, batch_size: int = 16, seed: int = 0,
                     device: str = "cpu", quantize_pred: bool = True) -> dict:
    """Sliding-window rollouts of `horizon` frames from the first frame(s) of every held-out episode long
    enough (up to `max_episodes`), driven by the episode's own actions, scored on the generated frames
    against copying the last context frame and against the mean training frame, with per-frame curves.

    Returns {"episodes", "horizon", "psnr", "ssim", "baseline_copy_last/psnr", ..., "<key>/by_frame": [..]}
    where by_frame[k] is frame n_ctx + k of the rollout averaged over episodes.
    """
    dev = resolve_device(device)
    wm = load_world_model(weights, dev)
    tc = from_dict(TrainConfig, wm.train_cfg)
    steps = steps if steps > 0 else tc.sample_steps
    codec = run_codec(wm.train_cfg, dev)
    train_ds, val_ds = build_datasets(tc, run_dir_of(Path(weights)) / "action_stats.json", codec)
    src, iv = val_ds.source, tc.frame_interval
    if src.is_latent:
        raise ValueError("heldout_rollouts needs a pixel dataset (ground truth frames)")
    need = (horizon - 1) * iv + 1
    eps = [int(e) for e in val_ds.episodes if src.length(int(e)) >= need][:max_episodes]
    if not eps:
        raise ValueError(f"no held-out episode has the {need} raw steps a {horizon}-frame rollout at interval {iv} needs")
    mean_frame = decode(codec, mean_train_frame(train_ds, seed)[None, None].to(dev))[0, 0]  # (C, H, W)
    if quantize_pred:
        mean_frame = quantize(mean_frame)
    g = torch.Generator(device=dev).manual_seed(seed)
    per: dict[str, list[torch.Tensor]] = {}
    first: tuple[torch.Tensor, torch.Tensor] | None = None
    for i in range(0, len(eps), batch_size):
        chunk = eps[i:i + batch_size]
        gt = torch.stack([to_model_frames(src.frames(e, np.arange(horizon) * iv)) for e in chunk]).to(dev)
        acts = torch.stack([torch.from_numpy(frame_actions(src.actions(e), wm.action_mean, wm.action_std, iv, horizon))
                            for e in chunk]).to(dev)  # (B, horizon, A * iv)
        start = gt[:, :n_ctx]
        if codec is not None:
            start = codec.encode(start.flatten(0, 1)).reshape(len(chunk), n_ctx, *codec.encode(start[:1, 0]).shape[1:])
        out = rollout(wm.model, wm.obj, start, acts, window=tc.num_frames, n_ctx=n_ctx, n_steps=steps, mode=mode,
                      clip=1.0 if codec is None else None, generator=g)
        pred = decode(codec, out)
        if quantize_pred:
            pred = quantize(pred)
        pred[:, :n_ctx] = gt[:, :n_ctx]
        t = gt[:, n_ctx:]  # (B, H - n_ctx, C, H, W)
        cands = {"": pred[:, n_ctx:], "baseline_copy_last/": gt[:, n_ctx - 1:n_ctx].expand_as(t),
                 "baseline_mean_frame/": mean_frame.expand_as(t)}
        for name, p in cands.items():
            per.setdefault(name + "psnr", []).append(psnr(p, t).cpu())
            per.setdefault(name + "ssim", []).append(ssim(p, t).cpu())
        if first is None:
            first = (gt.cpu(), pred.cpu())
    res: dict = {"episodes": len(eps), "horizon": horizon, "n_ctx": n_ctx, "steps": steps, "frame_interval": iv}
    for k, v in per.items():
        v = torch.cat(v)  # (episodes, horizon - n_ctx)
        res[k] = float(v.mean())
        res[k + "/by_frame"] = [round(float(x), 3) for x in v.mean(0)]
    res["_first_batch"] = first  # (gt, pred) of the first batch, for figures; callers drop it from JSON
    return res
