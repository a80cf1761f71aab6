"""Training NanoWM with PyTorch Lightning: diffusion-forcing loss, EMA, AdamW + warmup/cosine, checkpoints.

`ttlab wm train --preset NAME [flags]`. One run lives in `runs/wm/<run>/`: `config.json`, `git_rev.txt`,
`action_stats.json`, `tb/` (TensorBoard scalars and GT-vs-prediction video grids), `checkpoints/`
(Lightning's full trainer state `step=N.ckpt` every `ckpt_every` steps and `last.ckpt`, used by
`--resume`; plus `weights_latest.{json,safetensors}`, the EMA + raw weights with everything needed to
rebuild the model, which `eval`, `rollout` and `play` load).
"""

from __future__ import annotations

import copy
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Subset

from ttlab.common.checkpoint import load_checkpoint, save_checkpoint
from ttlab.common.config import to_dict
from ttlab.worldmodel.data.sources import detect_format
from ttlab.worldmodel.diffusion import DiffusionConfig, Objective, sample_window
from ttlab.worldmodel.distributed import GlobalBatchSampler, global_draws, launched_rank
from ttlab.worldmodel.metrics import frame_metrics
from ttlab.worldmodel.model import NanoWM, NanoWMConfig, size_config


@dataclass
class TrainConfig:
    """Train a NanoWM world model (diffusion forcing) on a dataset of episodes."""

    data: str = "toy"
    """Dataset directory (DINO-WM, LeRobot, CSGO or precomputed latents), or `toy` (moving squares)."""
    format: str = "auto"
    """Dataset format: auto | dino_wm | lerobot | csgo | latents."""
    codec: str = "pixel"
    """Latent codec: `pixel`, an in-project codec checkpoint, or a diffusers AutoencoderKL directory."""
    num_frames: int = 4
    """Frames per training window."""
    frame_interval: int = 1
    """Raw steps between kept frames (their actions are concatenated)."""
    val_fraction: float = 0.1
    """Fraction of episodes held out for validation (split by episode)."""
    val_list: str = ""
    """CSGO: a published split list (Vid2World `test_split*.txt`, one file name per line): those episodes are
    the validation set, every other file trains (replaces val_fraction)."""
    val_starts: str = ""
    """CSGO, with val_list: published start indices (Vid2World `csgo_validation_start_indices*.npy`): validation
    window i starts at raw step starts[i] of the i-th listed file in sorted path order; eval scores them all."""
    toy_episodes: int = 64
    """Episodes of the toy dataset (data=toy)."""
    episode_cache: int = -1
    """Decoded episodes each video reader (dino_wm, lerobot) keeps in memory (LRU); -1 = as many as `cache_mb`
    holds (a dataset that fits is decoded once), 0 disables."""
    cache_mb: float = 0.0
    """Decode-cache budget per reader process in MiB (the main process and each DataLoader worker hold one);
    0 = a quarter of the memory available at start, shared by the reader processes."""
    size: str = "S/2"
    """Model size: S/2 | B/2 | L/2 | tiny."""
    injection: str = "additive"
    """Action injection: additive | adaln | adaln_fuse | film | cross_attention."""
    null_first_action: bool = True
    """Frame 0 of every clip gets the null action (a zero embedding, as the official model does); False embeds
    the pipeline's zeros, i.e. the mean action (the behaviour the `pusht_cpu` evidence was measured with)."""
    patch_size: int = 0
    """Override the size's patch side (0 keeps it)."""
    hidden: int = 0
    """Override the size's width (0 keeps it)."""
    depth: int = 0
    """Override the size's block count (0 keeps it)."""
    heads: int = 0
    """Override the size's head count (0 keeps it)."""
    diffusion: DiffusionConfig = field(default_factory=DiffusionConfig)
    """Noise process and objective."""
    batch_size: int = 32
    """Clips per optimizer step per device."""
    lr: float = 1e-4
    """Peak AdamW learning rate."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    warmup_steps: int = 1000
    """Linear warmup steps (from 0 to lr)."""
    min_lr_ratio: float = 0.0
    """Cosine decay floor as a fraction of lr."""
    max_steps: int = 50_000
    """Training budget in optimizer steps: the warmup + cosine schedule anneals to min_lr_ratio exactly here,
    and `--resume` continues the step count towards it."""
    max_minutes: float = 0.0
    """Safety stop after this wall time of *this* process (0 = none; a resumed run gets it afresh). It cuts the
    schedule short, so size max_steps to the time instead and keep this as a guard."""
    grad_clip: float = 1.0
    """Gradient norm clip (0 disables)."""
    ema_decay: float = 0.9999
    """EMA decay (with the usual (1+n)/(10+n) warmup)."""
    precision: str = "auto"
    """Lightning precision: auto (bf16-mixed on CUDA, 32-true on CPU) | bf16-mixed | 16-mixed | 32-true."""
    device: str = "auto"
    """auto | cpu | cuda."""
    devices: int = 1
    """Processes per node: GPUs, or CPU processes with device=cpu (DDP when devices or num_nodes > 1; gloo on
    CPU, NCCL on GPUs). batch_size is per process: the global batch is batch_size x devices x num_nodes."""
    num_nodes: int = 1
    """Nodes for multi-node DDP (launch one `ttlab wm train` per node with the same --run-name; see README)."""
    rank_invariant: bool = True
    """Each step's global batch of clips and its noise are a function of (seed, step) and each process takes
    its slice, so N processes of batch b give the loss curve of 1 process of batch N b. False: PyTorch
    shuffling, DistributedSampler shards and the global RNG (what `pusht_cpu` was measured with)."""
    num_workers: int = 2
    """DataLoader worker processes."""
    n_ctx: int = 1
    """Context frames for validation sampling (the rest are predicted)."""
    sample_steps: int = 20
    """Sampling steps for validation predictions."""
    sample_mode: str = "full_sequence"
    """Scheduling matrix for validation sampling: full_sequence | pyramid | sequential."""
    val_every: int = 1000
    """Validate every N optimizer steps."""
    val_samples: int = 64
    """Size of the fixed, seeded validation subset."""
    ckpt_every: int = 1000
    """Save step checkpoints and weights_latest every N steps."""
    log_every: int = 50
    """Log training scalars every N steps."""
    seed: int = 0
    """Seed for data split, init and validation noise."""
    run_name: str = ""
    """Run directory name under runs/wm (default: a timestamp)."""
    root: str = "runs"
    """Root of run directories."""
    resume: bool = False
    """Continue the run in runs/wm/<run_name> from its last.ckpt."""
    progress_bar: bool = True
    """Show Lightning's progress bar."""
    cpu_threads: int = 0
    """torch intra-op threads on CPU (0 = torch's default; 1 avoids thrashing tiny models on busy cores)."""


