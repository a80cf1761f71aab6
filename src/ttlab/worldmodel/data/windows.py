"""Training windows: the data contract's sample.

A window is `num_frames` frames taken every `frame_interval` raw steps from one episode. Frame k > 0 is
conditioned on the `frame_interval` raw actions between kept frames k-1 and k, concatenated (A x
interval wide); frame 0 gets zeros, so frame t is always paired with the action that led to it.
Actions are normalised with per-dimension mean/std of the training episodes (`ActionStats`, computed
once and saved as JSON beside a run). Episodes are split into train/val deterministically by seed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ttlab.common.checkpoint import atomic_write_text
from ttlab.worldmodel.data.episodes import DataError, EpisodeSource

SPLITS = ("train", "val", "all")


def window_starts(length: int, num_frames: int, frame_interval: int) -> np.ndarray:
    """Every start s whose window s, s + interval, ..., s + (num_frames - 1) * interval fits in `length`."""
    span = (num_frames - 1) * frame_interval + 1
    return np.arange(max(length - span + 1, 0), dtype=np.int64)


def window_actions(actions: np.ndarray, start: int, num_frames: int, frame_interval: int) -> np.ndarray:
    """(T, A) actions -> (num_frames, A * frame_interval): row k > 0 = raw actions
    start + (k-1) * interval ... start + k * interval - 1 concatenated; row 0 = zeros."""
    a_dim = actions.shape[1]
    n = (num_frames - 1) * frame_interval
    a = actions[start:start + n]  # (n, A)
    if len(a) != n:
        raise ValueError(f"window at {start} needs {n} actions, the episode has {len(actions) - start} from there")
    a = a.reshape(num_frames - 1, frame_interval * a_dim)  # (F-1, A*interval)
    return np.concatenate([np.zeros((1, frame_interval * a_dim), np.float32), a.astype(np.float32)])


@dataclass
class ActionStats:
    """Per-dimension mean/std of raw actions; `normalize` maps raw actions to roughly unit scale."""

    mean: np.ndarray  # (A,)
    std: np.ndarray  # (A,)
    count: int = 0

    def __post_init__(self) -> None:
        self.mean = np.asarray(self.mean, np.float32).reshape(-1)
        self.std = np.asarray(self.std, np.float32).reshape(-1)

    def normalize(self, actions: np.ndarray) -> np.ndarray:
        return ((actions - self.mean) / self.std).astype(np.float32)

    def denormalize(self, actions: np.ndarray) -> np.ndarray:
        return (actions * self.std + self.mean).astype(np.float32)

    def save(self, path: str | Path) -> None:

        atomic_write_text(Path(path), json.dumps({"mean": self.mean.tolist(), "std": self.std.tolist(),
                                                  "count": int(self.count)}, indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> ActionStats:
        path = Path(path)
        try:
            d = json.loads(path.read_text())
            st = cls(d["mean"], d["std"], int(d.get("count", 0)))
        except FileNotFoundError:
            raise DataError("action stats file not found", path=path) from None
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise DataError(f"not an action stats file ({type(e).__name__}: {e})", path=path) from None
        if st.mean.shape != st.std.shape or (st.std <= 0).any():
            raise DataError("action stats need mean and std of one length with std > 0", path=path)
        return st


def compute_action_stats(actions: Sequence[np.ndarray]) -> ActionStats:
    """Mean and (population) std over all rows of the given (T, A) arrays; a constant dim gets std 1."""
    total = s1 = s2 = 0
    for a in actions:
        a = np.asarray(a, np.float64)
        total += len(a)
        s1 = s1 + a.sum(0)
        s2 = s2 + (a * a).sum(0)
    if total == 0:
        raise DataError("no actions to compute normalisation statistics from")
    mean = s1 / total
    std = np.sqrt(np.maximum(s2 / total - mean * mean, 0.0))
    std = np.where(std < 1e-6, 1.0, std)
    return ActionStats(mean, std, total)


def split_episodes(n: int, val_fraction: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic split of episodes 0..n-1 into sorted (train, val) index arrays.

    `round(n * val_fraction)` episodes go to val; with `val_fraction > 0` and n >= 2 at least one
    episode is held out and at least one kept for training.
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    n_val = int(round(n * val_fraction))
    if val_fraction > 0 and n >= 2:
        n_val = min(max(n_val, 1), n - 1)
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[n_val:]).astype(np.int64), np.sort(perm[:n_val]).astype(np.int64)


def to_model_frames(frames: np.ndarray | torch.Tensor) -> torch.Tensor:
    """uint8 (..., H, W, 3) -> float32 (..., 3, H, W) in [-1, 1]."""
    x = torch.from_numpy(np.ascontiguousarray(frames)) if isinstance(frames, np.ndarray) else frames
    if x.dtype != torch.uint8:
        raise TypeError(f"to_model_frames expects uint8 frames (..., H, W, 3), got {x.dtype}")
    return x.movedim(-1, -3).float() / 127.5 - 1.0


def _codec_device(codec: Any) -> torch.device:
    p = next(iter(codec.parameters()), None) if hasattr(codec, "parameters") else None
    return p.device if p is not None else torch.device("cpu")


class WindowDataset(torch.utils.data.Dataset):
    """Windows of a source's `split` episodes. Item: {"frames": float32 (F, C, H, W), "actions": float32
    (F, A * interval), "episode": int, "start": int}; pixels in [-1, 1], or latents when the source is
    latent or a `codec` encodes on the fly.

    `action_stats`: an `ActionStats`, a JSON path (loaded if it exists, else computed from the training
    episodes and saved there), or None (computed, not saved). Stats always come from the training
    episodes of the split (all episodes for `split="all"`), so train and val normalise alike.

    `episodes` replaces the seeded split by a given list (e.g. a published split; stats, when computed, come
    from these episodes, so give the training set's `action_stats` to a validation set), and `windows` fixes
    the windows to given (episode, start) pairs in that order (`fixed_windows`; e.g. published start indices).
    """

    def __init__(self, source: EpisodeSource, num_frames: int, frame_interval: int = 1, split: str = "train",
                 val_fraction: float = 0.1, seed: int = 0, action_stats: ActionStats | str | Path | None = None,
                 codec: Any = None, episodes: np.ndarray | None = None,
                 windows: list[tuple[int, int]] | None = None):
        if num_frames < 1 or frame_interval < 1:
            raise ValueError(f"num_frames and frame_interval must be >= 1, got {num_frames}, {frame_interval}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        self.source, self.codec = source, codec
        self.num_frames, self.frame_interval, self.split = num_frames, frame_interval, split
        n = len(source)
        if episodes is not None:  # a given split (e.g. a published list): these episodes, stats from them
            eps = np.asarray(episodes, dtype=np.int64).reshape(-1)
            train_eps = eps
        else:
            train_eps, val_eps = split_episodes(n, val_fraction, seed)
            eps = {"train": train_eps, "val": val_eps, "all": np.arange(n, dtype=np.int64)}[split]
        if len(eps) == 0:
            raise DataError(f"split {split!r} is empty: {n} episode(s) with val_fraction {val_fraction}")
        self.raw_action_dim = int(source.action_dim)
        self.action_dim = self.raw_action_dim * frame_interval
        self.action_stats = self._stats(action_stats, np.arange(n) if split == "all" and episodes is None
                                        else train_eps)
        self.fixed_windows = windows is not None
        if windows is not None:  # fixed (episode, start) windows, in the given order (published protocols)
            self.episodes = eps
            self.skipped_short = 0
            self.index_episode = np.array([w[0] for w in windows], dtype=np.int64)
            self.index_start = np.array([w[1] for w in windows], dtype=np.int64)
            return

        lengths = np.array([source.length(int(e)) for e in eps], dtype=np.int64)
        starts = [window_starts(int(t), num_frames, frame_interval) for t in lengths]
        counts = np.array([len(s) for s in starts], dtype=np.int64)
        if counts.sum() == 0:
            span = (num_frames - 1) * frame_interval + 1
            raise DataError(f"every episode of split {split!r} is shorter than a window: {num_frames} frames x "
                            f"interval {frame_interval} spans {span} steps, the longest episode has {lengths.max()}")
        self.episodes = eps
        self.skipped_short = int((counts == 0).sum())
        self.index_episode = np.repeat(eps, counts)  # (N,) source episode of each window
        self.index_start = np.concatenate(starts)  # (N,) raw step of its first frame

    def _stats(self, spec: ActionStats | str | Path | None, episodes: np.ndarray) -> ActionStats:
        if isinstance(spec, ActionStats):
            st = spec
        elif spec is not None and Path(spec).exists():
            st = ActionStats.load(spec)
        else:
            st = compute_action_stats([self.source.actions(int(e)) for e in episodes])
            if spec is not None:
                st.save(spec)
        if st.mean.shape[0] != self.raw_action_dim:
            raise DataError(f"action stats have {st.mean.shape[0]} dims, the dataset's actions have "
                            f"{self.raw_action_dim}", path=None if isinstance(spec, ActionStats) else spec)
        return st

    def __len__(self) -> int:
        return len(self.index_episode)

    def __getitem__(self, i: int) -> dict[str, Any]:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"window {i} out of range ({n} windows)")
        e, s = int(self.index_episode[i]), int(self.index_start[i])
        idx = s + np.arange(self.num_frames) * self.frame_interval  # (F,) raw steps
        try:
            frames = self.source.frames(e, idx)
            acts = window_actions(self.action_stats.normalize(self.source.actions(e)), s, self.num_frames,
                                  self.frame_interval)  # (F, A*interval)
        except DataError as err:
            raise err.at(e) from None
        if self.source.is_latent:
            x = torch.from_numpy(np.asarray(frames, np.float32))  # (F, C, h, w)
        else:
            x = to_model_frames(frames)  # (F, 3, H, W)
            if self.codec is not None:
                with torch.no_grad():
                    x = self.codec.encode(x.to(_codec_device(self.codec))).float().cpu()  # (F, C, h, w)
        return {"frames": x, "actions": torch.from_numpy(acts), "episode": e, "start": s}
