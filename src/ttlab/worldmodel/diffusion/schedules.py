"""Discrete DDPM noise schedules: linear and cosine (`squaredcos_cap_v2`), with zero-terminal-SNR rescaling.

All functions are pure and work in float64; they reproduce diffusers' `DDPMScheduler` numbers
(`beta_schedule="linear" | "squaredcos_cap_v2"`, `rescale_betas_zero_snr=True`), which the tests check.
Timestep t in {0, ..., T-1}; x_t = sqrt(abar_t) x_0 + sqrt(1 - abar_t) eps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

SCHEDULES = ("linear", "squaredcos_cap_v2")


def linear_betas(T: int, beta_start: float = 1e-4, beta_end: float = 0.02) -> torch.Tensor:
    return torch.linspace(beta_start, beta_end, T, dtype=torch.float64)  # (T,)


def cosine_betas(T: int, max_beta: float = 0.999, s: float = 0.008) -> torch.Tensor:
    """Nichol & Dhariwal: abar(t) = cos^2((t/T + s) / (1 + s) * pi/2), beta_t = 1 - abar(t+1)/abar(t), capped."""

    def abar(u: float) -> float:
        return math.cos((u + s) / (1 + s) * math.pi / 2) ** 2

    return torch.tensor([min(1 - abar((i + 1) / T) / abar(i / T), max_beta) for i in range(T)], dtype=torch.float64)


def rescale_zero_terminal_snr(betas: torch.Tensor) -> torch.Tensor:
    """Lin et al. 2023, Alg. 1: shift/scale sqrt(abar) so that abar_{T-1} = 0 exactly and abar_0 is unchanged."""
    sqrt_ab = torch.cumprod(1.0 - betas, dim=0).sqrt()  # (T,)
    first, last = sqrt_ab[0].clone(), sqrt_ab[-1].clone()
    sqrt_ab = (sqrt_ab - last) * first / (first - last)
    ab = sqrt_ab**2
    alphas = torch.cat([ab[:1], ab[1:] / ab[:-1]])
    return 1.0 - alphas


def make_betas(schedule: str, T: int = 1000, zero_terminal_snr: bool = False) -> torch.Tensor:
    if schedule == "linear":
        betas = linear_betas(T)
    elif schedule == "squaredcos_cap_v2":
        betas = cosine_betas(T)
    else:
        raise ValueError(f"noise schedule {schedule!r}: expected one of {', '.join(SCHEDULES)}")
    return rescale_zero_terminal_snr(betas) if zero_terminal_snr else betas


def alphas_cumprod(betas: torch.Tensor) -> torch.Tensor:
    return torch.cumprod(1.0 - betas, dim=0)


@dataclass
class NoiseSchedule:
    """abar_t as a float32 table on a device, with the lookups the training loss and samplers need."""

    abar: torch.Tensor  # (T,)

    @classmethod
    def build(cls, schedule: str = "squaredcos_cap_v2", T: int = 1000, zero_terminal_snr: bool = True,
              device: str | torch.device = "cpu") -> NoiseSchedule:
        return cls(alphas_cumprod(make_betas(schedule, T, zero_terminal_snr)).float().to(device))

    @property
    def T(self) -> int:
        return self.abar.shape[0]

    def to(self, device: str | torch.device) -> NoiseSchedule:
        return NoiseSchedule(self.abar.to(device))

    def abar_at(self, t: torch.Tensor) -> torch.Tensor:
        """abar for integer timesteps t (any shape); t = -1 means clean (abar = 1)."""
        ab = self.abar[t.clamp(min=0).long()]
        return torch.where(t < 0, torch.ones_like(ab), ab)

    def snr(self, t: torch.Tensor) -> torch.Tensor:
        ab = self.abar_at(t)
        return ab / (1 - ab).clamp(min=1e-20)
