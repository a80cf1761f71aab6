"""`ttlab wm eval` (metrics JSON + GT-vs-prediction mp4) and `ttlab wm rollout` (long horizon, sliding window).

Metrics are computed on predicted frames only (context excluded), always beside the copy-last-frame,
mid-gray and mean-training-frame baselines on the same frames, on a fixed seeded subset of the
validation split. Learned metrics (LPIPS/FID/FVD) run only
with local TorchScript weights given by path; otherwise the JSON says which were skipped and why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from ttlab.worldmodel.metrics import LearnedMetrics, MetricWeights, frame_metrics, quantize


def write_mp4(path: str | Path, frames: np.ndarray, fps: int = 8, upscale: int = 4) -> Path:
    """uint8 (T, H, W, 3) -> H.264 mp4 via PyAV (nearest-neighbour upscaled, even sides)."""
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    f = np.repeat(np.repeat(frames, upscale, axis=1), upscale, axis=2)
    f = f[:, : f.shape[1] // 2 * 2, : f.shape[2] // 2 * 2]
    with av.open(str(path), mode="w") as box:
        st = box.add_stream("libx264", rate=fps)
        st.width, st.height, st.pix_fmt = f.shape[2], f.shape[1], "yuv420p"
        for fr in f:
            for pkt in st.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(fr), format="rgb24")):
                box.mux(pkt)
        for pkt in st.encode():
            box.mux(pkt)
    return path


def to_uint8(x: torch.Tensor) -> np.ndarray:
    """(..., C, H, W) in [-1, 1] -> uint8 (..., H, W, C)."""
    y = ((x.float().clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)
    return y.movedim(-3, -1).cpu().numpy()


def side_by_side(gt: torch.Tensor, pred: torch.Tensor) -> np.ndarray:
    """(N, T, C, H, W) pairs -> uint8 (T, N H, 2 W + 2, 3): GT left | prediction right, clips stacked."""
    sep = torch.ones_like(gt[..., :2])
    rows = torch.cat([gt, sep, pred], dim=-1)  # (N, T, C, H, 2W+2)
    return to_uint8(torch.cat(list(rows), dim=-2))  # (T, N H, 2W+2, 3)


@dataclass
class EvalConfig:
    """Evaluate a trained NanoWM on the validation split against the copy-last-frame baseline."""

    weights: Path = Path("runs/wm/latest")
    """A run directory or a weights export stem (checkpoints/weights_latest)."""
    data: str = ""
    """Dataset (default: the one the model was trained on)."""
    split: str = "val"
    """Split to evaluate: val | train | all."""
    num_samples: int = 128
    """Windows in the fixed seeded subset (of the held-out episodes for split=val)."""
    batch_size: int = 16
    """Windows per sampling batch."""
    n_ctx: int = 1
    """Context frames (the rest of the window is predicted)."""
    steps: int = 0
    """Sampling steps (0 = the run's own `sample_steps`, the sampler its training matches)."""
    mode: str = "full_sequence"
    """Scheduling matrix: full_sequence | pyramid | sequential."""
    history_noise: float = 0.0
    """History-stabilisation noise level of context frames (fraction of the way to pure noise)."""
    eta: float = 0.0
    """DDIM stochasticity (0 = deterministic DDIM, 1 = DDPM posterior noise; v/x/eps targets only)."""
    official_sampler: bool = False
    """The official code's default sampler: sequential scheduling, 250 steps, history noise 0.02 (overrides
    steps, mode and history_noise)."""
    metrics: MetricWeights = field(default_factory=MetricWeights)
    """Local weights for LPIPS / FID (Inception) / FVD (I3D)."""
    video_clips: int = 4
    """Clips in the GT-vs-prediction mp4."""
    out: Path = Path("")
    """Output directory (default: <run>/eval)."""
    ema: bool = True
    """Use the EMA weights."""
    quantize: bool = True
    """Round predictions to 8-bit values before scoring, as a saved frame would be (ground truth already is)."""
    seed: int = 0
    """Seed of the subset and the sampling noise."""
    device: str = "auto"
    """auto | cpu | cuda."""


def sampler_settings(cfg, run_steps: int):
    """An Eval/RolloutConfig with its sampler resolved: the official default sampler when asked for, else
    `steps` 0 -> the run's own `sample_steps`."""
    from ttlab.worldmodel.diffusion.samplers import OFFICIAL_SAMPLER

    if cfg.official_sampler:
        o = OFFICIAL_SAMPLER
        return replace(cfg, steps=o["n_steps"], mode=o["mode"], history_noise=o["history_noise"])
    return replace(cfg, steps=cfg.steps if cfg.steps > 0 else run_steps)


def _run_dir(weights: Path) -> Path:
    w = Path(weights)
    return w if w.is_dir() else w.parent.parent


def _codec(tc: dict, device):
    if tc.get("codec", "pixel") == "pixel":
        return None
    from ttlab.worldmodel.codecs.base import load_codec

    return load_codec(tc["codec"], device).requires_grad_(False)


def _decode(codec, z: torch.Tensor) -> torch.Tensor:
    if codec is None:
        return z.float().clamp(-1, 1)
    B, Fr = z.shape[:2]
    x = codec.decode(z.flatten(0, 1).float()).clamp(-1, 1)
    return x.reshape(B, Fr, *x.shape[1:])


def mean_train_frame(train_ds, seed: int = 0, windows: int = 256) -> torch.Tensor:
    """Mean frame (C, H, W) over every frame of a fixed seeded subset of training windows (model space)."""
    from ttlab.worldmodel.train import fixed_subset

    sub = fixed_subset(train_ds, windows, seed + 1)
    total = None
    for i in range(len(sub)):
        f = sub[i]["frames"].float().sum(0)  # (C, H, W)
        total = f if total is None else total + f
    return total / (len(sub) * train_ds.num_frames)


def evaluate(cfg: EvalConfig) -> dict:
    from ttlab.common.config import from_dict
    from ttlab.common.device import resolve_device
    from ttlab.worldmodel.diffusion import sample_window
    from ttlab.worldmodel.train import TrainConfig, build_datasets, fixed_subset, load_world_model

    dev = resolve_device(cfg.device)
    wm = load_world_model(cfg.weights, dev, ema=cfg.ema)
    tc = from_dict(TrainConfig, wm.train_cfg)
    if cfg.data:
        tc = replace(tc, data=cfg.data)
    codec = _codec(wm.train_cfg, dev)
    train_ds, val_ds = build_datasets(tc, _run_dir(cfg.weights) / "action_stats.json", codec)
    ds = {"val": val_ds, "train": train_ds}.get(cfg.split, val_ds)
    # published fixed windows (e.g. Vid2World CSGO start indices) are scored all, in order; else a seeded subset
    sub = ds if getattr(ds, "fixed_windows", False) else fixed_subset(ds, cfg.num_samples, cfg.seed)
    dl = torch.utils.data.DataLoader(sub, batch_size=cfg.batch_size, shuffle=False)
    cfg = sampler_settings(cfg, tc.sample_steps)
    learned = LearnedMetrics(cfg.metrics, dev)
    # latents: the decoded mean latent, which approximates the mean frame
    mean_frame = _decode(codec, mean_train_frame(train_ds, cfg.seed)[None, None].to(dev))[0, 0]  # (C, H, W)
    if cfg.quantize:
        mean_frame = quantize(mean_frame)
    g = torch.Generator(device=dev).manual_seed(cfg.seed)
    sums: dict[str, float] = {}
    n = 0
    vid_gt, vid_pred = [], []
    for batch in dl:
        x, a = batch["frames"].to(dev), batch["actions"].to(dev)
        pred = sample_window(wm.model, wm.obj, x[:, :cfg.n_ctx], a, x.shape[1] - cfg.n_ctx, cfg.steps, cfg.mode,
                             cfg.history_noise, clip=1.0 if codec is None else None, generator=g, eta=cfg.eta)
        pp, gp = _decode(codec, pred), _decode(codec, x)
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
    out_dir = cfg.out if str(cfg.out) not in ("", ".") else _run_dir(cfg.weights) / "eval"
    video = write_mp4(out_dir / "gt_vs_pred.mp4", side_by_side(torch.cat(vid_gt)[:cfg.video_clips],
                                                                torch.cat(vid_pred)[:cfg.video_clips]), fps=4)
    report = {"step": wm.step, "samples": n, "n_ctx": cfg.n_ctx, "steps": cfg.steps, "mode": cfg.mode,
              "history_noise": cfg.history_noise, "eta": cfg.eta,
              "metrics": res, "psnr_gain_over_copy_last_db": res["psnr"] - res["baseline_copy_last/psnr"],
              "skipped": learned.skipped, "video": str(video)}
    from ttlab.common.checkpoint import atomic_write_text

    atomic_write_text(out_dir / "metrics.json", json.dumps(report, indent=2) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    from ttlab.common.config import parse_config

    print(json.dumps(evaluate(parse_config(EvalConfig, argv=argv, prog="ttlab wm eval")), indent=2))
    return 0


@dataclass
class RolloutConfig:
    """Roll a trained NanoWM out far beyond its training clip with a sliding window."""

    weights: Path = Path("runs/wm/latest")
    """A run directory or a weights export stem."""
    actions: Path = Path("")
    """Raw actions .npy (T, A) per raw step (the dataset's layout); empty = the episode's own actions."""
    start: Path = Path("")
    """Start frames .npy uint8 (Fs, H, W, 3); empty = the first frames of `episode`."""
    episode: int = 0
    """Episode of the training dataset to take the start clip (and ground truth) from."""
    horizon: int = 32
    """Frames to produce in total (start frames included)."""
    n_ctx: int = 1
    """Context frames kept by the sliding window."""
    steps: int = 0
    """Sampling steps per window (0 = the run's own `sample_steps`)."""
    mode: str = "full_sequence"
    """Scheduling matrix: full_sequence | pyramid | sequential."""
    history_noise: float = 0.0
    """History-stabilisation noise level."""
    eta: float = 0.0
    """DDIM stochasticity (0 = deterministic DDIM, 1 = DDPM posterior noise; v/x/eps targets only)."""
    official_sampler: bool = False
    """The official code's default sampler: sequential scheduling, 250 steps, history noise 0.02 (overrides
    steps, mode and history_noise)."""
    out: Path = Path("")
    """Output directory (default: <run>/rollout)."""
    seed: int = 0
    """Sampling seed."""
    device: str = "auto"
    """auto | cpu | cuda."""


def frame_actions(raw: np.ndarray, mean: np.ndarray, std: np.ndarray, interval: int, frames: int) -> np.ndarray:
    """Raw actions (T, A) -> per-frame conditioning (frames, A * interval), normalised, shifted by one."""
    need = (frames - 1) * interval
    if raw.ndim != 2 or raw.shape[1] != mean.shape[0]:
        raise ValueError(f"actions: expected shape (T, {mean.shape[0]}), got {raw.shape}")
    if raw.shape[0] < need:
        raise ValueError(f"actions: {raw.shape[0]} raw steps, need >= {need} for {frames} frames x interval {interval}")
    a = ((raw[:need] - mean) / std).astype(np.float32).reshape(frames - 1, interval * raw.shape[1])
    return np.concatenate([np.zeros((1, a.shape[1]), np.float32), a])  # (frames, A * interval)


def rollout_run(cfg: RolloutConfig) -> dict:
    from ttlab.common.config import from_dict
    from ttlab.common.device import resolve_device
    from ttlab.worldmodel.data.windows import to_model_frames
    from ttlab.worldmodel.diffusion import rollout
    from ttlab.worldmodel.metrics import psnr
    from ttlab.worldmodel.train import TrainConfig, load_world_model, open_episodes

    dev = resolve_device(cfg.device)
    wm = load_world_model(cfg.weights, dev)
    tc = from_dict(TrainConfig, wm.train_cfg)
    codec = _codec(wm.train_cfg, dev)
    iv = tc.frame_interval
    cfg = sampler_settings(cfg, tc.sample_steps)
    gt = None
    if str(cfg.actions) in ("", ".") or str(cfg.start) in ("", "."):
        src = open_episodes(tc)
        if not 0 <= cfg.episode < len(src):
            raise ValueError(f"--episode {cfg.episode}: the dataset has {len(src)} episodes")
        raw_actions = src.actions(cfg.episode)
        T = src.length(cfg.episode)
        idx = np.arange(0, T, iv)[:cfg.horizon]
        if src.is_latent:
            raise ValueError("rollout from a latent dataset needs --start frames (pixels)")
        gt = to_model_frames(src.frames(cfg.episode, idx))  # (H', 3, H, W)
    if str(cfg.actions) not in ("", "."):
        raw_actions = np.load(cfg.actions).astype(np.float32)
    horizon = min(cfg.horizon, raw_actions.shape[0] // iv + 1)
    start = gt[:cfg.n_ctx] if str(cfg.start) in ("", ".") else to_model_frames(np.load(cfg.start))[:cfg.n_ctx]
    acts = torch.from_numpy(frame_actions(raw_actions, wm.action_mean, wm.action_std, iv, horizon))[None].to(dev)
    x0 = start[None].to(dev)  # (1, n_ctx, 3, H, W)
    if codec is not None:
        x0 = codec.encode(x0[0])[None]
    g = torch.Generator(device=dev).manual_seed(cfg.seed)
    out = rollout(wm.model, wm.obj, x0, acts, window=tc.num_frames, n_ctx=cfg.n_ctx, n_steps=cfg.steps,
                  mode=cfg.mode, history_noise=cfg.history_noise, clip=1.0 if codec is None else None, generator=g,
                  eta=cfg.eta)
    frames = _decode(codec, out)[0].cpu()  # (horizon, 3, H, W)
    out_dir = cfg.out if str(cfg.out) not in ("", ".") else _run_dir(cfg.weights) / "rollout"
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
    from ttlab.common.config import parse_config

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
    from ttlab.common.config import from_dict
    from ttlab.common.device import resolve_device
    from ttlab.worldmodel.data.windows import to_model_frames
    from ttlab.worldmodel.diffusion import rollout
    from ttlab.worldmodel.metrics import psnr, ssim
    from ttlab.worldmodel.train import TrainConfig, build_datasets, load_world_model

    dev = resolve_device(device)
    wm = load_world_model(weights, dev)
    tc = from_dict(TrainConfig, wm.train_cfg)
    steps = steps if steps > 0 else tc.sample_steps
    codec = _codec(wm.train_cfg, dev)
    train_ds, val_ds = build_datasets(tc, _run_dir(Path(weights)) / "action_stats.json", codec)
    src, iv = val_ds.source, tc.frame_interval
    if src.is_latent:
        raise ValueError("heldout_rollouts needs a pixel dataset (ground truth frames)")
    need = (horizon - 1) * iv + 1
    eps = [int(e) for e in val_ds.episodes if src.length(int(e)) >= need][:max_episodes]
    if not eps:
        raise ValueError(f"no held-out episode has the {need} raw steps a {horizon}-frame rollout at interval {iv} needs")
    mean_frame = _decode(codec, mean_train_frame(train_ds, seed)[None, None].to(dev))[0, 0]  # (C, H, W)
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
        pred = _decode(codec, out)
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
