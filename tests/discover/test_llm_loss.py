"""Golden numbers for the importance-sampled PG loss with the KL penalty folded into the advantage."""

from __future__ import annotations

import math

import torch

from ttlab.discover.llm.loss import is_pg_loss


def test_golden_loss_and_gradient_with_kl_folded_into_advantage():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    sampler = torch.tensor([[-1.0, -2.0]])
    base = torch.tensor([[-1.5, -2.0]])
    loss, st = is_pg_loss(logp, sampler, base, torch.tensor([2.0]), torch.ones(1, 2), normalizer=2.0, kl_coef=0.1)
    # adv_tok = [2 - 0.1 * 0.5, 2 - 0] = [1.95, 2]; ratio = 1; loss = -(1.95 + 2) / 2
    assert math.isclose(loss.item(), -1.975, rel_tol=1e-6)
    loss.backward()
    assert torch.allclose(logp.grad, torch.tensor([[-0.975, -1.0]]))
    assert math.isclose(st.kl.item(), 0.5, rel_tol=1e-6) and st.tokens.item() == 2
    assert math.isclose(st.ratio.item(), 2.0, rel_tol=1e-6)


def test_off_policy_tokens_are_reweighted_by_the_importance_ratio():
    logp = torch.tensor([[math.log(0.5)]], requires_grad=True)
    sampler = torch.tensor([[math.log(0.25)]])  # ratio 2
    loss, st = is_pg_loss(logp, sampler, None, torch.tensor([1.0]), torch.ones(1, 1), normalizer=1.0, kl_coef=0.0)
    loss.backward()
    assert math.isclose(loss.item(), -2.0, rel_tol=1e-6)
    assert math.isclose(logp.grad.item(), -2.0, rel_tol=1e-6)  # d(-ratio*A)/dlogp = -ratio*A
    assert math.isclose(st.ratio_max.item(), 2.0, rel_tol=1e-6)


def test_ratio_cap_caps_the_weight_not_the_direction():
    logp = torch.tensor([[0.0, 0.0]], requires_grad=True)
    sampler = torch.tensor([[-3.0, 0.0]])  # ratios e^3 and 1
    loss, st = is_pg_loss(logp, sampler, None, torch.tensor([1.0]), torch.ones(1, 2), 1.0, 0.0, ratio_cap=2.0)
    loss.backward()
    assert torch.allclose(logp.grad, torch.tensor([[-2.0, -1.0]]))
    assert st.clipped.item() == 1


def test_padding_tokens_contribute_nothing():
    logp = torch.tensor([[-1.0, -7.0]], requires_grad=True)
    loss, _ = is_pg_loss(logp, torch.tensor([[-1.0, -1.0]]), torch.zeros(1, 2), torch.tensor([1.0]),
                         torch.tensor([[1.0, 0.0]]), 1.0, 0.1)
    loss.backward()
    assert logp.grad[0, 1] == 0


def test_micro_batch_accumulation_equals_the_full_batch():
    torch.manual_seed(0)
    lp = torch.randn(4, 5) - 2
    samp = lp + 0.1 * torch.randn(4, 5)
    base = lp + 0.2 * torch.randn(4, 5)
    adv = torch.randn(4)
    mask = (torch.rand(4, 5) > 0.3).float()
    n = float(mask.sum())
    full = lp.clone().requires_grad_()
    is_pg_loss(full, samp, base, adv, mask, n)[0].backward()
    acc = lp.clone().requires_grad_()
    for s in (slice(0, 1), slice(1, 4)):
        is_pg_loss(acc[s], samp[s], base[s], adv[s], mask[s], n)[0].backward()
    assert torch.allclose(full.grad, acc.grad, atol=1e-7)
