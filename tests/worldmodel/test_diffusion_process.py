"""Schedules vs diffusers, target conversions, level sampling, Min-SNR weights, samplers and rollout."""

from __future__ import annotations

import pytest
import torch

from ttlab.worldmodel.diffusion import (
    DiffusionConfig,
    Objective,
    native_diffusion,
    rollout,
    sample_window,
    scheduling_matrix,
)
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
    assert torch.allclose(tg.min_snr_weight(snr, 5.0, "v"), torch.tensor([1.0, 1.0, 5 / 6, 5 / 21]))
    assert torch.allclose(tg.min_snr_weight(snr, 5.0, "eps"), torch.tensor([0.0, 1.0, 1.0, 0.25]))
    assert torch.allclose(tg.min_snr_weight(snr, 5.0, "x"), torch.tensor([0.2, 0.4, 1.0, 1.0]))
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


@pytest.mark.parametrize("target", ["v", "x", "flow", "eps"])
@pytest.mark.parametrize("mode", ["full_sequence", "pyramid", "sequential"])
def test_ddim_with_oracle_denoiser_recovers_x0(target, mode):
    obj = Objective(native_diffusion(DiffusionConfig(), target))  # eps: linear, no zero-terminal SNR
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
    calls, first_actions, second_actions = [], [], []

    def model(x, t, a):
        calls.append(x.shape[1])
        first_actions.append(a[:, 0].clone())
        second_actions.append(a[:, 1].clone())
        return torch.zeros_like(x)

    start = torch.randn(1, 2, 3, 8, 8)
    actions = torch.arange(1, 12).float()[None, :, None].expand(1, 11, 2)  # frame t's action = t + 1 (never 0)
    out = rollout(model, obj, start, actions, window=4, n_ctx=2, n_steps=3)
    assert out.shape == (1, 11, 3, 8, 8)
    assert torch.equal(out[:, :2], start)
    assert set(calls) == {4, 3}  # 4 full windows (2 ctx + 2 gen), last one 2 ctx + 1 gen
    # every window's first frame gets the zero action, as every training window's first frame does
    assert all((a == 0).all() for a in first_actions)
    assert sorted({float(a[0, 0]) for a in second_actions}) == [2.0, 4.0, 6.0, 8.0, 10.0]  # the rest keep theirs
    with pytest.raises(ValueError, match="n_ctx"):
        rollout(model, obj, start, torch.zeros(1, 11, 2), window=2, n_ctx=2)


def test_rollout_keeps_the_first_frames_of_each_round_and_reconditions():
    obj = Objective(DiffusionConfig())
    ctx_seen = []

    def model(x, t, a):
        ctx_seen.append(a[0, 1, 0].item())  # the action of the window's second frame names where it starts
        return torch.zeros_like(x)

    start = torch.randn(1, 2, 3, 8, 8)
    actions = torch.arange(1, 9).float()[None, :, None].expand(1, 8, 2)
    out = rollout(model, obj, start, actions, window=5, n_ctx=2, n_steps=2, keep=1)
    assert out.shape == (1, 8, 3, 8, 8) and torch.equal(out[:, :2], start)
    # one kept frame per round: 6 rounds (windows start at frames 0..5), each run n_steps times
    assert sorted(set(ctx_seen)) == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    every = rollout(model, obj, start, actions, window=5, n_ctx=2, n_steps=2, keep=0)
    assert every.shape == out.shape
    with pytest.raises(ValueError, match="keep"):
        rollout(model, obj, start, actions, window=5, n_ctx=2, keep=-1)


def test_loss_is_finite_and_weighted():
    obj = Objective(DiffusionConfig(target="v"))
    model = lambda x, t, a: torch.zeros_like(x)
    loss, stats = obj.loss(model, torch.randn(4, 3, 3, 8, 8), torch.zeros(4, 3, 2), torch.Generator().manual_seed(0))
    assert torch.isfinite(loss) and 0 < loss < stats["mse"]


