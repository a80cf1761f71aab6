"""Samplers with a per-frame noise level: DDIM (v/x/eps) and flow Euler, driven by a scheduling matrix.

A *scheduling matrix* M (R, F_gen) holds, for each sampling row r and each generated frame j, an integer
step index in {0..n} (n = pure noise, 0 = clean). Moving from row r to r+1, every frame whose index drops
is advanced from level(M[r, j]) to level(M[r+1, j]); the others are left as they are. Modes:
  full_sequence  all generated frames denoise together            (R = n + 1)
  pyramid        frame j lags frame j-1 by one step                (R = n + F_gen)
  sequential     frame j starts only once frame j-1 is clean       (R = n F_gen + 1)

Context frames (and generated frames once clean) are fed to the model at a fixed *history-stabilisation*
level (`history_noise`, a fraction of the way to pure noise; 0 = clean), re-noised from their clean value
with noise drawn once, and are never overwritten.

The deterministic step is the same for both families: predict (x0, eps) at the current level and
re-noise them to the next one. For DDPM levels this is DDIM with eta = 0; for flow levels it equals an
Euler step x + (s' - s) u (`flow_euler_step`, checked in the tests). `eta > 0` (DDPM targets only) is
stochastic DDIM (`ddim_step`, checked against diffusers' DDIMScheduler); eta = 1 is DDPM's posterior noise.

Defaults here are the fast ones (full_sequence, the run's own step count, clean history). The official
code's default sampler is `OFFICIAL_SAMPLER`: sequential scheduling (one frame at a time), 250 steps per
frame and history frames re-noised to level 0.02 (2% of the way to pure noise: timestep 19 of 1000);
`ttlab wm eval|rollout --official-sampler` selects it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ttlab.worldmodel.diffusion.objective import Objective

MODES = ("full_sequence", "pyramid", "sequential")
OFFICIAL_SAMPLER = {"mode": "sequential", "n_steps": 250, "history_noise": 0.02}


@dataclass
class SamplerConfig:
    """How frames are sampled (shared by `ttlab wm eval` and `ttlab wm rollout`)."""

    steps: int = 0
    """Sampling steps per frame (0 = the run's own `sample_steps`, the sampler its training matches)."""
    mode: str = "full_sequence"
    """Scheduling matrix: full_sequence | pyramid | sequential."""
    history_noise: float = 0.0
    """History-stabilisation noise level of context frames (fraction of the way to pure noise)."""
    eta: float = 0.0
    """DDIM stochasticity (0 = deterministic DDIM, 1 = DDPM posterior noise; v/x/eps targets only)."""
    official_sampler: bool = False
    """The official code's default sampler: sequential scheduling, 250 steps, history noise 0.02 (overrides
    steps, mode and history_noise)."""
    guide: str = ""
    """Autoguidance: a weaker checkpoint of the same model to steer away from, e.g. an early
    `<run>/checkpoints/step=N.ckpt` (empty = none; each step then runs both models)."""
    guidance: float = 1.0
    """Autoguidance weight w >= 1: bad + w (good - bad) (1 = the model alone)."""

    def check(self) -> None:
        """Each flag on its own, before a checkpoint is loaded: a one-line error naming the flag."""
        if self.steps < 0:
            raise ValueError(f"--sampler.steps {self.steps}: must be >= 1, or 0 for the run's own")
        if self.mode not in MODES:
            raise ValueError(f"--sampler.mode {self.mode!r}: expected one of {', '.join(MODES)}")
        if not 0.0 <= self.history_noise < 1.0:
            raise ValueError(f"--sampler.history-noise {self.history_noise}: must be in [0, 1) (0 = clean context)")
        if not self.eta >= 0.0:
            raise ValueError(f"--sampler.eta {self.eta}: must be >= 0 (0 = deterministic DDIM, 1 = DDPM)")
        if not self.guidance >= 1.0:
            raise ValueError(f"--sampler.guidance {self.guidance}: must be >= 1 (1 = the model alone)")
        if self.guidance != 1.0 and not self.guide:
            raise ValueError(f"--sampler.guidance {self.guidance}: needs --sampler.guide, the checkpoint to steer "
                             "away from")

    def resolve(self, run_steps: int, target: str | None = None) -> SamplerConfig:
        """The sampler to run: the official default when asked for, else `steps` 0 -> the run's `run_steps`.
        `target` is the run's prediction target, where known (stochastic DDIM needs a DDPM one)."""
        self.check()
        if self.eta > 0 and target == "flow":
            raise ValueError(f"--sampler.eta {self.eta}: stochastic DDIM needs a DDPM target (v, x, eps); "
                             "this run predicts flow, so use --sampler.eta 0")
        if self.official_sampler:
            o = OFFICIAL_SAMPLER
            return replace(self, steps=o["n_steps"], mode=o["mode"], history_noise=o["history_noise"])
        return replace(self, steps=self.steps if self.steps > 0 else run_steps)


def scheduling_matrix(mode: str, n_steps: int, n_frames: int) -> torch.Tensor:
    """(R, n_frames) integer step indices, first row all n_steps, last row all 0, non-increasing down rows."""
    n, j = n_steps, torch.arange(n_frames)
    if mode == "full_sequence":
        r = torch.arange(n + 1)[:, None]
        return (n - r).expand(n + 1, n_frames).clone()
    if mode == "pyramid":
        r = torch.arange(n + n_frames)[:, None]
        return (n + j[None] - r).clamp(0, n)
    if mode == "sequential":
        r = torch.arange(n * n_frames + 1)[:, None]
        return (n - (r - j[None] * n)).clamp(0, n)
    raise ValueError(f"scheduling mode {mode!r}: expected one of {', '.join(MODES)}")


def flow_euler_step(x: torch.Tensor, u: torch.Tensor, s: torch.Tensor, s_next: torch.Tensor) -> torch.Tensor:
    """x_{s'} = x_s + (s' - s) u for flow time s -> s' (s, s' broadcastable to x)."""
    return x + (s_next - s) * u


def ddim_step(x0: torch.Tensor, eps: torch.Tensor, abar: torch.Tensor, abar_next: torch.Tensor, eta: float,
              noise: torch.Tensor | None) -> torch.Tensor:
    """DDIM from level abar to abar_next (> abar, less noisy) given the predicted (x0, eps):
    x' = sqrt(abar') x0 + sqrt(1 - abar' - sigma^2) eps + sigma z,
    sigma = eta sqrt((1 - abar') / (1 - abar)) sqrt(1 - abar / abar')  (Song et al. 2021, eq. 16)."""
    sigma = eta * ((1 - abar_next) / (1 - abar).clamp(min=1e-12)).sqrt() * (1 - abar / abar_next).clamp(min=0).sqrt()
    out = abar_next.sqrt() * x0 + (1 - abar_next - sigma**2).clamp(min=0).sqrt() * eps
    return out if noise is None or eta == 0 else out + sigma * noise


@torch.no_grad()
def sample_window(model, obj: Objective, context: torch.Tensor, actions: torch.Tensor, n_gen: int,
                  n_steps: int = 20, mode: str = "full_sequence", history_noise: float = 0.0,
                  clip: float | None = None, generator: torch.Generator | None = None,
                  autocast_dtype: torch.dtype | None = None, eta: float = 0.0) -> torch.Tensor:
    """Generate `n_gen` frames after `context` (B, Fc, C, H, W) given actions (B, Fc + n_gen, A).

    Returns the whole window (B, Fc + n_gen, C, H, W) with the context frames unchanged.
    """
    B, Fc = context.shape[:2]
    Fr = Fc + n_gen
    if actions.shape[1] != Fr:
        raise ValueError(f"sample_window: actions cover {actions.shape[1]} frames, need {Fr} (context + generated)")
    if eta < 0 or (eta > 0 and obj.flow):
        raise ValueError(f"sample_window: eta={eta}: stochastic DDIM needs eta >= 0 and a DDPM target (v, x, eps), "
                         f"not {obj.cfg.target!r}" if eta > 0 else f"sample_window: eta={eta} must be >= 0")
    dev = context.device
    anchor, given = context[:, -1:], context  # anchor (B, 1, C, H, W): the last context frame
    if obj.cfg.delta:  # run the process on the change from the anchor; map back at the end
        context = obj.to_delta(context, anchor)
    M = scheduling_matrix(mode, n_steps, n_gen).to(dev)  # (R, n_gen)
    shape = (B, Fr, *context.shape[2:])
    x = torch.randn(shape, generator=generator, device=dev, dtype=context.dtype)  # (B, F, C, H, W)
    hist_eps = torch.randn(shape, generator=generator, device=dev, dtype=context.dtype)
    clean = torch.zeros(shape, device=dev, dtype=context.dtype)
    clean[:, :Fc] = context
    is_clean = torch.zeros(B, Fr, dtype=torch.bool, device=dev)
    is_clean[:, :Fc] = True
    hist_level = obj.fraction_level(history_noise, is_clean)  # (B, F)
    hist_x = None
    for r in range(M.shape[0] - 1):
        m_now = torch.cat([torch.zeros(B, Fc, dtype=M.dtype, device=dev), M[r].expand(B, n_gen)], dim=1)  # (B, F)
        m_next = torch.cat([torch.zeros(B, Fc, dtype=M.dtype, device=dev), M[r + 1].expand(B, n_gen)], dim=1)
        lvl_now, lvl_next = obj.step_level(m_now, n_steps), obj.step_level(m_next, n_steps)  # (B, F)
        hist_x = obj.noised(clean, hist_eps, hist_level)  # (B, F, C, H, W)
        cm = is_clean[:, :, None, None, None]
        x_in = torch.where(cm, hist_x, x)
        lvl_in = torch.where(is_clean, hist_level, lvl_now)
        with torch.autocast(dev.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            pred = obj.predict(model, x_in, lvl_in, actions, anchor)
        x0, eps = obj.x0_eps(pred.float().to(x.dtype), x_in, lvl_in)
        if clip is not None:
            x0 = obj.to_delta(obj.from_delta(x0, anchor).clamp(-clip, clip), anchor)
        if eta > 0:
            ab, ab_next = (obj._bcast(obj.schedule.abar_at(v), x) for v in (lvl_in, lvl_next))
            z = torch.randn(x.shape, generator=generator, device=dev, dtype=x.dtype)
            x_new = ddim_step(x0, eps, ab, ab_next, eta, z)
        else:
            x_new = obj.noised(x0, eps, lvl_next)  # re-noise to the next level (clean where next = 0)
        moving = (m_next < m_now) & ~is_clean  # (B, F)
        x = torch.where(moving[:, :, None, None, None], x_new, x)
        done = moving & (m_next == 0)
        clean = torch.where(done[:, :, None, None, None], x0, clean)
        is_clean = is_clean | done
    out = obj.from_delta(clean, anchor)
    out[:, :Fc] = given  # exactly the context given
    return out
