"""PPO losses: golden numbers, valid-step masking, normalisation over valid steps only."""

from __future__ import annotations

import math

import pytest
import torch

from ttlab.drive.policy import LSTMPolicy, MLPPolicy, ObsLayout
from ttlab.drive.policy.dist import entropy, log_prob
from ttlab.drive.ppo import explained_variance, loss_context, masked_mean, normalize_advantages, ppo_losses


def _golden_inputs():
    new_lp = torch.tensor([0.0, math.log(0.5), 123.0], requires_grad=True)
    old_lp = torch.tensor([math.log(0.5), 0.0, -50.0])
    adv = torch.tensor([1.0, -1.0, 1e6])
    new_v = torch.tensor([1.0, 0.0, 55.0], requires_grad=True)
    old_v = torch.tensor([0.5, 0.0, 0.0])
    ret = torch.tensor([2.0, 1.0, -1e3])
    ent = torch.tensor([1.0, 3.0, 1e3])
    mask = torch.tensor([True, True, False])
    return new_lp, old_lp, adv, new_v, old_v, ret, ent, mask


def test_ppo_losses_golden_numbers_ignore_the_masked_step():
    new_lp, old_lp, adv, new_v, old_v, ret, ent, mask = _golden_inputs()
    out = ppo_losses(new_lp, old_lp, adv, new_v, old_v, ret, ent, mask, clip_coef=0.2, vf_clip_coef=0.2,
                     ent_coef=0.01, vf_coef=0.5)
    # ratio 2, adv 1 -> max(-2, -1.2) = -1.2 ; ratio .5, adv -1 -> max(.5, .8) = .8
    assert out["policy_loss"].item() == pytest.approx(-0.2, abs=1e-6)
    # value: max(1, (0.7-2)^2=1.69) and max(1, 1) -> 0.5 * mean(1.69, 1)
    assert out["value_loss"].item() == pytest.approx(0.6725, abs=1e-6)
    assert out["entropy"].item() == pytest.approx(2.0, abs=1e-6)
    assert out["approx_kl"].item() == pytest.approx(0.25, abs=1e-5)
    assert out["clipfrac"].item() == pytest.approx(1.0)
    assert out["loss"].item() == pytest.approx(-0.2 - 0.02 + 0.5 * 0.6725, abs=1e-6)


def test_masked_steps_get_exactly_zero_gradient():
    new_lp, old_lp, adv, new_v, old_v, ret, ent, mask = _golden_inputs()
    out = ppo_losses(new_lp, old_lp, adv, new_v, old_v, ret, ent, mask)
    out["loss"].backward()
    assert new_lp.grad[2].item() == 0.0 and new_v.grad[2].item() == 0.0
    assert new_v.grad[:2].abs().sum() > 0  # (both policy terms are clipped: zero policy gradient there)


def test_removed_steps_contribute_zero_gradient_through_the_policy():
    torch.manual_seed(0)
    layout = ObsLayout(ego_dim=3, partner_slots=2, partner_dim=2, road_slots=2, road_dim=3, road_type_col=2,
                       num_road_types=3)
    pol = MLPPolicy(layout, num_actions=4, embed=8, hidden=16)
    obs = torch.randn(2, 5, layout.obs_dim, requires_grad=True)
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[1, 2:] = False
    logits, values, _ = pol(obs, mask, ~mask)
    act = torch.randint(0, 4, (2, 5))
    lp = log_prob(logits, act, False)
    out = ppo_losses(lp, lp.detach() - 0.1, torch.randn(2, 5), values, values.detach(), torch.randn(2, 5),
                     entropy(logits, False), mask)
    out["loss"].backward()
    assert obs.grad[1, 2:].abs().max().item() == 0.0
    assert obs.grad[0].abs().max().item() > 0.0


def test_advantage_normalisation_uses_valid_steps_only():
    adv = torch.tensor([1.0, 2.0, 3.0, 100.0])
    mask = torch.tensor([True, True, True, False])
    assert normalize_advantages(adv, mask).tolist() == pytest.approx([-1.0, 0.0, 1.0, 0.0], abs=1e-6)


def test_masked_mean_and_explained_variance():
    x = torch.tensor([1.0, float("nan"), 3.0])
    m = torch.tensor([True, False, True])
    assert masked_mean(x, m).item() == 2.0
    ret = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(ret, ret, torch.ones(4, dtype=torch.bool)).item() == pytest.approx(1.0)
    assert explained_variance(torch.zeros(4), ret, torch.ones(4, dtype=torch.bool)).item() == pytest.approx(0.0)


def test_continuous_distribution_logprob_matches_torch_normal():
    logits = torch.tensor([[0.3, -0.2, -0.5, 0.1]])
    a = torch.tensor([[0.1, 0.4]])
    ref = torch.distributions.Normal(logits[:, :2], logits[:, 2:].exp())
    assert log_prob(logits, a, True).item() == pytest.approx(ref.log_prob(a).sum().item(), abs=1e-6)
    assert entropy(logits, True).item() == pytest.approx(ref.entropy().sum().item(), abs=1e-6)


def test_loss_context_is_the_loss_steps_plus_what_they_can_read():
    #            t: 0  1  2  3  4  5  6
    terms = torch.tensor([[1, 0, 0, 1, 0, 0, 1]]).bool()
    removed = torch.tensor([[0, 0, 0, 0, 1, 0, 0]]).bool()
    mask = torch.tensor([[0, 0, 0, 0, 0, 1, 0]]).bool()
    assert torch.equal(loss_context(mask, terms, removed, memoryless=True), mask)
    # the episode of step 5 is steps 3-5: step 4 is in limbo (never read), the others belong to other episodes
    assert loss_context(mask, terms, removed, memoryless=False).long().tolist() == [[0, 0, 0, 1, 0, 1, 0]]


def test_skipping_unneeded_tokens_leaves_lstm_losses_and_gradients_unchanged():
    torch.manual_seed(0)
    layout = ObsLayout(ego_dim=3, partner_slots=2, partner_dim=2, road_slots=2, road_dim=3, road_type_col=2,
                       num_road_types=3)
    pol = LSTMPolicy(layout, num_actions=4, embed=8, hidden=16)
    obs = torch.randn(3, 8, layout.obs_dim)
    terms = torch.zeros(3, 8, dtype=torch.bool)
    terms[:, 0] = True
    terms[1, 4] = True
    removed = torch.zeros(3, 8, dtype=torch.bool)
    removed[2, 2:4] = True
    mask = torch.zeros(3, 8, dtype=torch.bool)
    mask[:, 5:] = True
    state0 = tuple(torch.randn(3, 16) for _ in range(2))

    def run(needed=None):
        pol.zero_grad()
        lg, v, _ = pol(obs, terms, removed, state=state0, needed=needed)
        (torch.where(mask.unsqueeze(-1), lg, 0.0).square().sum() + torch.where(mask, v, 0.0).sum()).backward()
        return lg[mask], [p.grad.clone() for p in pol.parameters()]

    lg_a, g_a = run()
    lg_b, g_b = run(loss_context(mask, terms, removed, memoryless=False))
    assert torch.allclose(lg_a, lg_b, atol=1e-6)
    for a, b in zip(g_a, g_b, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)
