"""Action distributions over the policy head's output.

Discrete (the 91 classic PufferDrive actions): the head is `num_actions` logits, a Categorical.
Continuous (2 actions: acceleration, steering): the head is `[mean (n), log_std (n)]`, a diagonal
Gaussian; actions are unsquashed (the env clips them).
"""

from __future__ import annotations

import math

import torch


def _split(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = logits.shape[-1] // 2
    return logits[..., :n], logits[..., n:].clamp(-5.0, 2.0)


def sample(logits: torch.Tensor, continuous: bool, generator: torch.Generator | None = None) -> torch.Tensor:
    """Sample actions: (...,) long for discrete, (..., n) float for continuous."""
    if continuous:
        mean, log_std = _split(logits)
        noise = torch.randn(mean.shape, device=mean.device, dtype=mean.dtype, generator=generator)
        return mean + log_std.exp() * noise
    u = torch.rand(logits.shape, device=logits.device, dtype=torch.float32, generator=generator)
    gumbel = -torch.log(-torch.log(u.clamp(1e-20, 1.0 - 1e-7)))
    return (logits.float() + gumbel).argmax(dim=-1)  # Gumbel-max: one kernel, no host sync


def log_prob(logits: torch.Tensor, actions: torch.Tensor, continuous: bool) -> torch.Tensor:
    """Log-probability of `actions` (...,)."""
    if continuous:
        mean, log_std = _split(logits)
        z = (actions - mean) / log_std.exp()
        return (-0.5 * z * z - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)


def entropy(logits: torch.Tensor, continuous: bool) -> torch.Tensor:
    """Entropy (...,)."""
    if continuous:
        _, log_std = _split(logits)
        return (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def head_size(num_actions: int, continuous: bool) -> int:
    return 2 * num_actions if continuous else num_actions
