"""Branched PushT clips as training data: one context, several futures that only the actions tell apart.

On the smooth-pusher data the context frames explain most of the future (the agent's velocity is visible in 2
frames, the agent is 0.27% of the image), so a model can lower the loss a long way without reading its
actions. A branched clip (`ttlab.worldmodel.data.pusht.branch_clips`) replays one gym-pusht episode up to the
last context frame and then sends the pusher's target off in one of `branches` directions: the context frames
of the branches are bit-identical and only the actions after them say which future happens.

`BranchConfig.frac` of every training batch is drawn from a pool of such clips:

  - `branch_pool` simulates `contexts` contexts x `branches` branches once, deterministically (context i uses
    episode seed (seed, i), a start step, a rotation of the branch directions and a speed drawn from
    (seed, i)), and caches them in one `.npz` under `cache_dir`, named by everything that shapes them;
  - `BranchPoolDataset` serves the clips as training items (the window dataset's format and action
    normalisation);
  - `MixedBatchSampler` builds every global batch from (1 - frac) shuffled windows and frac pool clips, as a
    function of (seed, epoch, batch) only, and hands each rank its slice (the rank-invariant contract of
    `ttlab.worldmodel.distributed`).

The contexts come from their own episode seeds, never from the dataset's episodes, so held-out windows stay
held out.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from ttlab.common.checkpoint import atomic_write_bytes
from ttlab.common.logging import progress
from ttlab.worldmodel.data.episodes import DataError
from ttlab.worldmodel.data.pusht import branch_clips, episode_seed
from ttlab.worldmodel.data.windows import ActionStats, to_model_frames, window_actions
from ttlab.worldmodel.distributed import world

SEED_TAG = 7_413  # mixed into the contexts' episode seeds, so they are not the dataset's (seed, i) episodes
POOL_VERSION = 2  # bump when the way a pool is simulated changes: old cache files are then not reused


@dataclass
class BranchConfig:
    """Branched clips in training: a share of each batch shows one context with action-determined futures."""

    frac: float = 0.0
    """Share of every training batch drawn from the branched-clip pool (0 = off)."""
    contexts: int = 256
    """Contexts in the pool (each gives `branches` clips)."""
    branches: int = 4
    """Futures per context; their directions are evenly spaced, rotated by a random angle per context."""
    seed: int = 1
    """Seed of the pool (episode seeds, starts, rotations, speeds)."""
    start_min: int = 10
    """Earliest raw step of a clip's first frame."""
    start_max: int = 100
    """Latest raw step of a clip's first frame."""
    speed_min: float = 5.0
    """Slowest branch target speed (world units per raw step; 512 units = the image side)."""
    speed_max: float = 11.0
    """Fastest branch target speed (the smooth pusher moves its target at 4-11 units per step)."""
    cache_dir: str = "data/branches"
    """Directory of the cached pools (one .npz per configuration)."""


def check_branch_config(c: BranchConfig, batch_size: int) -> int:
    """Pool clips per global batch of `batch_size` (after validation; a bad field raises naming it)."""
    if not 0.0 <= c.frac < 1.0:
        raise ValueError(f"--branch.frac {c.frac}: must be in [0, 1)")
    if c.frac == 0:
        return 0
    if c.contexts < 1 or c.branches < 2:
        raise ValueError(f"--branch.contexts {c.contexts} / --branch.branches {c.branches}: need >= 1 and >= 2")
    if not 0 <= c.start_min <= c.start_max:
        raise ValueError(f"--branch.start-min {c.start_min} / --branch.start-max {c.start_max}: need 0 <= min <= max")
    if not 0 < c.speed_min <= c.speed_max:
        raise ValueError(f"--branch.speed-min {c.speed_min} / --branch.speed-max {c.speed_max}: need 0 < min <= max")
    k = int(round(c.frac * batch_size))
    if not 1 <= k < batch_size:
        raise ValueError(f"--branch.frac {c.frac} of a batch of {batch_size} is {k} clips: need 1 .. batch - 1")
    return k


def context_plan(c: BranchConfig, i: int) -> dict[str, float]:
    """Context i's episode seed, start step, rotation of the branch directions and speed: a function of (seed, i)."""
    rng = np.random.default_rng([SEED_TAG, c.seed, i])
    return {"seed": episode_seed(SEED_TAG + c.seed, i), "start": int(rng.integers(c.start_min, c.start_max + 1)),
            "angle": float(rng.uniform(0.0, 2 * np.pi / c.branches)),
            "speed": float(rng.uniform(c.speed_min, c.speed_max))}


