"""Training-time noise levels: one independent level per frame (diffusion forcing), uniform or logit-normal,
or always the terminal level (the model then learns the conditional mean: a deterministic predictor that
one sampling step from pure noise reads out).

A level is returned as a float `u` in (0, 1) per frame; the objective maps it to a discrete timestep
`floor(u * T)` (DDPM targets) or a flow time `s = u` (flow target). Logit-normal (SD3): u = sigmoid(n),
n ~ N(mean, std), which concentrates training on mid noise levels.
"""

from __future__ import annotations

import torch

SAMPLINGS = ("logit_normal", "uniform", "terminal")


def sample_levels(batch: int, frames: int, method: str = "logit_normal", mean: float = 0.0, std: float = 1.0,
                  generator: torch.Generator | None = None, device: str | torch.device = "cpu",
                  per_frame: bool = True) -> torch.Tensor:
    """(B, F) levels in (0, 1); `per_frame=False` gives one level per clip repeated over frames."""
    cols = frames if per_frame else 1
    if method == "logit_normal":
        n = torch.randn(batch, cols, generator=generator, device=device) * std + mean
        u = torch.sigmoid(n)
    elif method == "uniform":
        u = torch.rand(batch, cols, generator=generator, device=device)
    elif method == "terminal":  # always the last level (pure noise under zero-terminal SNR): a regressor
        u = torch.ones(batch, cols, device=device)
    else:
        raise ValueError(f"timestep sampling {method!r}: expected one of {', '.join(SAMPLINGS)}")
    return u.expand(batch, frames).contiguous()  # (B, F)


def levels_to_timesteps(u: torch.Tensor, T: int) -> torch.Tensor:
    """(…) levels in [0, 1] -> integer timesteps in {0, …, T-1} (1.0 is the last, T-1)."""
    return (u * T).floor().long().clamp(0, T - 1)


def logit_normal_pdf(u: torch.Tensor, mean: float = 0.0, std: float = 1.0) -> torch.Tensor:
    """Density of the logit-normal distribution at u in (0, 1) (used by the golden test)."""
    logit = torch.log(u / (1 - u))
    return torch.exp(-((logit - mean) ** 2) / (2 * std**2)) / (std * (2 * torch.pi) ** 0.5 * u * (1 - u))
