"""Transformer KV cache: training forward == step-by-step forward_eval; masking contracts."""

from __future__ import annotations

import pytest
import torch

from ttlab.drive.policy import ObsLayout, TransformerPolicy
from ttlab.drive.ppo import loss_context

LAYOUT = ObsLayout(ego_dim=5, partner_slots=3, partner_dim=4, road_slots=4, road_dim=5, road_type_col=4,
                   num_road_types=4)


def _policy(horizon: int = 6, layers: int = 2) -> TransformerPolicy:
    torch.manual_seed(0)
    return TransformerPolicy(LAYOUT, num_actions=7, d_model=16, embed=8, n_layers=layers, n_heads=2,
                             horizon=horizon).eval()


def _obs(B: int, T: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(B, T, LAYOUT.obs_dim, generator=g)
    r0 = LAYOUT.obs_dim - LAYOUT.road_slots * LAYOUT.road_dim
    road = obs[..., r0:].reshape(B, T, LAYOUT.road_slots, LAYOUT.road_dim)
    road[..., LAYOUT.road_type_col] = torch.randint(0, LAYOUT.num_road_types, (B, T, LAYOUT.road_slots), generator=g).float()
    obs[..., r0:] = road.reshape(B, T, -1)
    return obs


def _step_through(policy, obs, terms, removed, state=None):
    B, T = obs.shape[:2]
    state = state or policy.initial_state(B)
    logits, values = [], []
    for t in range(T):
        lg, v, state = policy.forward_eval(obs[:, t], state, terms[:, t], removed[:, t])
        logits.append(lg)
        values.append(v)
    return torch.stack(logits, 1), torch.stack(values, 1), state


def _rows():
    """Row 0: one episode; row 1: two episodes; row 2: three episodes; rows 1-3 have limbo slots."""
    T = 14
    terms = torch.zeros(4, T, dtype=torch.bool)
    removed = torch.zeros(4, T, dtype=torch.bool)
    terms[:, 0] = True
    terms[1, 7] = True
    terms[2, [4, 9]] = True
    terms[3, 11] = True
    removed[1, 3:7] = True  # limbo until the episode ends
    removed[2, [2, 3, 7, 8, 12]] = True
    removed[3, 5:9] = True  # limbo then back (a trial reset) within the same episode
    return T, terms, removed


def test_forward_equals_step_by_step_forward_eval_for_1_2_3_episodes_and_limbo():
    policy = _policy(horizon=6)  # horizon < T so the ring wraps inside an episode too
    T, terms, removed = _rows()
    obs = _obs(4, T)
    with torch.no_grad():
        lg_seq, v_seq, _ = policy(obs, terms, removed)
        lg_step, v_step, _ = _step_through(policy, obs, terms, removed)
    assert torch.allclose(lg_seq, lg_step, atol=1e-5, rtol=0), (lg_seq - lg_step).abs().max()
    assert torch.allclose(v_seq, v_step, atol=1e-5, rtol=0), (v_seq - v_step).abs().max()


def test_horizon_covering_the_episode_matches_too():
    policy = _policy(horizon=32, layers=3)
    T, terms, removed = _rows()
    obs = _obs(4, T)
    with torch.no_grad():
        lg_seq, v_seq, _ = policy(obs, terms, removed)
        lg_step, v_step, _ = _step_through(policy, obs, terms, removed)
    assert (lg_seq - lg_step).abs().max() < 1e-5
    assert (v_seq - v_step).abs().max() < 1e-5


def test_prefill_from_a_prefix_then_stepping_equals_forward_over_the_whole_row():
    """The rollout rebuilds its cache from the row prefix; training sees the prefix + segment."""
    policy = _policy(horizon=5)
    T, terms, removed = _rows()
    obs = _obs(4, T)
    pos0 = torch.tensor([3, 0, 1, 2])
    terms[:, 0] = False  # rows start mid-episode
    terms[1, 0] = True
    C = 6
    with torch.no_grad():
        lg_full, v_full, _ = policy(obs, terms, removed, pos0=pos0)
        _, _, cache = policy(obs[:, :C], terms[:, :C], removed[:, :C], pos0=pos0, return_state=True)
        lg_step, v_step, _ = _step_through(policy, obs[:, C:], terms[:, C:], removed[:, C:], state=cache)
    assert (lg_full[:, C:] - lg_step).abs().max() < 1e-5
    assert (v_full[:, C:] - v_step).abs().max() < 1e-5


def test_removed_slots_are_never_read_later():
    policy = _policy(horizon=16)
    T = 6
    obs = _obs(1, T)
    terms = torch.zeros(1, T, dtype=torch.bool)
    terms[0, 0] = True
    removed = torch.zeros(1, T, dtype=torch.bool)
    removed[0, 2] = True
    obs2 = obs.clone()
    obs2[0, 2] += 5.0  # change what the agent saw in limbo
    with torch.no_grad():
        a, _, _ = policy(obs, terms, removed)
        b, _, _ = policy(obs2, terms, removed)
    assert torch.equal(a[0, 3:], b[0, 3:])
    assert not torch.allclose(a[0, 2], b[0, 2])  # the limbo query itself still sees itself


def test_no_attention_across_episode_boundaries_but_kept_across_trials():
    policy = _policy(horizon=16)
    T = 6
    obs = _obs(1, T)
    obs2 = obs.clone()
    obs2[0, 1] += 3.0
    terms = torch.zeros(1, T, dtype=torch.bool)
    removed = torch.zeros(1, T, dtype=torch.bool)
    terms[0, 0] = True
    terms[0, 3] = True  # new episode at t=3
    with torch.no_grad():
        a, _, _ = policy(obs, terms, removed)
        b, _, _ = policy(obs2, terms, removed)
    assert torch.equal(a[0, 3:], b[0, 3:])  # the new episode cannot see t=1
    assert not torch.allclose(a[0, 2], b[0, 2])  # the same episode (e.g. a later trial) can


def test_partial_reset_touches_only_the_masked_agents():
    policy = _policy(horizon=8)
    obs = _obs(3, 4)
    f = torch.zeros(3, dtype=torch.bool)
    with torch.no_grad():
        state = policy.initial_state(3)
        for t in range(3):
            _, _, state = policy.forward_eval(obs[:, t], state, f, f)
        valid_before = state.valid.clone()
        state.reset_agents(torch.tensor([False, True, False]))
    assert state.pos.tolist() == [3, 0, 3]
    assert torch.equal(state.valid[0], valid_before[0]) and not state.valid[1].any()


def test_no_all_masked_rows_even_when_everything_is_removed():
    policy = _policy(horizon=4)
    obs = _obs(2, 5)
    terms = torch.ones(2, 5, dtype=torch.bool)
    removed = torch.ones(2, 5, dtype=torch.bool)
    with torch.no_grad():
        lg, v, _ = policy(obs, terms, removed)
    assert torch.isfinite(lg).all() and torch.isfinite(v).all()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_parity_on_cuda():
    policy = _policy(horizon=6).cuda()
    T, terms, removed = _rows()
    obs = _obs(4, T).cuda()
    terms, removed = terms.cuda(), removed.cuda()
    with torch.no_grad():
        lg_seq, _, _ = policy(obs, terms, removed)
        lg_step, _, _ = _step_through(policy, obs, terms, removed)
    assert (lg_seq - lg_step).abs().max() < 1e-4


def _loss_mask(T: int, removed: torch.Tensor) -> torch.Tensor:
    """Loss steps: the last 5 columns (as after a context prefix), minus limbo; row 0 has none at all."""
    mask = torch.zeros(4, T, dtype=torch.bool)
    mask[:, T - 5:] = True
    mask[0] = False
    return mask & ~removed


def test_skipping_tokens_no_loss_reads_changes_no_loss_output_or_gradient():
    policy = _policy(horizon=6)
    T, terms, removed = _rows()
    obs = _obs(4, T)
    mask = _loss_mask(T, removed)
    needed = loss_context(mask, terms, removed, memoryless=False)
    assert needed.sum() < needed.numel() and (needed | ~mask).all()

    def run(**kw):
        policy.zero_grad()
        lg, v, _ = policy(obs, terms, removed, pos0=torch.tensor([2, 0, 1, 3]), **kw)
        (torch.where(mask.unsqueeze(-1), lg, 0.0).square().sum() + torch.where(mask, v, 0.0).sum()).backward()
        return lg[mask], v[mask], [p.grad.clone() for p in policy.parameters()]

    lg_a, v_a, g_a = run()
    lg_b, v_b, g_b = run(needed=needed)
    assert torch.allclose(lg_a, lg_b, atol=1e-5, rtol=0) and torch.allclose(v_a, v_b, atol=1e-5, rtol=0)
    for a, b in zip(g_a, g_b, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4), (a - b).abs().max()


def test_prefill_from_only_the_current_episode_gives_the_same_cache():
    policy = _policy(horizon=8)
    T, terms, removed = _rows()
    obs = _obs(4, T)
    ep = terms.long().cumsum(dim=1)
    needed = ~removed & (ep == ep[:, -1:])  # what the rollout passes when it rebuilds the cache
    with torch.no_grad():
        _, _, full = policy(obs, terms, removed, return_state=True)
        _, _, part = policy(obs, terms, removed, return_state=True, needed=needed)
    assert torch.equal(full.valid, part.valid) and torch.equal(full.pos, part.pos)
    v = full.valid[None, :, None, :, None]  # (1, N, 1, S, 1)
    assert torch.allclose(full.k * v, part.k * v, atol=1e-5, rtol=0)
    assert torch.allclose(full.v * v, part.v * v, atol=1e-5, rtol=0)


@pytest.mark.parametrize("M", [3, 6, 9])
def test_forward_from_prefill_memory_equals_the_full_forward_on_the_new_tokens(M):
    """Training with the prefix's keys/values as memory (from `prefill`) is the full forward's function."""

    policy = _policy(horizon=M + 1)
    T, terms, removed = _rows()
    obs = _obs(4, T)
    pos0 = torch.tensor([2, 0, 1, 3])
    ep = terms[:, :M].long().cumsum(dim=1)
    pre_needed = ~removed[:, :M] & (ep == ep[:, -1:])  # what the rollout passes
    _, memory = policy.prefill(obs[:, :M], terms[:, :M], removed[:, :M], pos0=pos0, needed=pre_needed)
    mask = _loss_mask(T, removed)
    mask[:, :M] = False
    needed = loss_context(mask, terms, removed, memoryless=False)[:, M:]
    with torch.no_grad():
        lg_full, v_full, _ = policy(obs, terms, removed, pos0=pos0)
        for kw in ({}, {"needed": needed}):
            lg, v, _ = policy(obs[:, M:], terms, removed, pos0=pos0, memory=memory, **kw)
            sel = mask[:, M:]
            assert torch.allclose(lg[sel], lg_full[:, M:][sel], atol=1e-5, rtol=0)
            assert torch.allclose(v[sel], v_full[:, M:][sel], atol=1e-5, rtol=0)


def test_memory_gets_no_gradient_and_a_wrong_width_is_refused():
    policy = _policy(horizon=6).train()
    T, terms, removed = _rows()
    obs = _obs(4, T)
    _, (k, v) = policy.prefill(obs[:, :5], terms[:, :5], removed[:, :5])
    k.requires_grad_(True)
    lg, _, _ = policy(obs[:, 5:], terms, removed, memory=(k, v))
    lg.sum().backward()
    assert k.grad is None
    with pytest.raises(ValueError, match="memory"):
        policy(obs[:, 4:], terms, removed, memory=(k, v))


def test_stepping_only_the_active_agents_changes_nothing_for_them():
    """forward_eval(active=...) equals the full step on the active agents; inactive steps stay out of the cache."""
    policy = _policy(horizon=6)
    T, terms, removed = _rows()
    obs = _obs(4, T)
    g = torch.Generator().manual_seed(3)
    inactive = torch.rand(4, T, generator=g) < 0.2  # e.g. slots another policy drives
    s_full, s_act = policy.initial_state(4), policy.initial_state(4)
    with torch.no_grad():
        for t in range(T):
            gone = removed[:, t] | inactive[:, t]  # the full path sees inactive steps as removed ones
            lg_a, v_a, s_full = policy.forward_eval(obs[:, t], s_full, terms[:, t], gone)
            act = ~removed[:, t] & ~inactive[:, t]
            lg_b, v_b, s_act = policy.forward_eval(obs[:, t], s_act, terms[:, t], removed[:, t], active=act)
            assert torch.allclose(lg_a[act], lg_b[act], atol=1e-5, rtol=0)
            assert torch.allclose(v_a[act], v_b[act], atol=1e-5, rtol=0)
            assert torch.equal(s_full.valid, s_act.valid) and torch.equal(s_full.pos, s_act.pos)
