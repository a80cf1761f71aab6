"""Training clips whose context is the model's own output: the context a rollout's second round sees.

A rollout feeds the model its own frames: after the first window every context frame is a generated one,
with the generated frame's errors (speckle, a softened edge). A model trained only on true context never
sees those errors and copies them forward (with `delta`, by construction). Self-forcing (and scheduled
sampling before it) trains on the model's own context instead. Here: from a true clip of `window + G`
frames (G = window - n_ctx), the model samples its first window from the first n_ctx true frames, exactly
as `rollout` does, and the training clip is the last n_ctx frames of that window followed by the G true
frames after it, with the actions `rollout` would give that round. The loss then targets the true future
from a generated context, so the model learns to continue from, and repair, what it draws.

No gradient flows through the sampling (the generated context is data, as in scheduled sampling and DAgger).
"""

from __future__ import annotations

import torch

from ttlab.worldmodel.diffusion.objective import Objective
from ttlab.worldmodel.diffusion.samplers import sample_window


def long_window(window: int, n_ctx: int) -> int:
    """Frames a self-forcing clip is cut from: the first window plus the G = window - n_ctx frames after it."""
    if not 1 <= n_ctx < window:
        raise ValueError(f"self-forcing: need 1 <= n_ctx ({n_ctx}) < window ({window})")
    return 2 * window - n_ctx


@torch.no_grad()
def rollout_context_clips(model, obj: Objective, frames: torch.Tensor, actions: torch.Tensor, window: int,
                          n_ctx: int, n_steps: int, generator: torch.Generator | None = None,
                          autocast_dtype: torch.dtype | None = None, clip: float | None = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """frames (B, 2 window - n_ctx, C, H, W), actions (B, 2 window - n_ctx, A) -> (clip (B, window, C, H, W),
    clip actions (B, window, A)): n_ctx frames the model generated from frames[:, :n_ctx], then the true frames
    window .. 2 window - n_ctx - 1; the actions are those of that stretch with the first zeroed (the data
    contract of a window's first frame, as `rollout` feeds them). `clip` bounds the sampled pixels (None for
    latents)."""
    L = long_window(window, n_ctx)
    if frames.shape[1] != L or actions.shape[1] != L:
        raise ValueError(f"self-forcing: need {L} frames and actions (window {window}, n_ctx {n_ctx}), got "
                         f"{frames.shape[1]} and {actions.shape[1]}")
    first_acts = actions[:, :window].clone()  # (B, window, A)
    first_acts[:, 0] = 0
    first = sample_window(model, obj, frames[:, :n_ctx], first_acts, window - n_ctx, n_steps,
                          generator=generator, clip=clip, autocast_dtype=autocast_dtype)  # (B, window, C, H, W)
    ctx = first[:, window - n_ctx:window].to(frames.dtype)  # (B, n_ctx, C, H, W): generated when G >= n_ctx
    out = torch.cat([ctx, frames[:, window:]], dim=1)  # (B, window, C, H, W)
    acts = actions[:, window - n_ctx:].clone()  # (B, window, A)
    acts[:, 0] = 0
    return out, acts
