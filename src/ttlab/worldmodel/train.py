"""Training NanoWM with PyTorch Lightning: diffusion-forcing loss, EMA, AdamW + warmup/cosine, checkpoints.

`ttlab wm train --preset NAME [flags]`. One run lives in `runs/wm/<run>/`: `config.json`, `git_rev.txt`,
`action_stats.json`, `tb/` (TensorBoard scalars and GT-vs-prediction video grids), `checkpoints/`
(Lightning's full trainer state `step=N.ckpt` every `checkpoint_every` steps and `last.ckpt`, used by
`--resume`; plus `weights_latest.{json,safetensors}`, the EMA + raw weights with everything needed to
rebuild the model, which `eval`, `rollout` and `play` load).
"""

from __future__ import annotations

import copy
import json
import math
import os
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import ConcatDataset, DataLoader, Subset

from ttlab.common.checkpoint import atomic_write_text, save_checkpoint
from ttlab.common.config import parse_config, to_dict
from ttlab.common.data import repo_relative
from ttlab.common.device import cpu_bf16_ok, resolve_device
from ttlab.common.duration import parse_duration
from ttlab.common.lightning_quiet import quiet_lightning
from ttlab.common.runs import RunDir, make_run_dir
from ttlab.worldmodel.codecs.load import load_codec
from ttlab.worldmodel.config import TrainConfig
from ttlab.worldmodel.data.branches import (
    BranchPoolDataset,
    MixedBatchSampler,
    branch_pool,
    check_branch_config,
)
from ttlab.worldmodel.data.csgo import CSGOSource, published_split, published_windows
from ttlab.worldmodel.data.episodes import default_cache_bytes
from ttlab.worldmodel.data.sources import detect_format, open_source
from ttlab.worldmodel.data.windows import WindowDataset, split_episodes
from ttlab.worldmodel.diffusion import Objective, sample_window
from ttlab.worldmodel.diffusion.samplers import MODES
from ttlab.worldmodel.diffusion.self_forcing import rollout_context_clips
from ttlab.worldmodel.distributed import GlobalBatchSampler, global_draws, launched_rank
from ttlab.worldmodel.metrics import frame_metrics
from ttlab.worldmodel.model import NanoWM, NanoWMConfig, size_config
from ttlab.worldmodel.model.action_map import pixel_affine
from ttlab.worldmodel.presets import TRAIN_PRESETS
from ttlab.worldmodel.toy import moving_square_source


def warmup_cosine(step: int, warmup: int, total: int, min_ratio: float = 0.0) -> float:
    """LR multiplier: linear 1/warmup .. 1 over `warmup` steps, then cosine 1 -> min_ratio at `total`."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def build_model_config(cfg: TrainConfig, frame_shape: tuple[int, ...], action_dim: int,
                       action_pixels: tuple[float, float, float, float] | None = None) -> NanoWMConfig:
    """The denoiser's config; `action_pixels` (from `dataset_action_pixels`) is required with --action-map."""
    C, H, W = frame_shape
    if H != W:
        raise ValueError(f"--data {cfg.data}: frames are {H}x{W}; NanoWM needs square frames")
    if cfg.action_map != "none" and action_pixels is None:
        raise ValueError(f"--action-map {cfg.action_map}: the actions of --data {cfg.data} are not image positions")
    amap = {} if cfg.action_map == "none" else {"action_map": cfg.action_map, "action_map_sigma": cfg.action_map_sigma,
                                                "action_pixels": action_pixels}
    over = {k: v for k, v in (("patch_size", cfg.patch_size), ("hidden", cfg.hidden), ("depth", cfg.depth),
                              ("heads", cfg.heads), ("refiner", cfg.refiner)) if v}
    return size_config(cfg.size, input_size=H, in_channels=C, action_dim=action_dim, injection=cfg.injection,
                       max_frames=max(64, cfg.num_frames), null_first_action=cfg.null_first_action,
                       cond_channels=C if cfg.diffusion.delta else 0, **amap, **over)


