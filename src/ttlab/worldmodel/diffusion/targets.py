"""Prediction targets (v, x, eps for DDPM-style diffusion; flow for rectified flow) and Min-SNR-gamma weights.

Diffusion:  x_t = a x0 + s eps  with a = sqrt(abar), s = sqrt(1 - abar)
    eps-target: eps            x-target: x0            v-target: v = a eps - s x0
Flow (rectified):  x_s = (1 - s) x0 + s eps,  s in [0, 1];  target u = eps - x0 (the velocity dx/ds).

Every conversion is a pure function of tensors broadcastable against each other; the tests round-trip
them (v <-> eps <-> x). Min-SNR-gamma (Hang et al. 2023) weights the per-frame MSE so that the effective
loss is min(SNR, gamma) * ||x0 - x0_hat||^2 (eps) or min(SNR + 1, gamma) * ||x0 - x0_hat||^2 (v, x: never
zero at the zero-terminal-SNR level sampling starts from).
"""

from __future__ import annotations

import torch

TARGETS = ("v", "x", "eps", "flow")


def check_target(name: str) -> str:
    if name not in TARGETS:
        raise ValueError(f"prediction target {name!r}: expected one of {', '.join(TARGETS)}")
    return name


def add_noise(x0: torch.Tensor, eps: torch.Tensor, abar: torch.Tensor) -> torch.Tensor:
    return abar.sqrt() * x0 + (1 - abar).sqrt() * eps


def diffusion_target(x0: torch.Tensor, eps: torch.Tensor, abar: torch.Tensor, target: str) -> torch.Tensor:
    if target == "eps":
        return eps
    if target == "x":
        return x0
    if target == "v":
        return abar.sqrt() * eps - (1 - abar).sqrt() * x0
    raise ValueError(f"diffusion_target: target {target!r} is not a diffusion target (v, x, eps)")


def diffusion_x0_eps(pred: torch.Tensor, x_t: torch.Tensor, abar: torch.Tensor, target: str,
                     eps_floor: float = 1e-8) -> tuple[torch.Tensor, torch.Tensor]:
    """(x0, eps) implied by a model prediction at x_t. v is exact at every abar including 0 and 1."""
    a, s = abar.sqrt(), (1 - abar).sqrt()
    if target == "v":
        return a * x_t - s * pred, s * x_t + a * pred
    if target == "eps":
        return (x_t - s * pred) / a.clamp(min=eps_floor), pred
    if target == "x":
        return pred, (x_t - a * pred) / s.clamp(min=eps_floor)
    raise ValueError(f"diffusion_x0_eps: target {target!r} is not a diffusion target (v, x, eps)")


def flow_noise(x0: torch.Tensor, eps: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return (1 - s) * x0 + s * eps


def flow_target(x0: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    return eps - x0


def flow_x0_eps(u: torch.Tensor, x_s: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x_s - s * u, x_s + (1 - s) * u


def min_snr_weight(snr: torch.Tensor, gamma: float, target: str) -> torch.Tensor:
    """Per-sample loss weight; gamma <= 0 disables weighting (all ones).

    eps: min(snr, g) / snr, i.e. min(snr, g) on the x0 error (the paper). v and x: min(snr + 1, g) on the x0
    error -- the plain v loss's x0 weight snr + 1, capped at g -- written as min(snr + 1, g) / (snr + 1)
    for v and min(snr + 1, g) / g for x (in (0, 1] like eps). The paper's v weight min(snr, g) / (snr + 1)
    is 0 at snr = 0: under zero-terminal SNR that is exactly the level every sampler starts from (and
    about 0.02 one DDIM step later), so the model never learns its first steps; capping snr + 1 keeps
    weight 1 there, as plain v-MSE (Lin et al. 2023) has. Flow is not SNR-weighted (ones).
    """
    if gamma <= 0 or target == "flow":
        return torch.ones_like(snr)
    if target == "eps":
        return torch.where(snr > 0, snr.clamp(max=gamma) / snr.clamp(min=1e-20), torch.zeros_like(snr))
    capped = (snr + 1).clamp(max=max(gamma, 1.0))
    if target == "v":
        return capped / (snr + 1)
    if target == "x":
        return capped / max(gamma, 1.0)
    raise ValueError(f"min_snr_weight: unknown target {target!r}")
