"""The world model's training configuration: one dataclass that presets build and the trainer reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from ttlab.worldmodel.data.branches import BranchConfig
from ttlab.worldmodel.diffusion import DiffusionConfig
from ttlab.worldmodel.diffusion.self_forcing import long_window


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
    heldout_of: int = 0
    """Hold out the split of the first N episodes only (0 = split all episodes): a larger dataset generated with
    the same seed (whose first N episodes are the smaller one's) trains on everything else and is scored on the
    smaller dataset's held-out episodes, so runs on the two compare on one set."""
    val_list: Path | None = None
    """CSGO: a published split list (Vid2World `test_split*.txt`, one file name per line): those episodes are
    the validation set, every other file trains (replaces val_fraction)."""
    val_starts: Path | None = None
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
    action_map: str = "none"
    """Also draw the actions into the frames they lead to: none | gaussian (each raw (x, y) target of the frame
    interval a blob in its own input channel; `ttlab.worldmodel.model.action_map`). Needs actions that are image
    positions (PushT with --no-relative-actions); the global injection stays."""
    action_map_sigma: float = 1.5
    """Width of the action map's blobs in pixels."""
    relative_actions: bool = True
    """DINO-WM PushT: rel_actions.pth (the PD target minus the agent's position); False: abs_actions.pth (the
    target itself, a point in the image, which --action-map needs)."""
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
    refiner: int = 0
    """Channels of the full-resolution conv refiner after the patch output (`model/refiner.py`; 0 = none)."""
    diffusion: DiffusionConfig = field(default_factory=DiffusionConfig)
    """Noise process and objective."""
    branch: BranchConfig = field(default_factory=BranchConfig)
    """Branched PushT clips (one context, action-determined futures) mixed into every training batch."""
    self_forcing: float = 0.0
    """Share of each batch trained on the model's own context (`ttlab.worldmodel.diffusion.self_forcing`): those clips' context
    frames are the last n_ctx frames of a window the model samples (no gradient) from the true frames before
    them, as in a rollout's second round, and the loss targets the true frames after them. The training windows
    are cut 2 num_frames - n_ctx long (the other clips use their first num_frames). Costs a sampling pass of
    `self_forcing_steps` on those clips per step. 0 = off."""
    self_forcing_steps: int = 0
    """Sampling steps of that pass (0 = sample_steps, the sampler the model is scored with)."""
    self_forcing_start: float = 0.0
    """Self-force only once this fraction of the training budget has passed (of budget_minutes' elapsed time,
    else of max_steps): 0 = from the first step; e.g. 0.78 = a post-training phase over the last 22%."""
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
    budget_minutes: float = 0.0
    """Train for this much wall time instead of a step count (0 = off): the warmup + cosine schedule runs over
    the elapsed fraction of it (warmup_steps still counts steps) and training stops when it is spent; a resumed
    run continues the clock saved in its checkpoint. For a shared or busy machine, where step time varies."""
    time_limit: str = ""
    """Safety stop after this wall time of *this* process (e.g. 30m; empty: none; a resumed run gets it afresh).
    It cuts the schedule short, so size max_steps (or budget_minutes) to the time instead and keep this as a guard."""
    compile: bool = False
    """Train through `torch.compile` of the denoiser's forward (inductor; the first steps compile, minutes on a
    CPU); the EMA copy, validation and the exported weights stay the plain module."""
    fused_optimizer: bool = True
    """AdamW's fused kernel on CPU too (one kernel over every parameter instead of a loop of small ops per
    tensor: the optimizer's share of a `pusht_cpu` step halves; on CUDA the fused kernel is always used)."""
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
    checkpoint_every: int = 1000
    """Save step checkpoints and weights_latest every N steps."""
    log_every: int = 50
    """Log training scalars every N steps."""
    seed: int = 0
    """Seed for data split, init and validation noise."""
    split_seed: int | None = None
    """Seed of the train/held-out episode split alone (None = `seed`), so runs of several seeds share one
    held-out set."""
    run_name: str | None = None
    """Run directory name under runs/wm (default: a timestamp)."""
    root: str = "runs"
    """Root of run directories."""
    resume: bool = False
    """Continue the run in runs/wm/<run_name> from its last.ckpt."""
    progress_bar: bool = True
    """Show Lightning's progress bar."""
    threads: int = 0
    """torch intra-op threads on CPU (0 = torch's default; 1 avoids thrashing tiny models on busy cores)."""
    wandb: bool = False
    """Mirror metrics to Weights & Biases (Lightning's WandbLogger beside TensorBoard; needs `wandb`)."""

    RENAMED: ClassVar[dict[str, str]] = {"ckpt_every": "checkpoint_every", "cpu_threads": "threads",
                                         "max_minutes": "time_limit"}
    """Keys of config.json files written before the CLI's common vocabulary."""

    def __post_init__(self) -> None:
        if isinstance(self.time_limit, (int, float)):  # a config.json from before durations: minutes
            self.time_limit = f"{self.time_limit:g}m" if self.time_limit > 0 else ""
        if self.run_name == "":
            self.run_name = None
        if not 0.0 <= self.self_forcing <= 1.0 or self.self_forcing_steps < 0 or not 0.0 <= self.self_forcing_start < 1:
            raise ValueError(f"self_forcing={self.self_forcing} must be in [0, 1], self_forcing_steps="
                             f"{self.self_forcing_steps} >= 0 and self_forcing_start={self.self_forcing_start} in [0, 1)")
        if self.self_forcing > 0 and not 1 <= self.n_ctx < self.num_frames:
            raise ValueError(f"self_forcing needs 1 <= n_ctx ({self.n_ctx}) < num_frames ({self.num_frames})")

    def train_frames(self) -> int:
        """Frames per training window as read from the data: num_frames, or 2 num_frames - n_ctx with
        self-forcing (a rollout's first window and the true frames after it)."""
        return long_window(self.num_frames, self.n_ctx) if self.self_forcing > 0 else self.num_frames