def dataset_action_pixels(cfg: TrainConfig, ds: WindowDataset) -> tuple[float, float, float, float] | None:
    """With --action-map: the map from the dataset's normalised actions to pixels (`pixel_affine`), from the
    workspace its source declares (`action_extent`); a one-line error when its actions are not image positions.
    None without a map."""
    if cfg.action_map == "none":
        return None
    extent = getattr(ds.source, "action_extent", None)
    if extent is None or ds.source.is_latent or ds.codec is not None:
        hint = " (PushT: add --no-relative-actions for abs_actions.pth)" if getattr(ds.source, "relative", False) else ""
        raise ValueError(f"--action-map {cfg.action_map}: the actions of --data {cfg.data} are not positions in "
                         f"its pixel frames{hint}")
    return pixel_affine(extent, ds[0]["frames"].shape[-1], ds.action_stats.mean, ds.action_stats.std)


def cache_bytes(cfg: TrainConfig) -> int:
    """The decode-cache budget of one reader process: `cache_mb`, or a quarter of the available memory shared
    by the reader processes (DataLoader workers, or the main process when there are none)."""
    if cfg.cache_mb < 0:
        raise ValueError(f"--cache-mb {cfg.cache_mb}: must be >= 0 (0 = from the available memory)")
    return int(cfg.cache_mb * 2**20) if cfg.cache_mb > 0 else default_cache_bytes(max(cfg.num_workers, 1))


def open_episodes(cfg: TrainConfig):
    if cfg.data == "toy":
        return moving_square_source(cfg.toy_episodes, seed=cfg.seed)
    kind = detect_format(cfg.data) if cfg.format == "auto" else cfg.format
    kw = {"cache": cfg.episode_cache, "cache_bytes": cache_bytes(cfg)} if kind in ("dino_wm", "lerobot") else {}
    if kind == "dino_wm":
        kw["relative"] = cfg.relative_actions
    return open_source(cfg.data, kind, **kw)


def build_datasets(cfg: TrainConfig, stats_path: Path | None, codec=None):
    src = open_episodes(cfg)
    enc = codec if (codec is not None and not src.is_latent and cfg.codec != "pixel") else None
    kw = dict(num_frames=cfg.num_frames, frame_interval=cfg.frame_interval, val_fraction=cfg.val_fraction,
              seed=cfg.seed if cfg.split_seed is None else cfg.split_seed, codec=enc)
    if cfg.val_list or cfg.val_starts:
        return published_datasets(cfg, src, stats_path, kw)
    if cfg.heldout_of:
        return nested_split_datasets(cfg, src, stats_path, kw)
    train = WindowDataset(src, split="train", action_stats=stats_path, **(kw | {"num_frames": cfg.train_frames()}))
    val = WindowDataset(src, split="val" if cfg.val_fraction > 0 else "train", action_stats=train.action_stats, **kw)
    return train, val


def nested_split_datasets(cfg: TrainConfig, src, stats_path: Path | None, kw: dict):
    """Held out: the seeded split of the first `heldout_of` episodes; trained on: every other episode."""
    n = len(src)
    if not 2 <= cfg.heldout_of <= n or cfg.val_fraction <= 0:
        raise ValueError(f"--heldout-of {cfg.heldout_of}: needs 2 <= N <= the dataset's {n} episodes and "
                         f"val_fraction > 0 (got {cfg.val_fraction})")
    _, val_eps = split_episodes(cfg.heldout_of, kw["val_fraction"], kw["seed"])
    train_eps = np.setdiff1d(np.arange(n, dtype=np.int64), val_eps)
    train = WindowDataset(src, split="train", action_stats=stats_path, episodes=train_eps,
                          **(kw | {"num_frames": cfg.train_frames()}))
    val = WindowDataset(src, split="val", action_stats=train.action_stats, episodes=val_eps, **kw)
    return train, val


