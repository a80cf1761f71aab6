"""Schedules vs diffusers, target conversions, level sampling, Min-SNR weights, samplers and rollout."""

from __future__ import annotations

import pytest
import torch

from ttlab.worldmodel.diffusion import DiffusionConfig, Objective, rollout, sample_window, scheduling_matrix
from ttlab.worldmodel.diffusion import targets as tg
from ttlab.worldmodel.diffusion.samplers import flow_euler_step
from ttlab.worldmodel.diffusion.schedules import alphas_cumprod, make_betas
from ttlab.worldmodel.diffusion.timesteps import logit_normal_pdf, sample_levels


@pytest.mark.parametrize("schedule", ["linear", "squaredcos_cap_v2"])
@pytest.mark.parametrize("ztsnr", [False, True])
def test_schedules_match_diffusers_ddpm_scheduler(schedule, ztsnr):
    from diffusers import DDPMScheduler

    ref = DDPMScheduler(num_train_timesteps=1000, beta_schedule=schedule, rescale_betas_zero_snr=ztsnr)
    ours = alphas_cumprod(make_betas(schedule, 1000, ztsnr))
    assert torch.allclose(ours.float(), ref.alphas_cumprod.float(), atol=1e-6)


def test_schedule_golden_numbers():
    lin = alphas_cumprod(make_betas("linear", 1000))
    assert lin[0].item() == pytest.approx(0.9999, abs=1e-12)
    assert lin[-1].item() == pytest.approx(4.0358e-05, rel=1e-3)
    cos = alphas_cumprod(make_betas("squaredcos_cap_v2", 1000, zero_terminal_snr=True))
    assert cos[-1].item() == 0.0
    assert cos[0].item() == pytest.approx(alphas_cumprod(make_betas("squaredcos_cap_v2", 1000))[0].item())
    assert cos[499].item() == pytest.approx(0.4923, abs=2e-3)


def test_target_conversions_round_trip():
    g = torch.Generator().manual_seed(0)
    x0, eps = torch.randn(5, 8, generator=g), torch.randn(5, 8, generator=g)
    abar = torch.tensor([0.0, 0.1, 0.5, 0.9, 0.9999])[:, None]
    x_t = tg.add_noise(x0, eps, abar)
    for target in ("v", "x", "eps"):
        pred = tg.diffusion_target(x0, eps, abar, target)
        x0_hat, eps_hat = tg.diffusion_x0_eps(pred, x_t, abar, target)
        ok = slice(None) if target == "v" else (slice(1, None) if target == "eps" else slice(0, 4))
        assert torch.allclose(x0_hat[ok], x0[ok], atol=1e-4), target
        assert torch.allclose(eps_hat[ok], eps[ok], atol=1e-4), target
    # v <-> eps <-> x: converting a v prediction to eps and back to v is the identity
    v = tg.diffusion_target(x0, eps, abar, "v")
    x0_v, eps_v = tg.diffusion_x0_eps(v, x_t, abar, "v")
    assert torch.allclose(tg.diffusion_target(x0_v, eps_v, abar, "eps"), eps, atol=1e-5)
    assert torch.allclose(tg.diffusion_target(x0_v, eps_v, abar, "x"), x0, atol=1e-5)
    s = torch.tensor([0.0, 0.3, 1.0])[:, None]
    xs = tg.flow_noise(x0[:3], eps[:3], s)
    x0f, epsf = tg.flow_x0_eps(tg.flow_target(x0[:3], eps[:3]), xs, s)
    assert torch.allclose(x0f, x0[:3], atol=1e-5) and torch.allclose(epsf, eps[:3], atol=1e-5)


def test_min_snr_weights_golden():
    snr = torch.tensor([0.0, 1.0, 5.0, 20.0])
    assert torch.allclose(tg.min_snr_weight(snr, 5.0, "v"), torch.tensor([0.0, 0.5, 5 / 6, 5 / 21]))
    assert torch.allclose(tg.min_snr_weight(snr, 5.0, "eps"), torch.tensor([0.0, 1.0, 1.0, 0.25]))
    assert torch.allclose(tg.min_snr_weight(snr, 5.0, "x"), torch.tensor([0.0, 0.2, 1.0, 1.0]))
    assert torch.equal(tg.min_snr_weight(snr, 0.0, "v"), torch.ones(4))
    assert torch.equal(tg.min_snr_weight(snr, 5.0, "flow"), torch.ones(4))


