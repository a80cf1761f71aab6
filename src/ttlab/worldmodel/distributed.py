"""Rank-invariant data-parallel training: the same loss curve on 1 process or N with the same global batch.

Plain DDP gives each process a `DistributedSampler` shard and its own RNG stream, so 2 processes of batch b see
other clips and other noise than 1 process of batch 2b. Here each step's *global* batch is a function of
(seed, epoch, step) only: `GlobalBatchSampler` shuffles once per epoch with a seeded generator and hands rank r
the r-th slice of every global batch, and `global_draws` draws the diffusion noise for the whole global batch
from a (seed, step) generator so each process takes its own slice. DDP averages the gradients of equal-sized
slices, which is the gradient of the global-batch mean loss (exact when every clip counts the same number of
frames in the loss, i.e. `context_frames` fixed or no clean context).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch.utils.data import Sampler


def world() -> tuple[int, int]:
    """(rank, world size) of this process: from torch.distributed once initialised, else (0, 1)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def launched_rank() -> int:
    """The global rank this process was launched as, from the launcher's environment (0 when not launched):
    Lightning's children set LOCAL_RANK / NODE_RANK; torchrun and SLURM set RANK / SLURM_PROCID."""
    for key in ("RANK", "SLURM_PROCID"):
        if os.environ.get(key, "").isdigit():
            return int(os.environ[key])
    return int(os.environ.get("LOCAL_RANK", "0") or 0) + int(os.environ.get("NODE_RANK", "0") or 0)


class GlobalBatchSampler(Sampler[int]):
    """Indices for this rank: epoch e's seeded permutation cut into global batches of `local_batch` x world
    (incomplete last batch dropped); rank r yields items [r b, (r + 1) b) of each. With one process it yields
    every global batch whole, so 1 x 2b and 2 x b see the same clips at every step."""

    def __init__(self, n: int, local_batch: int, seed: int = 0):
        if local_batch < 1 or n < 1:
            raise ValueError(f"GlobalBatchSampler: need n >= 1 and local_batch >= 1, got {n}, {local_batch}")
        self.n, self.local_batch, self.seed, self.epoch = n, local_batch, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def _global(self) -> int:
        return self.local_batch * world()[1]

    def __len__(self) -> int:
        return (self.n // self._global()) * self.local_batch

    def __iter__(self):
        rank, size = world()
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        perm = torch.randperm(self.n, generator=g)
        G, b = self.local_batch * size, self.local_batch
        if self.n < G:
            raise ValueError(f"GlobalBatchSampler: {self.n} training windows cannot fill one global batch of {G}")
        for k in range(self.n // G):
            yield from perm[k * G + rank * b:k * G + (rank + 1) * b].tolist()


def global_draws(obj, local_batch: int, frames: int, shape: tuple[int, ...], seed: int, step: int,
                 device: torch.device) -> dict[str, torch.Tensor]:
    """This rank's slice of the step's random draws (levels, clean prefix, noise) for the global batch."""
    rank, size = world()
    g = torch.Generator(device=device).manual_seed(seed * 1_000_003 + step)
    d = obj.draw(local_batch * size, frames, shape, device, g)
    sl = slice(rank * local_batch, (rank + 1) * local_batch)
    return {k: v[sl] for k, v in d.items()}