def published_datasets(cfg: TrainConfig, src, stats_path: Path | None, kw: dict):
    """Train/val from a published CSGO split list (and fixed start indices when given)."""
    if not cfg.val_list:
        raise ValueError("--val-starts needs --val-list (the start indices pair with the listed files)")
    if not isinstance(src, CSGOSource):
        raise ValueError(f"--val-list: published split lists are read for CSGO data; {cfg.data} is "
                         f"{type(src).__name__}")
    train_eps, val_eps = published_split(src, cfg.val_list)
    train = WindowDataset(src, split="train", action_stats=stats_path, episodes=train_eps, **kw)
    fixed = published_windows(src, val_eps, cfg.val_starts, cfg.num_frames, cfg.frame_interval) \
        if cfg.val_starts else None
    val = WindowDataset(src, split="val", action_stats=train.action_stats, episodes=val_eps, windows=fixed, **kw)
    return train, val


def fixed_subset(ds, n: int, seed: int) -> Subset:
    idx = np.random.default_rng(seed).choice(len(ds), size=min(n, len(ds)), replace=False)
    return Subset(ds, np.sort(idx).tolist())


def video_grid(gt: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
    """(N, F, C, H, W) pairs in [-1, 1] -> one (C, 2 N H, F W) image in [0, 1]: frames left to right,
    each clip's ground truth above its prediction (TensorBoard video needs moviepy; this does not)."""
    rows = torch.stack([gt, pred], dim=1).flatten(0, 1)  # (2N, F, C, H, W)
    img = rows.permute(2, 0, 3, 1, 4)  # (C, 2N, H, F, W)
    C, R, H, Fr, W = img.shape
    return ((img.reshape(C, R * H, Fr * W).float().cpu() + 1) / 2).clamp(0, 1)


def compile_forward(model: NanoWM, threads: int, mode: str = "default"):
    """`torch.compile` (inductor, `mode`) of the model's forward, compiling with `threads` worker threads (0: its
    default)."""
    import torch._inductor.config as inductor_config  # deferred on purpose: only --compile needs inductor

    if threads > 0:
        inductor_config.compile_threads = threads
    return torch.compile(model.forward, mode=mode)


def make_optimizer(model: NanoWM, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW without weight decay on biases, norms and embeddings; the fused kernel on CUDA, or with
    `fused_optimizer`."""
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embed" not in n)]
    return torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.99),
                             fused=cfg.fused_optimizer or torch.cuda.is_available())


class WorldModelModule(L.LightningModule):
    """NanoWM + EMA copy + the diffusion objective; validation samples with the EMA weights."""

    def __init__(self, cfg: TrainConfig, model_cfg: NanoWMConfig, codec=None):
        super().__init__()
        self.cfg, self.model_cfg = cfg, model_cfg
        self.model = NanoWM(model_cfg)
        self.ema = copy.deepcopy(self.model).requires_grad_(False).eval()
        # --compile: the training forward goes through a compiled function of the same parameters (a function, not
        # a submodule, so checkpoints and exports keep the plain module's keys)
        self.compiled = compile_forward(self.model, cfg.threads) if cfg.compile else None
        self.obj = Objective(cfg.diffusion)
        self.codec = codec  # decodes latents for metrics/videos; None = pixels
        self.videos_logged_at = -1
        self.loss_curve: list[tuple[int, float]] = []  # (step, global-batch mean loss) every log_every steps

    def on_fit_start(self) -> None:
        self.obj.to(self.device)

    def on_train_start(self) -> None:
        # Lightning's warning about modules in eval mode is silenced (`quiet_lightning`): the EMA copy and a frozen
        # codec are in eval mode by design. Anything else in eval mode would be a bug, so it is named here.
        stray = [n for n, m in self.named_modules() if n and not m.training and not n.startswith(("ema", "codec"))]
        if stray:
            warnings.warn(f"modules in eval mode at the start of training: {', '.join(stray[:5])}"
                          f"{' ...' if len(stray) > 5 else ''}", stacklevel=1)

    def _global_mean(self, t: torch.Tensor) -> float:
        """The mean of a scalar over the processes (a collective under DDP; a host sync)."""
        t = t.detach().float().clone()
        if self.trainer.world_size > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(t)
            t /= self.trainer.world_size
        return float(t)

    def training_step(self, batch: dict[str, Any], idx: int) -> torch.Tensor:
        x, c = batch["frames"], self.cfg
        net = self.model if self.compiled is None else self.compiled
        acts = batch["actions"]
        if c.self_forcing > 0:
            x, acts = self.self_forcing_batch(net, x, acts)
        draws = None
        if c.rank_invariant:  # this process's slice of the global batch's draws
            draws = global_draws(self.obj, x.shape[0], x.shape[1], tuple(x.shape[2:]), c.seed, self.global_step,
                                 x.device)
        loss, stats = self.obj.loss(net, x, acts, draws=draws)
        self.log("train/loss", loss, prog_bar=True, sync_dist=self.trainer.world_size > 1)
        self.log("train/mse", stats["mse"], sync_dist=self.trainer.world_size > 1)
        self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"])
        if self.global_step % c.log_every == 0:  # the global-batch loss (a collective; a host sync, logged)
            self.loss_curve.append((int(self.global_step), self._global_mean(loss)))
        return loss

    def self_forcing_batch(self, net, x: torch.Tensor, acts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A long-window batch (B, 2F - n_ctx, ...) -> a training batch (B, F, ...): the first round(share B) clips
        get the model's own context (`rollout_context_clips`), the others are their first F true frames."""
        c, F = self.cfg, self.cfg.num_frames
        k = round(c.self_forcing * x.shape[0]) if self.budget_fraction() >= c.self_forcing_start else 0
        plain_x, plain_a = x[:, :F], acts[:, :F]
        if k == 0:
            return plain_x, plain_a
        g = torch.Generator(device=x.device).manual_seed(c.seed * 1_000_003 + int(self.global_step) + 7)
        dev = x.device.type
        ad = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else None
        sx, sa = rollout_context_clips(net, self.obj, x[:k], acts[:k], F, c.n_ctx, c.self_forcing_steps or
                                       c.sample_steps, generator=g, autocast_dtype=ad,
                                       clip=1.0 if self.codec is None else None)
        return torch.cat([sx, plain_x[k:]]), torch.cat([sa, plain_a[k:]])

    def budget_fraction(self) -> float:
        """The share of the training budget spent: the wall-clock budget's elapsed fraction (`TimeBudget`), else
        global_step / max_steps."""
        tb = next((cb for cb in (self.trainer.callbacks if self._trainer is not None else []) if isinstance(cb, TimeBudget)), None)
        if tb is not None:
            return tb.elapsed / tb.seconds
        return self.global_step / max(self.cfg.max_steps, 1)

    def on_train_batch_end(self, outputs, batch, idx) -> None:
        n = self.global_step
        decay = min(self.cfg.ema_decay, (1 + n) / (10 + n))
        ema_p = list(self.ema.parameters())
        torch._foreach_lerp_(ema_p, [p.detach() for p in self.model.parameters()], 1 - decay)

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None) -> None:
        # bf16 and fp32 have no loss scaler, so the gradients are final here and a fused AdamW can be clipped too
        # (Lightning refuses to clip for any fused optimizer, assuming it unscales fp16 gradients itself)
        if gradient_clip_val and getattr(self.trainer.precision_plugin, "scaler", None) is None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), gradient_clip_val)
        else:
            super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def configure_optimizers(self):
        c = self.cfg
        opt = make_optimizer(self.model, c)
        if c.budget_minutes > 0:  # the LR is set from the elapsed time by `TimeBudget`
            return opt
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: warmup_cosine(s, c.warmup_steps, c.max_steps, c.min_lr_ratio))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def _pixels(self, z: torch.Tensor) -> torch.Tensor:
        if self.codec is None:
            return z.float().clamp(-1, 1)
        B, Fr = z.shape[:2]
        return self.codec.decode(z.flatten(0, 1).float()).clamp(-1, 1).reshape(B, Fr, *(-1, *self._hw(z)))

    def _hw(self, z):
        d = getattr(self.codec, "downsample", 1)
        return (z.shape[-2] * d, z.shape[-1] * d)

    def validation_step(self, batch: dict[str, Any], idx: int) -> None:
        c, x, a = self.cfg, batch["frames"], batch["actions"]
        g = torch.Generator(device=self.device).manual_seed(c.seed * 1000 + idx)
        loss, _ = self.obj.loss(self.ema, x, a, generator=g)
        pred = sample_window(self.ema, self.obj, x[:, :c.n_ctx], a, x.shape[1] - c.n_ctx, c.sample_steps,
                             c.sample_mode, generator=g, clip=1.0 if self.codec is None else None)
        pp, gp = self._pixels(pred), self._pixels(x)
        m = frame_metrics(pp, gp, c.n_ctx)
        bs = x.shape[0]
        self.log("val/loss", loss, batch_size=bs, sync_dist=True)
        for k, v in m.items():
            self.log(f"val/{k}", v, batch_size=bs, sync_dist=True)
        if idx == 0 and self.global_rank == 0 and self.logger is not None and hasattr(self.logger, "experiment"):
            self.logger.experiment.add_image("val/gt_vs_pred", video_grid(gp[:4], pp[:4]), self.global_step)

    def export(self, stem: Path, action_stats) -> None:
        save_checkpoint(stem, {
            "model": self.model.state_dict(), "ema": self.ema.state_dict(), "model_cfg": asdict(self.model_cfg),
            "train_cfg": to_dict(self.cfg), "step": int(self.global_step),
            "action_stats": {"mean": action_stats.mean.tolist(), "std": action_stats.std.tolist()},
        })


