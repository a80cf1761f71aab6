"""Autoregressive rollout beyond the training clip with a sliding window.

The model was trained on windows of `window` frames. To predict a horizon of H frames from a start clip
of `n_ctx` frames, each round keeps the last `n_ctx` known/generated frames as context, generates the
next `window - n_ctx` frames with `sample_window`, appends them, and slides on. Actions are per frame
(already shifted by one by the data pipeline: actions[:, t] led to frame t). Each window's first frame gets
the zero action, as every training window's first frame does (the data contract): the action that led to
it lies before the window, and a model never saw a first frame carry one.
"""

from __future__ import annotations

import torch

from ttlab.worldmodel.diffusion.objective import Objective
from ttlab.worldmodel.diffusion.samplers import sample_window


@torch.no_grad()
def rollout(model, obj: Objective, start: torch.Tensor, actions: torch.Tensor, window: int, n_ctx: int | None = None,
            n_steps: int = 20, mode: str = "full_sequence", history_noise: float = 0.0, clip: float | None = None,
            generator: torch.Generator | None = None, autocast_dtype: torch.dtype | None = None,
            eta: float = 0.0, keep: int = 0) -> torch.Tensor:
    """start (B, Fs, C, H, W), actions (B, H, A) for the whole horizon H >= Fs -> frames (B, H, C, H, W).

    Each round samples the window's `window - n_ctx` frames after the last `n_ctx` known ones and keeps the first
    `keep` of them (0 = all): keeping fewer re-conditions on fresher frames more often, at more rounds."""
    B, Fs = start.shape[:2]
    H = actions.shape[1]
    n_ctx = Fs if n_ctx is None else n_ctx
    if not 1 <= n_ctx < window:
        raise ValueError(f"rollout: need 1 <= n_ctx ({n_ctx}) < window ({window})")
    if keep < 0:
        raise ValueError(f"rollout: keep={keep} must be >= 0 (0 = every generated frame)")
    if Fs < n_ctx or H < Fs:
        raise ValueError(f"rollout: start has {Fs} frames, needs >= n_ctx={n_ctx}; actions cover {H} frames, need >= {Fs}")
    out = torch.empty(B, H, *start.shape[2:], device=start.device, dtype=start.dtype)  # (B, H, C, H, W)
    out[:, :Fs] = start
    k = Fs  # frames known so far
    while k < H:
        n_gen = min(window - n_ctx, H - k)
        ctx = out[:, k - n_ctx:k]  # (B, n_ctx, C, H, W)
        acts = actions[:, k - n_ctx:k + n_gen].clone()  # (B, n_ctx + n_gen, A)
        acts[:, 0] = 0  # the window's first frame: as in training
        win = sample_window(model, obj, ctx, acts, n_gen, n_steps, mode, history_noise, clip, generator,
                            autocast_dtype, eta)
        n_keep = min(keep, n_gen) if keep > 0 else n_gen
        out[:, k:k + n_keep] = win[:, n_ctx:n_ctx + n_keep]
        k += n_keep
    return out