@pytest.mark.parametrize("target", ["v", "x"])
def test_loss_weight_is_not_zero_on_the_levels_zero_terminal_snr_sampling_starts_from(target):
    """Regression: Min-SNR's min(snr, g) / (snr + 1) gave weight 0 at t = T-1 (snr 0 under zero-terminal
    SNR) and ~0.02 at the next DDIM level, so the first sampling steps were never trained and a demo
    model's samples (7.5 dB) came out worse than its one-step x0 predictions (15-22 dB)."""
    obj = Objective(DiffusionConfig(target=target))
    n = 10
    first = obj.step_level(torch.tensor([n, n - 1]), n)  # the first two levels a 10-step DDIM visits
    w = tg.min_snr_weight(obj.schedule.snr(first), obj.cfg.snr_gamma, target)
    assert obj.schedule.snr(first)[0] == 0
    assert (w >= 0.2).all(), w


def test_clean_context_frames_are_trained_at_the_level_sampling_gives_context_and_left_out_of_the_loss():
    """Regression: the sampler feeds context at level -1 (model time 0); per-frame logit-normal levels
    (almost) never produce it, so clean context was out of distribution for the time embedding."""
    obj = Objective(DiffusionConfig(clean_context_prob=1.0))
    g = torch.Generator().manual_seed(0)
    ctx = obj.clean_prefix(256, 4, "cpu", g)
    assert ctx[:, 0].all() and not ctx[:, -1].any()
    assert (ctx.sum(1) >= 1).all() and (ctx.sum(1) <= 3).all() and len(set(ctx.sum(1).tolist())) == 3
    assert (ctx[:, 1:] <= ctx[:, :-1]).all()  # a prefix
    ctx_level = obj.fraction_level(0.0, torch.zeros(1, 1))  # what sample_window gives context (history_noise 0)
    assert int(ctx_level) == int(obj.clean_level(torch.zeros(1, dtype=torch.long)))

    x0 = torch.rand(4, 4, 3, 8, 8, generator=g) * 2 - 1
    seen = {}

    class Probe(torch.nn.Module):
        def forward(self, x_t, t, actions):
            seen["t"], seen["x_t"] = t, x_t
            return torch.zeros_like(x_t)

    loss_a, _ = obj.loss(Probe(), x0, torch.zeros(4, 4, 2), generator=torch.Generator().manual_seed(1))
    clean = seen["t"] == 0
    assert clean[:, 0].all() and torch.equal(seen["x_t"][:, 0], x0[:, 0])  # clean frames go in unnoised

    class WrongOnContext(Probe):  # the same prediction, except garbage on the clean frames
        def forward(self, x_t, t, actions):
            out = super().forward(x_t, t, actions)
            return torch.where((t == 0)[..., None, None, None], torch.full_like(out, 100.0), out)

    loss_b, _ = obj.loss(WrongOnContext(), x0, torch.zeros(4, 4, 2), generator=torch.Generator().manual_seed(1))
    assert torch.allclose(loss_a, loss_b)