class TimeBudget(L.Callback):
    """`budget_minutes`: the LR follows warmup (by step) then a cosine over the elapsed fraction of the budget,
    and training stops when the budget is spent. The elapsed time is part of the checkpoint, so `--resume`
    continues the same schedule. Under DDP every rank takes rank 0's elapsed time (one LR, so the replicas stay
    equal) and they stop together (Lightning does not reduce `should_stop`; a rank left waiting would hang)."""

    def __init__(self, minutes: float, warmup_steps: int, min_ratio: float):
        self.seconds, self.warmup, self.min_ratio = minutes * 60.0, warmup_steps, min_ratio
        self.elapsed, self.t_last = 0.0, None

    def state_dict(self) -> dict:
        return {"elapsed": self.elapsed}

    def load_state_dict(self, state: dict) -> None:
        self.elapsed = float(state["elapsed"])

    def on_train_batch_start(self, trainer, module, batch, idx) -> None:
        now = time.perf_counter()
        if self.t_last is not None:
            self.elapsed += now - self.t_last
        self.t_last = now
        if getattr(trainer, "world_size", 1) > 1:
            self.elapsed = float(trainer.strategy.broadcast(self.elapsed, src=0))
        step = trainer.global_step
        frac = min(1.0, self.elapsed / self.seconds)
        mult = (step + 1) / self.warmup if step < self.warmup else \
            self.min_ratio + (1 - self.min_ratio) * 0.5 * (1 + math.cos(math.pi * frac))
        for opt in trainer.optimizers:
            for g in opt.param_groups:
                g["lr"] = module.cfg.lr * mult

    def on_train_batch_end(self, trainer, module, outputs, batch, idx) -> None:
        spent = self.elapsed + (time.perf_counter() - self.t_last) >= self.seconds
        if stop_together(trainer, spent):
            trainer.should_stop = True


