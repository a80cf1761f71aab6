"""GAE with bootstrap stopping on terminals, truncations and removed: golden numbers and parity."""

from __future__ import annotations

import pytest
import torch

from ttlab.drive.advantage import gae, gae_reference, stop_flags


def test_gae_golden_numbers_with_a_stop_in_the_middle():
    rewards = torch.tensor([[1.0, 0.0, 2.0]])
    values = torch.tensor([[0.5, 0.2, 0.1]])
    stop = torch.tensor([[False, True, False]])
    adv, ret = gae(rewards, values, torch.tensor([0.3]), stop, gamma=0.9, lam=0.8)
    # t=2: 2 + .9*.3 - .1 = 2.17 ; t=1 (stop): 0 - .2 = -.2 ; t=0: 1 + .9*.2 - .5 + .72*(-.2) = .536
    assert adv.tolist()[0] == pytest.approx([0.536, -0.2, 2.17], abs=1e-6)
    assert ret.tolist()[0] == pytest.approx([1.036, 0.0, 2.27], abs=1e-6)


def test_stop_flags_combine_terminal_truncation_and_next_removed():
    f = torch.tensor([[False, False, False, False]])
    term = torch.tensor([[False, False, False, True]])
    trunc = torch.tensor([[True, False, False, False]])
    nxt_removed = torch.tensor([[False, True, False, False]])
    assert stop_flags(term, trunc, nxt_removed).tolist() == [[True, True, False, True]]
    assert not stop_flags(f, f, f).any()


def test_no_bootstrap_through_a_stop_even_with_huge_later_values():
    rewards = torch.zeros(1, 4)
    values = torch.tensor([[0.0, 1e6, 1e6, 1e6]])
    stop = torch.tensor([[True, False, False, False]])
    adv, _ = gae(rewards, values, torch.tensor([1e6]), stop, 0.99, 0.95)
    assert adv[0, 0].item() == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_gae_matches_reference_loop(seed):
    g = torch.Generator().manual_seed(seed)
    B, T = 5, 17
    rewards = torch.randn(B, T, generator=g)
    values = torch.randn(B, T, generator=g)
    nv = torch.randn(B, generator=g)
    stop = torch.rand(B, T, generator=g) < 0.2
    adv, _ = gae(rewards, values, nv, stop, 0.97, 0.9)
    ref = gae_reference(rewards.tolist(), values.tolist(), nv.tolist(), stop.tolist(), 0.97, 0.9)
    assert torch.allclose(adv, torch.tensor(ref), atol=1e-5)
