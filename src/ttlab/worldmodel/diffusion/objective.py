"""The diffusion process around the denoiser: how frames are noised, what the model regresses, the loss.

One `Objective` covers the four targets. A noise *level* is a float tensor per frame:
  - DDPM targets (v, x, eps): an integer timestep t in {0, ..., T-1}, or -1 for a clean frame;
  - flow: a time s in [0, 1] (0 clean, 1 pure noise).
The denoiser always sees `model_time(level)`, a float in [0, T): t itself, or s * T for flow.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

import ttlab.worldmodel.diffusion.targets as tg
from ttlab.worldmodel.diffusion.schedules import NoiseSchedule
from ttlab.worldmodel.diffusion.timesteps import levels_to_timesteps, sample_levels


@dataclass
class DiffusionConfig:
    """Noise process and training objective."""

    target: str = "v"
    """Prediction target: v | x | eps | flow."""
    schedule: str = "squaredcos_cap_v2"
    """Noise schedule for v/x/eps: linear | squaredcos_cap_v2."""
    zero_terminal_snr: bool = True
    """Rescale the schedule so the last timestep is pure noise (v/x only; eps cannot predict there)."""
    timesteps: int = 1000
    """Number of discrete diffusion timesteps T."""
    snr_gamma: float = 5.0
    """Min-SNR-gamma loss weighting (0 disables; flow is never SNR-weighted)."""
    timestep_sampling: str = "logit_normal"
    """Per-frame training level distribution: logit_normal | uniform."""
    logit_mean: float = 0.0
    """Mean of the logit-normal level distribution."""
    logit_std: float = 1.0
    """Std of the logit-normal level distribution."""
    per_frame: bool = True
    """Independent level per frame (diffusion forcing); False = one level per clip."""
    clean_context_prob: float = 0.0
    """Probability that a training clip starts with clean frames (a uniform count in 1..F-1, level -1, left
    out of the loss): the state of context frames at sampling time, which per-frame logit-normal levels
    almost never produce (P(t < 50) is about 0.2%)."""
    context_frames: int = 0
    """Clean frames at the start of a clip drawn to have them: 0 = a uniform count in 1..F-1, else exactly
    this many (the sampler's context length)."""
    residual: bool = False
    """x target only: the model predicts the change from the last clean context frame (x0 = anchor + output),
    so copying the last frame is the zero function and the model learns only what moves. Needs every clip
    to start clean (clean_context_prob = 1)."""
    delta: bool = False
    """Any target: the process runs on the change from the last clean context frame, y = delta_scale (x -
    anchor), and the model sees the anchor as extra input channels (its `cond_channels`). Sampling starts
    from noise in y and returns anchor + y / delta_scale, so copying the last frame is y = 0 and earlier
    context frames enter as their (clean) change from it. Needs every clip to start clean."""
    delta_scale: float = 1.0
    """Multiplier on the change before noising (the change is sparse and small; > 1 raises its SNR)."""
    change_weight: float = 0.0
    """Extra loss weight on the pixels that change between the anchor (the last clean context frame) and the
    target frame: a pixel's squared error counts 1 + change_weight times where any channel moved by more than
    `change_threshold`. The moving agent is a tiny part of the image but a large part of what the actions
    decide. 0 = off; needs `delta` or `residual` (an anchor)."""
    change_threshold: float = 0.1
    """A pixel has changed when some channel moved by more than this (frames in [-1, 1])."""
    context_noise: float = 0.0
    """Training only: each clip draws sigma ~ U(0, context_noise) and its clean context frames get sigma N(0, 1)
    added (frames in [-1, 1]; with `delta`/`residual` before the anchor is taken, so the model learns to
    continue from, and repair, an imperfect last frame), while the loss still targets the true future. A rollout
    feeds the model its own imperfect frames; this is GameNGen's context noise augmentation, without the level as
    an input. 0 = off; needs clean context (clean_context_prob > 0)."""

    def __post_init__(self) -> None:
        tg.check_target(self.target)
        if not 0.0 <= self.clean_context_prob <= 1.0:
            raise ValueError(f"diffusion: clean_context_prob={self.clean_context_prob} must be in [0, 1]")
        if self.context_frames < 0:
            raise ValueError(f"diffusion: context_frames={self.context_frames} must be >= 0")
        if self.residual and (self.target != "x" or self.clean_context_prob != 1.0):
            raise ValueError(f"diffusion: residual=True needs target='x' and clean_context_prob=1.0 (the change is "
                             f"taken from the last clean context frame), got target={self.target!r}, "
                             f"clean_context_prob={self.clean_context_prob}")
        if self.delta and (self.residual or self.clean_context_prob != 1.0 or self.delta_scale <= 0):
            raise ValueError(f"diffusion: delta=True needs clean_context_prob=1.0, residual=False and delta_scale > 0, "
                             f"got {self.clean_context_prob}, {self.residual}, {self.delta_scale}")
        if self.change_weight < 0 or (self.change_weight > 0 and not (self.delta or self.residual)):
            raise ValueError(f"diffusion: change_weight={self.change_weight} must be >= 0, and > 0 needs delta or "
                             f"residual (the change is taken from the anchor frame)")
        if self.context_noise < 0 or (self.context_noise > 0 and self.clean_context_prob <= 0):
            raise ValueError(f"diffusion: context_noise={self.context_noise} must be >= 0, and > 0 needs clean "
                             f"context frames (clean_context_prob > 0)")
        if self.target == "eps" and self.zero_terminal_snr:
            raise ValueError("diffusion: target=eps with zero_terminal_snr=True is degenerate at t=T-1 "
                             "(x0 = (x_t - eps)/0); use --diffusion.zero-terminal-snr False for eps")


def change_weights(x0: torch.Tensor, anchor: torch.Tensor, weight: float, threshold: float) -> torch.Tensor:
    """Per-pixel loss weights (B, F, 1, H, W): 1 + weight where some channel of the frame x0 (B, F, C, H, W)
    differs from the anchor (B, 1, C, H, W) by more than threshold, else 1."""
    changed = ((x0.float() - anchor.float()).abs().amax(dim=2, keepdim=True) > threshold)  # (B, F, 1, H, W)
    return 1.0 + weight * changed.float()


def native_diffusion(base: DiffusionConfig, target: str) -> DiffusionConfig:
    """`base` with `target` in its native schedule, every other field kept: v / x cosine + zero-terminal SNR, eps
    linear without it (eps cannot be predicted from pure noise), flow without it and without SNR weighting."""
    tg.check_target(target)
    if target == "eps":
        return replace(base, target="eps", schedule="linear", zero_terminal_snr=False)
    if target == "flow":
        return replace(base, target="flow", zero_terminal_snr=False, snr_gamma=0.0)
    return replace(base, target=target, schedule="squaredcos_cap_v2", zero_terminal_snr=True)


class Objective:
    """Noising, targets and conversions for one `DiffusionConfig`, with the schedule table on a device."""

    def __init__(self, cfg: DiffusionConfig, device: str | torch.device = "cpu"):
        self.cfg = cfg
        self.flow = cfg.target == "flow"
        self.schedule = NoiseSchedule.build(cfg.schedule, cfg.timesteps, cfg.zero_terminal_snr and not self.flow,
                                            device)

    @property
    def T(self) -> int:
        return self.cfg.timesteps

    def to(self, device: str | torch.device) -> Objective:
        self.schedule = self.schedule.to(device)
        return self

    # ---- levels ------------------------------------------------------------------------------
    def model_time(self, level: torch.Tensor) -> torch.Tensor:
        """Float time fed to the denoiser, (B, F)."""
        return level.float() * self.T if self.flow else level.float().clamp(min=0)

    def step_level(self, m: torch.Tensor, n_steps: int) -> torch.Tensor:
        """Sampling grid: integer step index m in {0..n} (0 = clean, n = pure noise) -> level.

        DDPM uses "trailing" spacing (t_m = round(m T / n) - 1, so m = n is t = T - 1, which is pure
        noise under zero-terminal SNR); flow uses s = m / n.
        """
        if self.flow:
            return m.float() / n_steps
        t = torch.round(m.double() * self.T / n_steps).long() - 1
        return torch.where(m > 0, t, torch.full_like(t, -1))

    def fraction_level(self, frac: float, like: torch.Tensor) -> torch.Tensor:
        """A level at fraction `frac` of the way to pure noise (history stabilisation); 0 = clean."""
        if self.flow:
            return torch.full(like.shape, float(frac), device=like.device)
        t = int(frac * self.T) - 1
        return torch.full(like.shape, t, dtype=torch.long, device=like.device)

    def _bcast(self, v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return v.reshape(*v.shape, *([1] * (x.ndim - v.ndim))).to(x.dtype)

    def noised(self, x0: torch.Tensor, eps: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        """x at `level` (B, F) from clean x0 (B, F, C, H, W) and noise eps."""
        if self.flow:
            return tg.flow_noise(x0, eps, self._bcast(level, x0))
        return tg.add_noise(x0, eps, self._bcast(self.schedule.abar_at(level), x0))

    def target(self, x0: torch.Tensor, eps: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        if self.flow:
            return tg.flow_target(x0, eps)
        return tg.diffusion_target(x0, eps, self._bcast(self.schedule.abar_at(level), x0), self.cfg.target)

    def x0_eps(self, pred: torch.Tensor, x_t: torch.Tensor, level: torch.Tensor):
        """(x0, eps) implied by a model prediction at x_t."""
        if self.flow:
            return tg.flow_x0_eps(pred, x_t, self._bcast(level, x_t))
        return tg.diffusion_x0_eps(pred, x_t, self._bcast(self.schedule.abar_at(level), x_t), self.cfg.target)

    # ---- training ----------------------------------------------------------------------------
    def sample_training_levels(self, batch: int, frames: int, device, generator=None) -> torch.Tensor:
        c = self.cfg
        u = sample_levels(batch, frames, c.timestep_sampling, c.logit_mean, c.logit_std, generator, device,
                          c.per_frame)  # (B, F) in (0, 1)
        return u if self.flow else levels_to_timesteps(u, self.T)

    def clean_level(self, like: torch.Tensor) -> torch.Tensor:
        """The level of a clean (context) frame, shaped and typed like `like`: -1 (DDPM) or 0.0 (flow)."""
        return torch.full_like(like, 0.0 if self.flow else -1)

    def clean_prefix(self, batch: int, frames: int, device, generator=None) -> torch.Tensor:
        """(B, F) bool: True on the leading clean frames of the clips drawn to have them."""
        p = self.cfg.clean_context_prob
        if p <= 0 or frames < 2:
            return torch.zeros(batch, frames, dtype=torch.bool, device=device)
        draw = torch.rand(batch, generator=generator, device=device) < p  # (B,)
        if self.cfg.context_frames > 0:
            if self.cfg.context_frames >= frames:
                raise ValueError(f"diffusion: context_frames={self.cfg.context_frames} leaves no frame to predict "
                                 f"in a {frames}-frame clip")
            n = torch.full((batch,), self.cfg.context_frames, device=device)
        else:
            n = torch.randint(1, frames, (batch,), generator=generator, device=device)  # (B,) in 1..F-1
        return draw[:, None] & (torch.arange(frames, device=device)[None] < n[:, None])

    def predict(self, model, x_t: torch.Tensor, level: torch.Tensor, actions: torch.Tensor,
                anchor: torch.Tensor | None) -> torch.Tensor:
        """The model's prediction of the target at x_t; with `residual`, anchor (B, 1, C, H, W) (the last clean
        context frame) + the model's output, so the result is always in the target's own space; with `delta`,
        x_t is in change space and the anchor goes to the model as conditioning channels."""
        if self.cfg.delta:
            if anchor is None:
                raise ValueError("delta objective: an anchor frame (the last clean context frame) is required")
            return model(x_t, self.model_time(level), actions, cond=anchor[:, 0])
        pred = model(x_t, self.model_time(level), actions)
        if self.cfg.residual:
            if anchor is None:
                raise ValueError("residual objective: an anchor frame (the last clean context frame) is required")
            pred = pred.float() + anchor.float()  # fp32: a bf16 anchor would lose the copy's exactness
        return pred

    def to_delta(self, x: torch.Tensor, anchor: torch.Tensor) -> torch.Tensor:
        """Frames (B, F, C, H, W) -> the process's space: the scaled change from anchor (B, 1, C, H, W) with
        `delta`, else unchanged."""
        return (x - anchor) * self.cfg.delta_scale if self.cfg.delta else x

    def from_delta(self, y: torch.Tensor, anchor: torch.Tensor) -> torch.Tensor:
        return anchor + y / self.cfg.delta_scale if self.cfg.delta else y

    def draw(self, batch: int, frames: int, shape: tuple[int, ...], device, generator=None,
             dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
        """A training step's random draws for `batch` clips of `frames` frames of `shape` (C, H, W): the noise
        level per frame (B, F), the clean-context mask (B, F), the noise (B, F, C, H, W) and, with
        `context_noise`, each clip's context noise scale (B,) (drawn last, so the other draws do not change)."""
        level = self.sample_training_levels(batch, frames, device, generator)  # (B, F)
        ctx = self.clean_prefix(batch, frames, device, generator)  # (B, F) clean context frames, no loss
        eps = torch.randn((batch, frames, *shape), generator=generator, device=device, dtype=dtype)
        d = {"level": level, "ctx": ctx, "eps": eps}
        if self.cfg.context_noise > 0:
            d["ctx_sigma"] = torch.rand(batch, generator=generator, device=device) * self.cfg.context_noise  # (B,)
        return d

    def loss(self, model, x0: torch.Tensor, actions: torch.Tensor, generator=None,
             draws: dict[str, torch.Tensor] | None = None) -> tuple[torch.Tensor, dict]:
        """Weighted per-frame MSE of the target over the noised frames; returns (scalar loss, detached stats).
        `draws` (from `draw`) replaces drawing the levels, context mask and noise here."""
        B, Fr = x0.shape[:2]
        d = draws if draws is not None else self.draw(B, Fr, tuple(x0.shape[2:]), x0.device, generator, x0.dtype)
        ctx = d["ctx"]
        level = torch.where(ctx, self.clean_level(d["level"]), d["level"])
        eps = d["eps"].to(x0.dtype)
        anchor, pix_w = None, None
        last = (ctx.sum(1) - 1).clamp(min=0)  # (B,) every clip starts clean (checked in the config): its last clean frame
        rows = torch.arange(B, device=x0.device)
        if self.cfg.change_weight > 0:  # what changed in the world: from the clean anchor
            pix_w = change_weights(x0, x0[rows, last][:, None], self.cfg.change_weight,
                                   self.cfg.change_threshold)  # (B, F, 1, H, W)
        if self.cfg.context_noise > 0:
            # a context frame's eps is otherwise unused (it sits at the clean level), so it serves as this noise
            sigma = d["ctx_sigma"].to(x0.dtype).reshape(B, 1, 1, 1, 1)
            x0 = torch.where(ctx.reshape(B, Fr, 1, 1, 1), x0 + sigma * eps, x0)  # (B, F, C, H, W)
        if self.cfg.residual or self.cfg.delta:
            anchor = x0[rows, last][:, None]  # (B, 1, C, H, W) the (noised, with context_noise) last context frame
            x0 = self.to_delta(x0, anchor)  # (B, F, C, H, W) the change, with `delta`
        x_t = self.noised(x0, eps, level)  # (B, F, C, H, W)
        pred = self.predict(model, x_t, level, actions, anchor)
        err = (pred.float() - self.target(x0, eps, level).float()).pow(2)  # (B, F, C, H, W)
        mse = (err if pix_w is None else err * pix_w).mean(dim=(2, 3, 4))  # (B, F)
        snr = torch.zeros_like(mse) if self.flow else self.schedule.snr(level)
        w = tg.min_snr_weight(snr, self.cfg.snr_gamma, self.cfg.target) * (~ctx)  # (B, F)
        return (w * mse).sum() / (~ctx).sum().clamp(min=1), {"mse": mse[~ctx].mean().detach()}