class WallClockGuard(L.Callback):
    """Stop after `minutes` of this process's training wall time (Lightning's max_time would carry the elapsed
    time of a resumed run over in the checkpoint, so a resumed run would barely train)."""

    def __init__(self, minutes: float):
        self.seconds, self.t0 = minutes * 60.0, None
        self.stopped_at: int | None = None

    def on_train_start(self, trainer, module) -> None:
        self.t0 = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, idx) -> None:
        if stop_together(trainer, self.t0 is not None and time.perf_counter() - self.t0 >= self.seconds):
            trainer.should_stop = True
            self.stopped_at = int(trainer.global_step)


def stop_together(trainer, stop: bool) -> bool:
    """One rank's wish to stop, made every rank's (any rank's clock that runs out stops them all)."""
    if getattr(trainer, "world_size", 1) > 1:
        return bool(trainer.strategy.reduce_boolean_decision(stop, all=False))
    return stop


class ExportWeights(L.Callback):
    """Every `every` steps and at the end: EMA + raw weights as safetensors (rank 0, atomic)."""

    def __init__(self, stem: Path, every: int, action_stats):
        self.stem, self.every, self.stats = stem, every, action_stats

    def on_train_batch_end(self, trainer, module, outputs, batch, idx) -> None:
        if trainer.is_global_zero and trainer.global_step % self.every == 0:
            module.export(self.stem, self.stats)

    def on_train_end(self, trainer, module) -> None:
        if trainer.is_global_zero:
            module.export(self.stem, self.stats)