def test_clean_context_prob_zero_keeps_the_plain_diffusion_forcing_loss():
    obj = Objective(DiffusionConfig())
    x0 = torch.rand(2, 4, 3, 8, 8)
    a, _ = obj.loss(lambda x, t, act: torch.zeros_like(x), x0, torch.zeros(2, 4, 2),
                    generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(0)
    level = obj.sample_training_levels(2, 4, "cpu", g)
    eps = torch.randn(x0.shape, generator=g)
    mse = obj.target(x0, eps, level).pow(2).mean(dim=(2, 3, 4))
    w = tg.min_snr_weight(obj.schedule.snr(level), obj.cfg.snr_gamma, "v")
    assert torch.allclose(a, (w * mse).mean())


def test_demo_preset_trains_the_levels_its_sampler_visits_first_and_clean_context():
    """Regression: the demo's logit-normal(0, 1) levels drew t >= 900 for ~0.2% of frames and t >= 990
    almost never, yet a 10-step trailing DDIM starts at t = 999 and then 899: the untrained first step's
    error carried through the chain (sampled 7.5 dB vs 15-22 dB one-step x0)."""
    from ttlab.worldmodel.presets import tiny_pusht

    cfg = tiny_pusht()
    obj = Objective(cfg.diffusion)
    g = torch.Generator().manual_seed(0)
    level = obj.sample_training_levels(4096, 4, "cpu", g)  # (B, F)
    start = obj.step_level(torch.tensor([cfg.sample_steps, cfg.sample_steps - 1]), cfg.sample_steps)
    assert (level >= start[1]).float().mean() > 0.05  # the first sampling interval is trained
    assert (level >= start[0] - 10).float().mean() > 0.005  # and the pure-noise end of it
    assert obj.clean_prefix(4096, 4, "cpu", g).any(1).float().mean() > 0.3


def test_residual_objective_makes_copy_last_the_zero_function():
    """With residual=True a model that outputs zeros predicts the last context frame for every frame:
    in training (loss = copy-last's error) and in sampling (1 step from pure noise)."""
    cfg = DiffusionConfig(target="x", timestep_sampling="terminal", clean_context_prob=1.0, context_frames=1,
                          residual=True, snr_gamma=0.0)
    obj = Objective(cfg)
    g = torch.Generator().manual_seed(0)
    x0 = torch.rand(3, 4, 3, 8, 8, generator=g) * 2 - 1
    zero = lambda x, t, a: torch.zeros_like(x)
    loss, _ = obj.loss(zero, x0, torch.zeros(3, 4, 2), generator=g)
    copy_mse = (x0[:, 1:] - x0[:, :1]).pow(2).mean()
    assert torch.allclose(loss, copy_mse, atol=1e-6)
    out = sample_window(zero, obj, x0[:, :1], torch.zeros(3, 4, 2), n_gen=3, n_steps=1, generator=g)
    assert torch.allclose(out, x0[:, :1].expand_as(out), atol=1e-6)
    plain = Objective(DiffusionConfig(target="x", timestep_sampling="terminal", clean_context_prob=1.0))
    out_plain = sample_window(zero, plain, x0[:, :1], torch.zeros(3, 4, 2), n_gen=3, n_steps=1, generator=g)
    assert torch.allclose(out_plain[:, 1:], torch.zeros_like(out_plain[:, 1:]))  # without residual: zeros


def test_residual_needs_x_target_and_clean_context():
    with pytest.raises(ValueError, match="residual=True needs target='x'"):
        DiffusionConfig(target="v", residual=True, clean_context_prob=1.0)
    with pytest.raises(ValueError, match="clean_context_prob=0.5"):
        DiffusionConfig(target="x", residual=True, clean_context_prob=0.5)


def test_terminal_levels_are_pure_noise_and_fixed_context_count():
    obj = Objective(DiffusionConfig(target="x", timestep_sampling="terminal", clean_context_prob=1.0,
                                    context_frames=2))
    lv = obj.sample_training_levels(8, 4, "cpu")
    assert (lv == obj.T - 1).all() and obj.schedule.abar_at(lv).max() == 0  # zero-terminal SNR: pure noise
    ctx = obj.clean_prefix(64, 4, "cpu", torch.Generator().manual_seed(0))
    assert (ctx.sum(1) == 2).all() and ctx[:, :2].all()
    with pytest.raises(ValueError, match="leaves no frame to predict"):
        obj.clean_prefix(2, 2, "cpu")


@pytest.mark.parametrize("eta", [0.0, 0.6, 1.0])
def test_ddim_step_matches_diffusers_ddim_scheduler_with_eta(eta):
    from diffusers import DDIMScheduler

    from ttlab.worldmodel.diffusion.samplers import ddim_step

    ref = DDIMScheduler(num_train_timesteps=1000, beta_schedule="linear", clip_sample=False, set_alpha_to_one=True)
    ref.set_timesteps(10)
    obj = Objective(DiffusionConfig(target="eps", schedule="linear", zero_terminal_snr=False))
    g = torch.Generator().manual_seed(0)
    x_t, eps_pred, z = (torch.randn(1, 1, 3, 4, 4, generator=g, dtype=torch.float64) for _ in range(3))
    t = int(ref.timesteps[3])
    t_prev = t - 1000 // 10
    want = ref.step(eps_pred, t, x_t, eta=eta, variance_noise=z).prev_sample
    lvl, lvl_prev = torch.full((1, 1), t), torch.full((1, 1), t_prev)
    x0, eps = obj.x0_eps(eps_pred, x_t, lvl)
    ab, ab_prev = (obj._bcast(obj.schedule.abar_at(v), x_t).double() for v in (lvl, lvl_prev))
    got = ddim_step(x0, eps, ab, ab_prev, eta, z)
    assert torch.allclose(got.float(), want.float(), atol=1e-5)


class _TinyDenoiser(torch.nn.Module):
    """A tiny NanoWM for sampler tests, counting its calls and the levels its context frames were fed at."""

    def __init__(self):
        super().__init__()
        from ttlab.worldmodel.model import NanoWM, size_config

        torch.manual_seed(0)
        self.net = NanoWM(size_config("tiny", input_size=8, hidden=32, depth=2, heads=2))
        with torch.no_grad():
            for p in self.net.parameters():
                p.add_(torch.randn_like(p) * 0.05)
        self.calls, self.ctx_t = 0, set()

    def forward(self, x, t, a):
        self.calls += 1
        self.ctx_t.add(float(t[0, 0]))
        return self.net(x, t, a)


def test_official_default_sampler_is_sequential_250_steps_history_002_on_a_tiny_model():
    from ttlab.worldmodel.diffusion.samplers import OFFICIAL_SAMPLER

    assert OFFICIAL_SAMPLER == {"mode": "sequential", "n_steps": 250, "history_noise": 0.02}
    obj = Objective(DiffusionConfig(target="v"))
    model = _TinyDenoiser()
    ctx = torch.rand(1, 1, 3, 8, 8) * 2 - 1
    out = sample_window(model, obj, ctx, torch.randn(1, 3, 2), n_gen=2, generator=torch.Generator().manual_seed(0),
                        mode=OFFICIAL_SAMPLER["mode"], n_steps=OFFICIAL_SAMPLER["n_steps"],
                        history_noise=OFFICIAL_SAMPLER["history_noise"])
    assert model.calls == 250 * 2  # sequential: each generated frame gets its own 250 steps
    assert model.ctx_t == {19.0}  # the context frame is always fed at 2% noise: timestep 19 of 1000
    assert torch.equal(out[:, :1], ctx) and torch.isfinite(out).all()


def test_stochastic_ddim_eta_on_a_tiny_model():
    obj = Objective(DiffusionConfig(target="v"))
    model = _TinyDenoiser()
    ctx, acts = torch.rand(2, 1, 3, 8, 8) * 2 - 1, torch.randn(2, 3, 2)

    def run(eta, seed):
        return sample_window(model, obj, ctx, acts, n_gen=2, n_steps=6, eta=eta,
                             generator=torch.Generator().manual_seed(seed))

    det, s1, s1b, s2 = run(0.0, 0), run(1.0, 0), run(1.0, 0), run(1.0, 1)
    assert torch.equal(s1, s1b)  # seeded: reproducible
    assert not torch.allclose(s1[:, 1:], det[:, 1:], atol=1e-3)  # eta adds noise along the way
    assert not torch.allclose(s1[:, 1:], s2[:, 1:], atol=1e-3)
    assert torch.equal(s1[:, :1], ctx)
    flow = Objective(DiffusionConfig(target="flow", zero_terminal_snr=False, snr_gamma=0.0))
    with pytest.raises(ValueError, match="eta"):
        sample_window(model, flow, ctx, acts, n_gen=2, n_steps=2, eta=0.5)


def test_eval_and_rollout_resolve_the_official_sampler_flag():
    from ttlab.worldmodel.diffusion import SamplerConfig
    from ttlab.worldmodel.evaluate import EvalConfig
    from ttlab.worldmodel.rollouts import RolloutConfig

    for cls in (EvalConfig, RolloutConfig):
        off = cls(sampler=SamplerConfig(official_sampler=True, steps=3, mode="pyramid")).sampler.resolve(run_steps=1)
        assert (off.steps, off.mode, off.history_noise) == (250, "sequential", 0.02)
        own = cls().sampler.resolve(run_steps=7)
        assert (own.steps, own.mode, own.history_noise, own.eta) == (7, "full_sequence", 0.0, 0.0)


def test_delta_objective_makes_copy_last_the_zero_function_at_every_level():
    """delta=True: the process runs on the change from the last context frame, so a model that outputs zeros
    (x target) has copy-last's loss at any level and samples copy-last in any number of steps; the context
    comes back exactly and the model is handed the anchor frame as conditioning."""
    from ttlab.worldmodel.model import NanoWM, size_config

    cfg = DiffusionConfig(target="x", timestep_sampling="uniform", clean_context_prob=1.0, context_frames=2,
                          delta=True, delta_scale=2.0, snr_gamma=0.0)
    obj = Objective(cfg)
    seen = {}

    def zero(x_t, t, actions, cond=None):
        seen["cond"] = cond
        return torch.zeros_like(x_t)

    g = torch.Generator().manual_seed(0)
    x0 = torch.rand(3, 5, 3, 8, 8, generator=g) * 2 - 1
    loss, _ = obj.loss(zero, x0, torch.zeros(3, 5, 2), generator=g)
    copy = ((x0[:, 2:] - x0[:, 1:2]) * 2.0).pow(2).mean()  # the scaled change of the predicted frames
    assert loss.item() == pytest.approx(copy.item(), rel=1e-5)
    assert torch.equal(seen["cond"], x0[:, 1])
    out = sample_window(zero, obj, x0[:, :2], torch.zeros(3, 5, 2), n_gen=3, n_steps=10, generator=g)
    assert torch.equal(out[:, :2], x0[:, :2])
    torch.testing.assert_close(out[:, 2:], x0[:, 1:2].expand(-1, 3, -1, -1, -1))
    model = NanoWM(size_config("tiny", input_size=8, cond_channels=3))
    with pytest.raises(ValueError, match="cond"):
        sample_window(model, Objective(DiffusionConfig(target="x")), x0[:, :2], torch.zeros(3, 5, 2), 3, 2)


def test_delta_config_needs_clean_context():
    with pytest.raises(ValueError, match="delta"):
        DiffusionConfig(target="x", delta=True, clean_context_prob=0.5)


def test_change_weights_golden_and_loss_counts_changed_pixels_more():
    from ttlab.worldmodel.diffusion.objective import change_weights

    anchor = torch.zeros(1, 1, 3, 2, 2)
    x0 = torch.zeros(1, 2, 3, 2, 2)
    x0[0, 1, 2, 0, 1] = 0.5  # one pixel of frame 1 changes in one channel
    x0[0, 1, 0, 1, 1] = 0.05  # below the threshold
    w = change_weights(x0, anchor, weight=9.0, threshold=0.1)
    assert w.shape == (1, 2, 1, 2, 2)
    assert torch.equal(w[0, 1, 0], torch.tensor([[1.0, 10.0], [1.0, 1.0]])) and torch.equal(w[0, 0], torch.ones(1, 2, 2))

    def zero(x_t, t, actions, cond=None):
        return torch.zeros_like(x_t)

    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 4, 3, 6, 6, generator=g) * 2 - 1
    base = dict(target="x", timestep_sampling="uniform", clean_context_prob=1.0, context_frames=2, delta=True,
                snr_gamma=0.0)
    plain, _ = Objective(DiffusionConfig(**base)).loss(zero, x, torch.zeros(2, 4, 2), torch.Generator().manual_seed(1))
    weighted, _ = Objective(DiffusionConfig(**base, change_weight=3.0)).loss(zero, x, torch.zeros(2, 4, 2),
                                                                             torch.Generator().manual_seed(1))
    d = x[:, 2:] - x[:, 1:2]  # the change of the predicted frames; the zero model's error is exactly it
    wd = 1 + 3.0 * (d.abs().amax(2, keepdim=True) > 0.1).float()
    assert plain.item() == pytest.approx(d.pow(2).mean().item(), rel=1e-5)
    assert weighted.item() == pytest.approx((wd * d.pow(2)).mean().item(), rel=1e-5)
    with pytest.raises(ValueError, match="change_weight"):
        DiffusionConfig(target="x", change_weight=1.0)