def warmup_cosine(step: int, warmup: int, total: int, min_ratio: float = 0.0) -> float:
    """LR multiplier: linear 1/warmup .. 1 over `warmup` steps, then cosine 1 -> min_ratio at `total`."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def build_model_config(cfg: TrainConfig, frame_shape: tuple[int, ...], action_dim: int) -> NanoWMConfig:
    C, H, W = frame_shape
    if H != W:
        raise ValueError(f"--data {cfg.data}: frames are {H}x{W}; NanoWM needs square frames")
    over = {k: v for k, v in (("patch_size", cfg.patch_size), ("hidden", cfg.hidden), ("depth", cfg.depth),
                              ("heads", cfg.heads)) if v}
    return size_config(cfg.size, input_size=H, in_channels=C, action_dim=action_dim, injection=cfg.injection,
                       max_frames=max(64, cfg.num_frames), null_first_action=cfg.null_first_action, **over)


def cache_bytes(cfg: TrainConfig) -> int:
    """The decode-cache budget of one reader process: `cache_mb`, or a quarter of the available memory shared
    by the reader processes (DataLoader workers, or the main process when there are none)."""
    from ttlab.worldmodel.data.episodes import default_cache_bytes

    if cfg.cache_mb < 0:
        raise ValueError(f"--cache-mb {cfg.cache_mb}: must be >= 0 (0 = from the available memory)")
    return int(cfg.cache_mb * 2**20) if cfg.cache_mb > 0 else default_cache_bytes(max(cfg.num_workers, 1))


def open_episodes(cfg: TrainConfig):
    if cfg.data == "toy":
        from ttlab.worldmodel.toy import moving_square_source

        return moving_square_source(cfg.toy_episodes, seed=cfg.seed)
    from ttlab.worldmodel.data.sources import detect_format, open_source

    kind = detect_format(cfg.data) if cfg.format == "auto" else cfg.format
    kw = {"cache": cfg.episode_cache, "cache_bytes": cache_bytes(cfg)} if kind in ("dino_wm", "lerobot") else {}
    return open_source(cfg.data, kind, **kw)


def build_datasets(cfg: TrainConfig, stats_path: Path | None, codec=None):
    from ttlab.worldmodel.data.windows import WindowDataset

    src = open_episodes(cfg)
    enc = codec if (codec is not None and not src.is_latent and cfg.codec != "pixel") else None
    kw = dict(num_frames=cfg.num_frames, frame_interval=cfg.frame_interval, val_fraction=cfg.val_fraction,
              seed=cfg.seed, codec=enc)
    if cfg.val_list or cfg.val_starts:
        return published_datasets(cfg, src, stats_path, kw)
    train = WindowDataset(src, split="train", action_stats=stats_path, **kw)
    val = WindowDataset(src, split="val" if cfg.val_fraction > 0 else "train", action_stats=train.action_stats, **kw)
    return train, val


def published_datasets(cfg: TrainConfig, src, stats_path: Path | None, kw: dict):
    """Train/val from a published CSGO split list (and fixed start indices when given)."""
    from ttlab.worldmodel.data.csgo import CSGOSource, published_split, published_windows
    from ttlab.worldmodel.data.windows import WindowDataset

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


class WorldModelModule(L.LightningModule):
    """NanoWM + EMA copy + the diffusion objective; validation samples with the EMA weights."""

    def __init__(self, cfg: TrainConfig, model_cfg: NanoWMConfig, codec=None):
        super().__init__()
        self.cfg, self.model_cfg = cfg, model_cfg
        self.model = NanoWM(model_cfg)
        self.ema = copy.deepcopy(self.model).requires_grad_(False).eval()
        self.obj = Objective(cfg.diffusion)
        self.codec = codec  # decodes latents for metrics/videos; None = pixels
        self.videos_logged_at = -1
        self.loss_curve: list[tuple[int, float]] = []  # (step, global-batch mean loss) every log_every steps

    def on_fit_start(self) -> None:
        self.obj.to(self.device)

    def training_step(self, batch: dict[str, Any], idx: int) -> torch.Tensor:
        x, c = batch["frames"], self.cfg
        draws = None
        if c.rank_invariant:  # this process's slice of the global batch's draws
            draws = global_draws(self.obj, x.shape[0], x.shape[1], tuple(x.shape[2:]), c.seed, self.global_step,
                                 x.device)
        loss, stats = self.obj.loss(self.model, x, batch["actions"], draws=draws)
        self.log("train/loss", loss, prog_bar=True, sync_dist=self.trainer.world_size > 1)
        self.log("train/mse", stats["mse"], sync_dist=self.trainer.world_size > 1)
        self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"])
        if self.global_step % c.log_every == 0:  # the global-batch loss (a collective; a host sync, logged)
            self.loss_curve.append((int(self.global_step), float(self.all_gather(loss.detach()).float().mean())))
        return loss

    def on_train_batch_end(self, outputs, batch, idx) -> None:
        n = self.global_step
        decay = min(self.cfg.ema_decay, (1 + n) / (10 + n))
        ema_p = list(self.ema.parameters())
        torch._foreach_lerp_(ema_p, [p.detach() for p in self.model.parameters()], 1 - decay)

    def configure_optimizers(self):
        c = self.cfg
        decay = [p for n, p in self.model.named_parameters() if p.ndim >= 2 and "embed" not in n]
        no_decay = [p for n, p in self.model.named_parameters() if not (p.ndim >= 2 and "embed" not in n)]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": c.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=c.lr, betas=(0.9, 0.99),
                                fused=torch.cuda.is_available())
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


class WallClockGuard(L.Callback):
    """Stop after `minutes` of this process's training wall time (Lightning's max_time would carry the elapsed
    time of a resumed run over in the checkpoint, so a resumed run would barely train)."""

    def __init__(self, minutes: float):
        self.seconds, self.t0 = minutes * 60.0, None
        self.stopped_at: int | None = None

    def on_train_start(self, trainer, module) -> None:
        self.t0 = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, idx) -> None:
        if self.t0 is not None and time.perf_counter() - self.t0 >= self.seconds:
            trainer.should_stop = True
            self.stopped_at = int(trainer.global_step)


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
    if cfg.precision != "auto":
        return cfg.precision
    return "bf16-mixed" if accelerator == "gpu" else "32-true"


def train(cfg: TrainConfig) -> dict[str, Any]:
    """Run (or resume) training; returns a summary with the run dir and final validation metrics."""
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import TensorBoardLogger

    from ttlab.common.device import resolve_device

    dev = resolve_device(cfg.device)
    if cfg.cpu_threads > 0 and dev.type == "cpu":
        torch.set_num_threads(cfg.cpu_threads)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    if cfg.data != "toy":
        detect_format(cfg.data)  # a missing or unreadable dataset fails here, before any run directory exists
    codec = None
    if cfg.codec != "pixel":
        from ttlab.worldmodel.codecs.base import load_codec

        codec = load_codec(cfg.codec, "cpu").requires_grad_(False)
    run = open_run_dir(cfg)
    stats = run.file("action_stats.json")
    if launched_rank() > 0 and not stats.exists():
        stats = None  # another node without rank 0's files: the same statistics, computed here, not saved
    train_ds, val_ds = build_datasets(cfg, stats, codec)
    item = train_ds[0]
    model_cfg = build_model_config(cfg, tuple(item["frames"].shape[1:]), train_ds.action_dim)
    module = WorldModelModule(cfg, model_cfg, codec)
    val_sub = fixed_subset(val_ds, cfg.val_samples, cfg.seed)
    nw = cfg.num_workers
    if cfg.rank_invariant:
        train_dl = DataLoader(train_ds, batch_size=cfg.batch_size, sampler=GlobalBatchSampler(len(train_ds),
                              cfg.batch_size, cfg.seed), drop_last=True, num_workers=nw, persistent_workers=nw > 0,
                              pin_memory=dev.type == "cuda")
    else:
        train_dl = DataLoader(train_ds, batch_size=cfg.batch_size, shuffle=True,
                              drop_last=len(train_ds) >= cfg.batch_size, num_workers=nw, persistent_workers=nw > 0,
                              pin_memory=dev.type == "cuda")
    val_dl = DataLoader(val_sub, batch_size=min(cfg.batch_size, 16), shuffle=False, num_workers=0)
    accel = "gpu" if dev.type == "cuda" else "cpu"
    ckpt = ModelCheckpoint(dirpath=run.checkpoints, filename="{step}", every_n_train_steps=cfg.ckpt_every,
                           save_top_k=-1, save_last=True)
    guard = WallClockGuard(cfg.max_minutes) if cfg.max_minutes > 0 else None
    trainer = L.Trainer(
        accelerator=accel, devices=cfg.devices, num_nodes=cfg.num_nodes, strategy=ddp_strategy(cfg, accel),
        use_distributed_sampler=not cfg.rank_invariant,
        precision=resolve_precision(cfg, accel), max_steps=cfg.max_steps, max_epochs=-1,
        gradient_clip_val=cfg.grad_clip or None, val_check_interval=cfg.val_every, check_val_every_n_epoch=None,
        logger=TensorBoardLogger(str(run.path), name="tb", version=""), callbacks=[
            ckpt, ExportWeights(run.checkpoints / "weights_latest", cfg.ckpt_every, train_ds.action_stats),
            *([guard] if guard else [])],
        log_every_n_steps=cfg.log_every, enable_progress_bar=cfg.progress_bar, num_sanity_val_steps=0,
        enable_model_summary=False)
    last = run.checkpoints / "last.ckpt"
    os.environ[RUN_DIR_ENV] = str(run.path.resolve())  # the DDP processes Lightning launches write here too
    t0 = time.perf_counter()
    trainer.fit(module, train_dl, val_dl, ckpt_path=str(last) if cfg.resume and last.exists() else None)
    secs = time.perf_counter() - t0
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    if trainer.is_global_zero:
        from ttlab.common.checkpoint import atomic_write_text

        atomic_write_text(run.path / "loss_curve.json", json.dumps(
            {"world_size": trainer.world_size, "batch_per_process": cfg.batch_size,
             "global_batch": cfg.batch_size * trainer.world_size, "steps_losses": module.loss_curve}) + "\n")
    return {"run_dir": str(run.path), "steps": int(trainer.global_step), "max_steps": cfg.max_steps, "seconds": secs,
            "stopped_by_wall_clock": guard is not None and guard.stopped_at is not None,
            "weights": str(run.checkpoints / "weights_latest"), "metrics": metrics,
            "world_size": trainer.world_size, "loss_curve": module.loss_curve}


RUN_DIR_ENV = "TTLAB_WM_RUN_DIR"


def open_run_dir(cfg: TrainConfig):
    """Rank 0 makes (or, with --resume, reopens) the run directory; the other DDP processes write into the same
    one: the one rank 0 exported (processes Lightning launches on this node), or runs/wm/<run_name> (other
    nodes, which need an explicit --run-name)."""
    from ttlab.common.runs import RunDir, make_run_dir

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
    from lightning.pytorch.strategies import DDPStrategy

    return DDPStrategy(process_group_backend="gloo" if accel == "cpu" else "nccl")


@dataclass
class LoadedWorldModel:
    model: NanoWM
    obj: Objective
    train_cfg: dict
    action_mean: np.ndarray
    action_std: np.ndarray
    step: int


def load_world_model(path: str | Path, device: str | torch.device = "cpu", ema: bool = True) -> LoadedWorldModel:
    """Rebuild a trained model from `weights_latest` (or any weights export) of a run."""
    p = Path(path)
    if p.is_dir():
        p = p / "checkpoints" / "weights_latest" if (p / "checkpoints").is_dir() else p / "weights_latest"
    state = load_checkpoint(p, map_location=device)
    mc = dict(state["model_cfg"])
    mc.setdefault("null_first_action", False)  # weights saved before the option embedded frame 0's zeros
    model = NanoWM(NanoWMConfig(**mc)).to(device)
    model.load_state_dict(state["ema" if ema else "model"])
    tc = state["train_cfg"]
    obj = Objective(DiffusionConfig(**tc["diffusion"]), device)
    st = state["action_stats"]
    return LoadedWorldModel(model.eval(), obj, tc, np.asarray(st["mean"], np.float32), np.asarray(st["std"], np.float32),
                            int(state["step"]))


def main(argv: list[str] | None = None) -> int:
    from ttlab.common.config import parse_config
    from ttlab.worldmodel.presets import TRAIN_PRESETS

    cfg = parse_config(TrainConfig, TRAIN_PRESETS, argv, prog="ttlab wm train")
    out = train(cfg)
    if launched_rank() == 0:
        print(json.dumps(out, indent=2))
    return 0