def resolve_precision(cfg: TrainConfig, accelerator: str) -> str:
    """The Lightning precision to train with: `auto` is bf16-mixed on CUDA and 32-true on CPU; a bf16 precision
    on a CPU without bf16 units (where bf16 matmuls run far below the float32 rate) becomes 32-true, with a
    warning."""
    if cfg.precision == "auto":
        return "bf16-mixed" if accelerator == "gpu" else "32-true"
    if accelerator == "cpu" and cfg.precision.startswith("bf16") and not cpu_bf16_ok(f"--precision {cfg.precision}"):
        return "32-true"
    return cfg.precision


def check_train_flags(cfg: TrainConfig) -> None:
    """Refuse counts and rates that cannot train, naming the flag, before a run directory exists (max_steps -1
    would let Lightning train without end, 0 would write an untrained run)."""
    for flag, value in (("--max-steps", cfg.max_steps), ("--batch-size", cfg.batch_size),
                        ("--frame-interval", cfg.frame_interval), ("--val-every", cfg.val_every),
                        ("--checkpoint-every", cfg.checkpoint_every), ("--val-samples", cfg.val_samples),
                        ("--log-every", cfg.log_every), ("--sample-steps", cfg.sample_steps)):
        if value < 1:
            raise ValueError(f"{flag} {value}: must be >= 1")
    for flag, value in (("--warmup-steps", cfg.warmup_steps), ("--num-workers", cfg.num_workers),
                        ("--weight-decay", cfg.weight_decay), ("--grad-clip", cfg.grad_clip),
                        ("--budget-minutes", cfg.budget_minutes)):
        if not value >= 0:
            raise ValueError(f"{flag} {value}: must be >= 0")
    for flag, value in (("--ema-decay", cfg.ema_decay), ("--min-lr-ratio", cfg.min_lr_ratio)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{flag} {value}: must be in [0, 1]")
    if cfg.sample_mode not in MODES:
        raise ValueError(f"--sample-mode {cfg.sample_mode!r}: expected one of {', '.join(MODES)}")
    if not 1 <= cfg.n_ctx < cfg.num_frames:
        raise ValueError(f"--n-ctx {cfg.n_ctx} --num-frames {cfg.num_frames}: need 1 <= n_ctx < num_frames")
    if not cfg.lr > 0:
        raise ValueError(f"--lr {cfg.lr}: must be > 0")
    if not 0.0 <= cfg.val_fraction < 1.0:
        raise ValueError(f"--val-fraction {cfg.val_fraction}: must be in [0, 1)")


def train(cfg: TrainConfig) -> dict[str, Any]:
    """Run (or resume) training; returns a summary with the run dir and final validation metrics."""
    check_train_flags(cfg)
    dev = resolve_device(cfg.device)
    if cfg.threads > 0 and dev.type == "cpu":
        torch.set_num_threads(cfg.threads)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    if cfg.data != "toy":
        detect_format(cfg.data)  # a missing or unreadable dataset fails here, before any run directory exists
    if check_branch_config(cfg.branch, cfg.batch_size) and cfg.data == "toy":
        raise ValueError(f"--branch.frac {cfg.branch.frac}: branched clips are PushT; --data toy has none")
    codec = None
    if cfg.codec != "pixel":
        codec = load_codec(cfg.codec, "cpu").requires_grad_(False)
    run = open_run_dir(cfg)
    stats = run.file("action_stats.json")
    if launched_rank() > 0 and not stats.exists():
        stats = None  # another node without rank 0's files: the same statistics, computed here, not saved
    train_ds, val_ds = build_datasets(cfg, stats, codec)
    item = train_ds[0]
    model_cfg = build_model_config(cfg, tuple(item["frames"].shape[1:]), train_ds.action_dim,
                                   dataset_action_pixels(cfg, train_ds))
    module = WorldModelModule(cfg, model_cfg, codec)
    val_sub = fixed_subset(val_ds, cfg.val_samples, cfg.seed)
    nw = cfg.num_workers
    branch = branch_sampling(cfg, train_ds)
    if branch is not None:
        mixed, sampler, pool_info = branch
        train_dl = DataLoader(mixed, batch_size=cfg.batch_size, sampler=sampler, drop_last=True, num_workers=nw,
                              persistent_workers=nw > 0, pin_memory=dev.type == "cuda")
    elif cfg.rank_invariant:
        train_dl = DataLoader(train_ds, batch_size=cfg.batch_size, sampler=GlobalBatchSampler(len(train_ds),
                              cfg.batch_size, cfg.seed), drop_last=True, num_workers=nw, persistent_workers=nw > 0,
                              pin_memory=dev.type == "cuda")
    else:
        train_dl = DataLoader(train_ds, batch_size=cfg.batch_size, shuffle=True,
                              drop_last=len(train_ds) >= cfg.batch_size, num_workers=nw, persistent_workers=nw > 0,
                              pin_memory=dev.type == "cuda")
    val_dl = DataLoader(val_sub, batch_size=min(cfg.batch_size, 16), shuffle=False, num_workers=0)
    accel = "gpu" if dev.type == "cuda" else "cpu"
    precision = resolve_precision(cfg, accel)
    ckpt = ModelCheckpoint(dirpath=run.checkpoints, filename="{step}", every_n_train_steps=cfg.checkpoint_every,
                           save_top_k=-1, save_last=True)
    limit_s = parse_duration(cfg.time_limit)
    guard = WallClockGuard(limit_s / 60) if limit_s > 0 else None
    budget = TimeBudget(cfg.budget_minutes, cfg.warmup_steps, cfg.min_lr_ratio) if cfg.budget_minutes > 0 else None
    quiet_lightning()
    trainer = L.Trainer(
        accelerator=accel, devices=cfg.devices, num_nodes=cfg.num_nodes, strategy=ddp_strategy(cfg, accel),
        use_distributed_sampler=not cfg.rank_invariant,
        precision=precision, max_steps=cfg.max_steps, max_epochs=-1,
        gradient_clip_val=cfg.grad_clip or None, val_check_interval=cfg.val_every, check_val_every_n_epoch=None,
        logger=loggers(cfg, run.path), callbacks=[
            ckpt, ExportWeights(run.checkpoints / "weights_latest", cfg.checkpoint_every, train_ds.action_stats),
            *([guard] if guard else []), *([budget] if budget else [])],
        log_every_n_steps=cfg.log_every, enable_progress_bar=cfg.progress_bar, num_sanity_val_steps=0,
        enable_model_summary=False)
    last = run.checkpoints / "last.ckpt"
    os.environ[RUN_DIR_ENV] = str(run.path.resolve())  # the DDP processes Lightning launches write here too
    t0 = time.perf_counter()
    trainer.fit(module, train_dl, val_dl, ckpt_path=str(last) if cfg.resume and last.exists() else None)
    secs = time.perf_counter() - t0
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    if trainer.is_global_zero:
        atomic_write_text(run.path / "loss_curve.json", json.dumps(
            {"world_size": trainer.world_size, "batch_per_process": cfg.batch_size,
             "global_batch": cfg.batch_size * trainer.world_size, "steps_losses": module.loss_curve}) + "\n")
    return {"run_dir": str(run.path), "steps": int(trainer.global_step), "max_steps": cfg.max_steps, "seconds": secs,
            "stopped_by_wall_clock": guard is not None and guard.stopped_at is not None,
            "weights": str(run.checkpoints / "weights_latest"), "metrics": metrics,
            "world_size": trainer.world_size, "precision": precision, "loss_curve": module.loss_curve,
            "branch_pool": branch[2] if branch is not None else None}


RUN_DIR_ENV = "TTLAB_WM_RUN_DIR"


def branch_sampling(cfg: TrainConfig, train_ds: WindowDataset):
    """With `branch.frac` > 0: (windows + branched-clip pool dataset, the mixing sampler, a summary of the pool);
    else None. The pool is simulated at the dataset's frame size and window shape (PushT pixels only)."""
    k = check_branch_config(cfg.branch, cfg.batch_size)
    if k == 0:
        return None
    if cfg.self_forcing > 0:
        raise ValueError(f"--branch.frac {cfg.branch.frac} with --self-forcing {cfg.self_forcing}: branched clips "
                         f"are one window long; use one or the other")
    if cfg.data == "toy" or train_ds.source.is_latent or train_ds.codec is not None or train_ds.raw_action_dim != 2:
        raise ValueError(f"--branch.frac {cfg.branch.frac}: branched clips are PushT pixels with 2-D actions; "
                         f"--data {cfg.data} is not (latent, codec or {train_ds.raw_action_dim}-D actions)")
    C, H, W = train_ds[0]["frames"].shape[1:]
    n_ctx = cfg.diffusion.context_frames or cfg.n_ctx
    pool, path, made = branch_pool(cfg.branch, H, cfg.num_frames, n_ctx, cfg.frame_interval,
                                   show_progress=cfg.progress_bar)
    if pool["frames"].shape[2:4] != (H, W):
        raise ValueError(f"{path}: pool frames {pool['frames'].shape[2:4]} differ from the data's {(H, W)}")
    pool_ds = BranchPoolDataset(pool, train_ds.action_stats, cfg.num_frames, cfg.frame_interval,
                                relative=getattr(train_ds.source, "relative", True))
    sampler = MixedBatchSampler(len(train_ds), len(pool_ds), cfg.batch_size, k, cfg.seed)
    info = {"file": repo_relative(path), "clips": len(pool_ds), "per_batch": k, "simulated_now": made}
    return ConcatDataset([train_ds, pool_ds]), sampler, info


def loggers(cfg: TrainConfig, run_path: Path) -> list:
    """TensorBoard under the run directory, and W&B beside it with --wandb."""
    out = [TensorBoardLogger(str(run_path), name="tb", version="")]
    if cfg.wandb:
        from lightning.pytorch.loggers import WandbLogger  # deferred on purpose: wandb is an optional extra

        out.append(WandbLogger(project="ttlab-wm", name=run_path.name, save_dir=str(run_path)))
    return out


def open_run_dir(cfg: TrainConfig):
    """Rank 0 makes (or, with --resume, reopens) the run directory; the other DDP processes write into the same
    one: the one rank 0 exported (processes Lightning launches on this node), or runs/wm/<run_name> (other
    nodes, which need an explicit --run-name)."""
    if launched_rank() == 0:
        return make_run_dir("wm", cfg, cfg.run_name or None, cfg.root, cfg.resume)
    if os.environ.get(RUN_DIR_ENV):
        return RunDir(Path(os.environ[RUN_DIR_ENV]))
    if not cfg.run_name:
        raise ValueError("multi-node training: pass the same --run-name on every node (rank > 0 found no run dir)")
    return RunDir(Path(cfg.root) / "wm" / cfg.run_name)  # rank 0 creates it (on a shared filesystem or not)


def ddp_strategy(cfg: TrainConfig, accel: str):
    """'auto' for one process; DDP over gloo (CPU) or NCCL (GPU) for several."""
    if cfg.devices < 1 or cfg.num_nodes < 1:
        raise ValueError(f"--devices {cfg.devices} --num-nodes {cfg.num_nodes}: both must be >= 1")
    if cfg.devices * cfg.num_nodes == 1:
        return "auto"
    return DDPStrategy(process_group_backend="gloo" if accel == "cpu" else "nccl")


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(TrainConfig, TRAIN_PRESETS, argv, prog="ttlab wm train")
    out = train(cfg)
    if launched_rank() == 0:
        print(json.dumps(out, indent=2))
    return 0
