"""Autoguidance (Karras et al. 2024, "Guiding a diffusion model with a bad version of itself").

The denoiser's prediction is extrapolated away from a weaker version of the same model, such as an earlier
checkpoint of the same run: D_w = D_bad + w (D_good - D_bad). With w = 1 it is the good model alone. Unlike
classifier-free guidance it needs no unconditional model, so it applies to a model trained without condition
dropout. Each sampling step runs both models, so it costs twice the denoiser's time.

The combination is taken on the model's raw prediction. For every DDPM target (x, v, eps) and for flow, the
(x0, eps) read from it is affine in that prediction at a fixed input and level, so guiding the prediction with
weights summing to one guides x0 and eps the same way.
"""

from __future__ import annotations

import torch
from torch import nn


def autoguide(good: torch.Tensor, bad: torch.Tensor, weight: float) -> torch.Tensor:
    """bad + weight (good - bad), in float32 (the two predictions may be bf16 under autocast)."""
    g, b = good.float(), bad.float()
    return b + weight * (g - b)


class AutoGuided(nn.Module):
    """A denoiser that is `model` guided away from `guide` with `weight`; called exactly like `model`."""

    def __init__(self, model: nn.Module, guide: nn.Module, weight: float):
        super().__init__()
        if not weight >= 1.0:
            raise ValueError(f"guidance weight {weight}: must be >= 1 (1 = the model alone)")
        self.model, self.guide, self.weight = model, guide, float(weight)

    def forward(self, *args, **kwargs) -> torch.Tensor:
        return autoguide(self.model(*args, **kwargs), self.guide(*args, **kwargs), self.weight)