def test_context_noise_corrupts_the_context_and_anchor_but_not_the_target():
    """context_noise: the clean context frames (the delta's anchor included) get sigma * eps with a per-clip
    sigma in [0, context_noise); the loss still targets the true future, so a zero-change model is scored
    against the change from the noised anchor. The other draws are those of the same config without it."""
    base = dict(target="x", timestep_sampling="uniform", clean_context_prob=1.0, context_frames=2, delta=True,
                delta_scale=2.0, snr_gamma=0.0)
    obj = Objective(DiffusionConfig(**base, context_noise=0.1))
    d = obj.draw(64, 5, (3, 4, 4), "cpu", torch.Generator().manual_seed(3))
    plain = Objective(DiffusionConfig(**base)).draw(64, 5, (3, 4, 4), "cpu", torch.Generator().manual_seed(3))
    assert set(plain) == {"level", "ctx", "eps"} and all(torch.equal(d[k], plain[k]) for k in plain)
    assert d["ctx_sigma"].shape == (64,) and 0 <= d["ctx_sigma"].min() and d["ctx_sigma"].max() < 0.1
    assert d["ctx_sigma"].std() > 0.02  # drawn per clip, not one value

    seen = {}

    def zero(x_t, t, actions, cond=None):
        seen["x_t"], seen["cond"] = x_t, cond
        return torch.zeros_like(x_t)

    x0 = torch.rand(64, 5, 3, 4, 4, generator=torch.Generator().manual_seed(4)) * 2 - 1
    loss, _ = obj.loss(zero, x0, torch.zeros(64, 5, 2), draws=d)
    sig = d["ctx_sigma"].reshape(64, 1, 1, 1, 1)
    ctx = x0[:, :2] + sig * d["eps"][:, :2]  # the noised context frames
    anchor = ctx[:, 1:2]
    torch.testing.assert_close(seen["cond"], anchor[:, 0])
    torch.testing.assert_close(seen["x_t"][:, :2], (ctx - anchor) * 2.0)  # clean level: the context comes back as is
    expected = ((x0[:, 2:] - anchor) * 2.0).pow(2).mean()  # the true future against the noised anchor
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    clean, _ = Objective(DiffusionConfig(**base)).loss(zero, x0, torch.zeros(64, 5, 2), draws=plain)
    assert clean.item() == pytest.approx(((x0[:, 2:] - x0[:, 1:2]) * 2.0).pow(2).mean().item(), rel=1e-5)
    with pytest.raises(ValueError, match="context_noise"):
        DiffusionConfig(target="x", context_noise=-0.1)
    with pytest.raises(ValueError, match="context_noise"):
        DiffusionConfig(target="x", context_noise=0.1, clean_context_prob=0.0)