def pool_key(c: BranchConfig, resolution: int, num_frames: int, n_ctx: int, frame_interval: int) -> str:
    spec = {k: v for k, v in asdict(c).items() if k not in ("frac", "cache_dir")}
    spec |= {"resolution": resolution, "num_frames": num_frames, "n_ctx": n_ctx, "frame_interval": frame_interval,
             "version": POOL_VERSION}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def simulate_pool(c: BranchConfig, resolution: int, num_frames: int, n_ctx: int, frame_interval: int,
                  show_progress: bool | None = None) -> dict[str, np.ndarray]:
    """frames uint8 (N, F, r, r, 3), raw rel_actions and abs_actions float32 (N, n_raw, 2), group (N,) and
    branch (N,) with N = contexts x branches, context-major."""
    frames, acts, abs_acts = [], [], []
    with progress(c.contexts, "branched clips", disable=None if show_progress is None else not show_progress) as bar:
        for i in range(c.contexts):
            p = context_plan(c, i)
            d = branch_clips(p["seed"], start=p["start"], branches=c.branches, num_frames=num_frames, n_ctx=n_ctx,
                             frame_interval=frame_interval, speed=p["speed"], resolution=resolution, angle=p["angle"])
            frames.append(d["frames"])
            acts.append(d["rel_actions"])
            abs_acts.append(d["abs_actions"])
            bar.advance(1)
    return {"frames": np.concatenate(frames), "rel_actions": np.concatenate(acts),
            "abs_actions": np.concatenate(abs_acts), "group": np.repeat(np.arange(c.contexts), c.branches),
            "branch": np.tile(np.arange(c.branches), c.contexts)}


def branch_pool(c: BranchConfig, resolution: int, num_frames: int, n_ctx: int, frame_interval: int,
                show_progress: bool | None = None) -> tuple[dict[str, np.ndarray], Path, bool]:
    """The pool for this configuration: read from the cache, or simulated and cached (atomically).
    Returns (pool, cache file, whether it was simulated now)."""
    path = Path(c.cache_dir) / f"branches_{pool_key(c, resolution, num_frames, n_ctx, frame_interval)}.npz"
    if path.exists():
        try:
            with np.load(path) as z:
                pool = {k: z[k] for k in ("frames", "rel_actions", "abs_actions", "group", "branch")}
        except (OSError, ValueError, KeyError) as e:
            raise DataError(f"unreadable branched-clip pool ({type(e).__name__}: {e}); delete it to rebuild",
                            path=path) from None
        return pool, path, False
    pool = simulate_pool(c, resolution, num_frames, n_ctx, frame_interval, show_progress)
    buf = io.BytesIO()
    np.savez(buf, **pool)
    atomic_write_bytes(path, buf.getvalue())
    return pool, path, True


class BranchPoolDataset(Dataset):
    """Pool clips as training items: {"frames": float32 (F, 3, H, W) in [-1, 1], "actions": float32
    (F, A * interval), "episode": -1 - group, "start": clip index}, actions normalised like the windows' (relative:
    the PD target minus the agent, else the target itself, as the dataset's actions are)."""

    def __init__(self, pool: dict[str, np.ndarray], action_stats: ActionStats, num_frames: int, frame_interval: int,
                 relative: bool = True):
        f = pool["frames"]
        if f.ndim != 5 or f.shape[1] != num_frames:
            raise DataError(f"branched-clip pool frames {f.shape}: expected (N, {num_frames}, H, W, 3)")
        self.frames, self.group = f, pool["group"]
        raw = pool["rel_actions" if relative else "abs_actions"]  # (N, n_raw, 2): the dataset's kind of action
        acts = [window_actions(action_stats.normalize(a), 0, num_frames, frame_interval) for a in raw]
        self.actions = np.stack(acts)  # (N, F, A * interval)

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"frames": to_model_frames(self.frames[i]), "actions": torch.from_numpy(self.actions[i]),
                "episode": -1 - int(self.group[i]), "start": int(i)}


class MixedBatchSampler(Sampler[int]):
    """Indices into ConcatDataset([windows, pool]): every global batch of `local_batch` x world holds
    `pool_per_batch` x world pool clips (drawn without replacement within the batch) and the next windows of epoch
    e's seeded permutation, shuffled together by a (seed, epoch, batch) generator; rank r yields its slice."""

    def __init__(self, n_windows: int, n_pool: int, local_batch: int, pool_per_batch: int, seed: int = 0):
        if n_windows < 1 or n_pool < 1 or not 1 <= pool_per_batch < local_batch:
            raise ValueError(f"MixedBatchSampler: need windows, pool >= 1 and 1 <= pool_per_batch < batch, got "
                             f"{n_windows}, {n_pool}, {pool_per_batch}, {local_batch}")
        if pool_per_batch > n_pool:
            raise ValueError(f"MixedBatchSampler: {pool_per_batch} pool clips per batch from a pool of {n_pool}")
        self.n_windows, self.n_pool, self.local_batch = n_windows, n_pool, local_batch
        self.pool_per_batch, self.seed, self.epoch = pool_per_batch, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def _sizes(self) -> tuple[int, int]:
        """(global batch, windows per global batch)."""
        size = world()[1]
        return self.local_batch * size, (self.local_batch - self.pool_per_batch) * size

    def __len__(self) -> int:
        G, w = self._sizes()
        return (self.n_windows // w) * self.local_batch

    def __iter__(self):
        rank, _ = world()
        G, w = self._sizes()
        if self.n_windows < w:
            raise ValueError(f"MixedBatchSampler: {self.n_windows} training windows cannot fill one batch ({w})")
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        perm = torch.randperm(self.n_windows, generator=g)
        b = self.local_batch
        for k in range(self.n_windows // w):
            gk = torch.Generator().manual_seed((self.seed * 1_000_003 + self.epoch) * 100_003 + k)
            pool = self.n_windows + torch.randperm(self.n_pool, generator=gk)[:G - w]
            batch = torch.cat([perm[k * w:(k + 1) * w], pool])  # (G,)
            batch = batch[torch.randperm(G, generator=gk)]
            yield from batch[rank * b:(rank + 1) * b].tolist()