def test_logit_normal_levels_are_independent_per_frame_and_follow_the_density():
    g = torch.Generator().manual_seed(0)
    u = sample_levels(20000, 4, "logit_normal", generator=g)
    assert u.shape == (20000, 4) and 0 < u.min() and u.max() < 1
    assert abs(torch.corrcoef(u[:, :2].T)[0, 1]) < 0.03  # diffusion forcing: frames independent
    hist = torch.histc(u.flatten(), bins=10, min=0, max=1) / u.numel() * 10
    centers = torch.arange(10) / 10 + 0.05
    assert torch.allclose(hist, logit_normal_pdf(centers), atol=0.08)
    same = sample_levels(8, 4, "uniform", generator=g, per_frame=False)
    assert torch.equal(same, same[:, :1].expand(8, 4))


def test_eps_with_zero_terminal_snr_is_refused():
    with pytest.raises(ValueError, match="eps"):
        DiffusionConfig(target="eps", zero_terminal_snr=True)


def test_scheduling_matrices_golden():
    assert scheduling_matrix("full_sequence", 3, 2).tolist() == [[3, 3], [2, 2], [1, 1], [0, 0]]
    assert scheduling_matrix("pyramid", 3, 3).tolist() == [[3, 3, 3], [2, 3, 3], [1, 2, 3], [0, 1, 2], [0, 0, 1],
                                                            [0, 0, 0]]
    assert scheduling_matrix("sequential", 2, 2).tolist() == [[2, 2], [1, 2], [0, 2], [0, 1], [0, 0]]


class Oracle(torch.nn.Module):
    """A perfect denoiser: knows the clean clip and answers the exact target at every level."""

    def __init__(self, obj: Objective, x0: torch.Tensor):
        super().__init__()
        self.obj, self.x0 = obj, x0

    def forward(self, x_t, t, actions):
        level = t / self.obj.T if self.obj.flow else t.round().long()
        clean = level <= 0 if self.obj.flow else torch.zeros_like(level, dtype=torch.bool)
        x0 = self.x0
        if self.obj.flow:
            s = self.obj._bcast(level.float().clamp(min=1e-6), x_t)
            eps = (x_t - (1 - s) * x0) / s
        else:
            ab = self.obj._bcast(self.obj.schedule.abar_at(level), x_t)
            eps = (x_t - ab.sqrt() * x0) / (1 - ab).sqrt()
        eps = torch.where(clean[..., None, None, None], torch.zeros_like(eps), eps)
        return self.obj.target(x0, eps, level)


@pytest.mark.parametrize("target", ["v", "x", "flow"])
@pytest.mark.parametrize("mode", ["full_sequence", "pyramid", "sequential"])
def test_ddim_with_oracle_denoiser_recovers_x0(target, mode):
    cfg = DiffusionConfig(target=target, zero_terminal_snr=target != "flow")
    obj = Objective(cfg)
    g = torch.Generator().manual_seed(0)
    x0 = torch.rand(2, 4, 3, 8, 8, generator=g) * 2 - 1
    out = sample_window(Oracle(obj, x0), obj, x0[:, :1], torch.zeros(2, 4, 2), n_gen=3, n_steps=5, mode=mode,
                        history_noise=0.1, generator=g)
    assert out.shape == x0.shape
    assert torch.allclose(out, x0, atol=1e-3)


def test_flow_step_equals_euler():
    obj = Objective(DiffusionConfig(target="flow", zero_terminal_snr=False))
    g = torch.Generator().manual_seed(0)
    x, u = torch.randn(2, 3, 1, 4, 4, generator=g), torch.randn(2, 3, 1, 4, 4, generator=g)
    s, s2 = torch.full((2, 3), 0.7), torch.full((2, 3), 0.4)
    x0, eps = obj.x0_eps(u, x, s)
    assert torch.allclose(obj.noised(x0, eps, s2), flow_euler_step(x, u, 0.7, 0.4), atol=1e-6)


def test_rollout_slides_beyond_the_window():
    obj = Objective(DiffusionConfig())
    calls = []

    def model(x, t, a):
        calls.append(x.shape[1])
        return torch.zeros_like(x)

    start = torch.randn(1, 2, 3, 8, 8)
    out = rollout(model, obj, start, torch.zeros(1, 11, 2), window=4, n_ctx=2, n_steps=3)
    assert out.shape == (1, 11, 3, 8, 8)
    assert torch.equal(out[:, :2], start)
    assert set(calls) == {4, 3}  # 4 full windows (2 ctx + 2 gen), last one 2 ctx + 1 gen
    with pytest.raises(ValueError, match="n_ctx"):
        rollout(model, obj, start, torch.zeros(1, 11, 2), window=2, n_ctx=2)


def test_loss_is_finite_and_weighted():
    obj = Objective(DiffusionConfig(target="v"))
    model = lambda x, t, a: torch.zeros_like(x)
    loss, stats = obj.loss(model, torch.randn(4, 3, 3, 8, 8), torch.zeros(4, 3, 2), torch.Generator().manual_seed(0))
    assert torch.isfinite(loss) and 0 < loss < stats["mse"]
